"""Metrics and traces, pure logic: the buckets, the label set, the turn timeline derived
from events, and that traces cost nothing (not even an import) when they are off."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from voice.events import (
    Error,
    Event,
    Final,
    Interrupted,
    KnowledgeAnswer,
    Paused,
    ReplyStarted,
    SpeculationCancelled,
    SpeculationStarted,
    SpeechEnd,
    TurnContinued,
    TurnMetrics,
)
from voice.serve.metrics import BUCKETS_S, HISTOGRAMS, MAX_LABEL_VALUES, ServerMetrics
from voice.serve.phases import SPAN_NAMES, SpeculationEnded, TurnTimeline, TurnTracker
from voice.serve.tracing import TraceConfig, make_tracer, wanted

ROOT = Path(__file__).resolve().parents[2]
ALLOWED_LABELS = {"code", "reason", "outcome", "kind"}  # never a conversation or a user


def histogram_quantile(q: float, edges: tuple[float, ...], counts: list[int]) -> float:
    """Prometheus's estimate from cumulative bucket counts (linear within a bucket)."""
    total = counts[-1]
    rank = q * total
    lower, below = 0.0, 0
    for edge, cumulative in zip(edges, counts, strict=False):
        if cumulative >= rank:
            if edge == float("inf"):
                return lower  # as Prometheus does: the highest finite edge
            return lower + (edge - lower) * (rank - below) / max(1, cumulative - below)
        lower, below = edge, cumulative
    return edges[-1]


def _estimate_error(edges: tuple[float, ...], samples: np.ndarray, q: float) -> float:
    counts = [int((samples <= edge).sum()) for edge in edges] + [len(samples)]
    estimate = histogram_quantile(q, (*edges, float("inf")), counts)
    return abs(estimate - float(np.quantile(samples, q)))


# -- the buckets ------------------------------------------------------------------------


def test_the_buckets_cover_voice_latencies_with_an_edge_on_each_target() -> None:
    assert list(BUCKETS_S) == sorted(set(BUCKETS_S))
    assert BUCKETS_S[0] == 0.05 and BUCKETS_S[-1] == 5.0
    for target in (0.1, 0.2, 0.5, 0.8, 1.0, 1.5):  # barge-in, voice-to-voice, a loaded server
        assert target in BUCKETS_S
    below_1s = [b for b in BUCKETS_S if b <= 1.0]
    assert max(np.diff(below_1s)) <= 0.1 + 1e-9


@pytest.mark.parametrize(("median_s", "spread"), [(0.52, 0.15), (0.75, 0.35), (2.3, 0.5)])
def test_fleet_quantiles_from_the_buckets_are_close_to_the_true_ones(
    median_s: float, spread: float
) -> None:
    """Latencies shaped like `voice bench serve` and `scale` (one quiet worker, four
    clients, an overloaded pair of workers): p50 and p95 estimated from the buckets, as
    histogram_quantile does, within 50 ms below 1 s and within 12% above. Below a
    second, Prometheus's default buckets (0.25, 0.5, 1, 2.5, ...) miss by more."""
    rng = np.random.default_rng(7)
    samples = np.exp(rng.normal(np.log(median_s), spread, 4000))
    default = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
    worst_default = 0.0
    for q in (0.5, 0.95):
        truth = float(np.quantile(samples, q))
        bound = 0.05 if truth < 1.0 else 0.12 * truth
        assert _estimate_error(BUCKETS_S, samples, q) <= bound
        worst_default = max(worst_default, _estimate_error(default, samples, q) / bound)
    if median_s < 1.0:  # where the figures live, the default buckets are too coarse
        assert worst_default > 1.0


# -- the label set ----------------------------------------------------------------------


def _families(metrics: ServerMetrics) -> dict[str, object]:
    hub = {
        "sessions": 1,
        "max_sessions": 2,
        "engine_busy": 0.1,
        "by_kind": {"asr_final": {"jobs": 1, "seconds": 0.1}},
    }
    text = metrics.prometheus(hub, 1, None, 0).decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_labels_are_bounded_and_never_name_a_conversation() -> None:
    metrics = ServerMetrics()
    for n in range(3 * MAX_LABEL_VALUES):
        metrics.error(f"code_{n}")
    metrics.error("conversation_not_found")  # a real code, after the cap: other
    metrics.error("Ab3dE-f9_conversation/1")  # not a code's shape
    metrics.refuse("bad_token")
    metrics.derived(SpeculationEnded("used", 120.0))
    metrics.derived(SpeculationEnded("cancelled", 300.0))
    families = _families(metrics)
    for family in families.values():
        for sample in family.samples:  # type: ignore[attr-defined]
            assert set(sample.labels) - {"le"} <= ALLOWED_LABELS, sample
    codes = {s.labels["code"] for s in families["voice_errors"].samples}  # type: ignore[attr-defined]
    assert len(codes) <= MAX_LABEL_VALUES + 1 and "other" in codes
    assert not any("conversation" in code for code in codes)
    errors = sum(s.value for s in families["voice_errors"].samples if s.name.endswith("_total"))  # type: ignore[attr-defined]
    assert errors == 3 * MAX_LABEL_VALUES + 2  # every error counted, under some label


def test_every_documented_histogram_is_exposed_with_the_voice_buckets() -> None:
    families = _families(ServerMetrics())
    for name in HISTOGRAMS:
        family = families[name]
        assert family.type == "histogram"  # type: ignore[attr-defined]
        edges = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]  # type: ignore[attr-defined]
        assert edges == [str(b) for b in BUCKETS_S] + ["+Inf"]
    documented = (ROOT / "docs" / "serving.md").read_text()
    for name in [*HISTOGRAMS, *families]:
        name = name.removesuffix("_created")  # prometheus_client's series start times
        assert name in documented, f"{name} is not in docs/serving.md"


def test_two_servers_in_one_process_keep_their_own_figures() -> None:
    first, second = ServerMetrics(), ServerMetrics()  # the global registry would refuse this
    first.observe(_metrics_event(voice_to_voice_ms=500.0))
    one = first.prometheus({}, None).decode()
    two = second.prometheus({}, None).decode()
    assert "voice_turns_total 1.0" in one and "voice_turns_total 0.0" in two


# -- the turn timeline ------------------------------------------------------------------


def _metrics_event(**figures: float | bool | None) -> TurnMetrics:
    base: dict[str, float | bool | None] = {
        "user_start_ms": 1000.0,
        "user_end_ms": 2000.0,
        "end_silence_ms": 800.0,
        "eot_probability": None,
        "speculative": False,
        "asr_final_ms": 40.0,
        "llm_first_token_ms": None,
        "first_audio_ready_ms": None,
        "voice_to_voice_ms": None,
        "barge_in_ms": None,
        "interrupted": False,
    }
    base.update(figures)
    return TurnMetrics(audio_ms=4300.0, turn_id=1, reply_id=5, user_text="hi", **base)  # type: ignore[arg-type]


def _speculative_turn() -> list[Event]:
    """A turn whose reply was prepared in the pause, used, then cut by the user."""
    return [
        SpeculationStarted(audio_ms=1500.0, utterance_id=1, gen_id=3, text="I"),
        SpeculationCancelled(audio_ms=1700.0, gen_id=3, reason="user went on"),
        SpeculationStarted(audio_ms=2300.0, utterance_id=1, gen_id=5, text="I want tea"),
        SpeechEnd(audio_ms=2800.0, utterance_id=1, start_ms=1000.0, end_ms=2000.0),
        Final(
            audio_ms=2850.0,
            utterance_id=1,
            text="I want tea",
            start_ms=1000.0,
            end_ms=2000.0,
            compute_ms=40.0,
        ),
        ReplyStarted(
            audio_ms=2850.0, reply_id=5, utterance_id=1, text="I want tea", speculative=True
        ),
        Paused(audio_ms=4000.0, reply_id=5),
        Interrupted(audio_ms=4300.0, reply_id=5, heard_text="Sure", played_ms=1100.0),
        _metrics_event(
            speculative=True,
            llm_first_token_ms=300.0,
            first_audio_ready_ms=700.0,
            voice_to_voice_ms=900.0,
            barge_in_ms=150.0,
            interrupted=True,
        ),
    ]


def test_the_tracker_derives_each_phase_of_a_turn_from_its_events() -> None:
    tracker = TurnTracker(clock_ns=lambda: 10_000_000_000)
    seen = [tracker.observe(event) for event in _speculative_turn()]
    assert seen[1] == SpeculationEnded("cancelled", 200.0)
    assert seen[5] == SpeculationEnded("used", 550.0)  # prepared 550 ms before it was released
    turn = seen[-1]
    assert isinstance(turn, TurnTimeline)
    assert {p.name: (p.start_ms, p.end_ms) for p in turn.phases} == {
        "speech": (1000.0, 2000.0),
        "endpoint": (2000.0, 2800.0),
        "recognition": (2810.0, 2850.0),
        "speculation": (2300.0, 2850.0),
        "llm.first_token": (2300.0, 2600.0),
        "tts.first_audio": (2600.0, 2700.0),
        "playback": (2900.0, 4300.0),
        "barge_in": (3850.0, 4000.0),
    }
    assert [p.name for p in turn.phases] == [
        n for n in SPAN_NAMES if n in {p.name for p in turn.phases}
    ]
    assert turn.final_after_endpoint_ms == 50.0 and turn.tts_first_audio_ms == 100.0
    assert (turn.start_ms, turn.end_ms) == (1000.0, 4300.0)
    # The clock read 10 s at every event: the smallest offset is the latest event's.
    assert turn.wall_ns(4300.0) == 10_000_000_000


def test_the_tracker_feeds_the_derived_histograms() -> None:
    metrics, tracker = ServerMetrics(), TurnTracker()
    for event in [
        *_speculative_turn(),
        TurnContinued(audio_ms=5000.0, utterance_id=2, continues=1, reply_id=5, heard_ms=300.0),
    ]:
        metrics.observe(event)
        seen = tracker.observe(event)
        if seen is not None:
            metrics.derived(seen)
    metrics.observe(Error(audio_ms=0.0, code="llm_timeout", message="m"))
    for kind in ("say", "say", "unknown"):
        metrics.observe(
            KnowledgeAnswer(audio_ms=0.0, reply_id=9, kind=kind, entry="", confidence=0.5)
        )
    samples = {
        (s.name, tuple(s.labels.values())): s.value
        for f in _families(metrics).values()
        for s in f.samples
    }  # type: ignore[attr-defined]
    assert samples[("voice_speculations_total", ("used",))] == 1
    assert samples[("voice_speculations_total", ("cancelled",))] == 1
    assert samples[("voice_speculation_lead_seconds_sum", ())] == pytest.approx(0.55)
    assert samples[("voice_speculation_waste_seconds_sum", ())] == pytest.approx(0.2)
    assert samples[("voice_final_transcript_seconds_sum", ())] == pytest.approx(0.05)
    assert samples[("voice_tts_first_audio_seconds_sum", ())] == pytest.approx(0.1)
    assert samples[("voice_llm_first_token_seconds_sum", ())] == pytest.approx(0.3)
    assert samples[("voice_barge_in_seconds_sum", ())] == pytest.approx(0.15)
    assert samples[("voice_continuations_total", ())] == 1
    assert samples[("voice_cut_ins_total", ())] == 1
    assert samples[("voice_interruptions_total", ())] == 1
    assert samples[("voice_knowledge_answers_total", ("say",))] == 2
    assert samples[("voice_knowledge_answers_total", ("unknown",))] == 1


# -- traces: off unless asked for ---------------------------------------------------------


def test_traces_are_wanted_only_when_configured_the_standard_way() -> None:
    off = TraceConfig()
    assert not wanted(off, {})
    assert not wanted(off, {"OTEL_SERVICE_NAME": "voice"})  # a name alone sends nothing
    assert wanted(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert wanted(off, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert wanted(TraceConfig(on=True), {})
    assert not wanted(TraceConfig(on=True), {"OTEL_SDK_DISABLED": "true"})
    assert not wanted(off, {"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_TRACES_EXPORTER": "none"})
    assert make_tracer(off, 0, {}) is None


def test_with_nothing_configured_a_server_imports_no_opentelemetry() -> None:
    code = textwrap.dedent("""
        import json, os, sys
        for key in [k for k in os.environ if k.startswith("OTEL_")]:
            del os.environ[key]
        import voice.serve.server
        from voice.serve.tracing import TraceConfig, make_tracer
        tracer = make_tracer(TraceConfig(), 8765)
        print(json.dumps([tracer is None, sorted(m for m in sys.modules if "opentelemetry" in m)]))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert json.loads(out) == [True, []]


def test_a_grpc_collector_is_a_clear_error() -> None:
    from voice.errors import VoiceError

    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(VoiceError, match="4318"):
        make_tracer(TraceConfig(), 0, env)


def test_a_turn_becomes_one_trace_with_the_conversation_id_only_when_allowed() -> None:
    from services import OtlpReceiver

    receiver = OtlpReceiver()
    tracker = TurnTracker(clock_ns=lambda: 1_800_000_000_000_000_000)
    turn = [tracker.observe(event) for event in _speculative_turn()][-1]
    assert isinstance(turn, TurnTimeline)
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "unit"}
    try:
        for allowed in (False, True):
            tracer = make_tracer(TraceConfig(conversation_id=allowed), 8801, env)
            assert tracer is not None
            tracer.record(turn, "conv-1")
            tracer.shutdown()  # sends what is queued
        traces = receiver.traces()
    finally:
        receiver.stop()
    assert len(traces) == 2
    with_id = 0
    for spans in traces.values():
        (root,) = [s for s in spans if s["name"] == "voice.turn"]
        with_id += "voice.conversation_id" in root["attributes"]
        assert root["attributes"]["voice.voice_to_voice_ms"].double_value == 900.0
        assert {s["service"] for s in spans} == {"unit"}
        children = sorted((s for s in spans if s is not root), key=lambda s: s["start"])
        assert all(s["parent"] == root["id"] for s in children)
        assert [s["name"] for s in children] == [
            "speech", "endpoint", "speculation", "llm.first_token", "tts.first_audio",
            "recognition", "playback", "barge_in",
        ]  # fmt: skip
        assert root["start"] == turn.wall_ns(1000.0) and root["end"] == turn.wall_ns(4300.0)
    assert with_id == 1


# -- the shipped dashboard and scrape configuration ---------------------------------------


def dashboard_queries() -> list[str]:
    """Every PromQL expression of deploy/grafana-dashboard.json, as Grafana has it."""
    board = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_the_dashboard_asks_only_for_metrics_and_labels_that_exist() -> None:
    metrics = ServerMetrics()
    metrics.error("llm_timeout")
    metrics.refuse("server_full")
    metrics.derived(SpeculationEnded("used", 100.0))
    hub = {"sessions": 1, "max_sessions": 2, "by_kind": {"tts": {"jobs": 1, "seconds": 0.1}}}
    text = metrics.prometheus(hub, 1, None, 0).decode()
    exposed = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    labels = {k for f in text_string_to_metric_families(text) for s in f.samples for k in s.labels}
    queries = dashboard_queries()
    asked = {name for q in queries for name in re.findall(r"\b(?:voice|process)_[a-z0-9_]+", q)}
    assert asked and asked <= exposed, sorted(asked - exposed)
    grouped = {
        label.strip() for q in queries for group in re.findall(r"by \(([^)]*)\)", q)
        for label in group.split(",")
    }  # fmt: skip
    assert grouped <= labels | {"instance", "job"}, grouped  # the two Prometheus adds
    # The operator's panels are all there: fleet p50/p95, turns/s, interruptions, errors,
    # sessions.
    assert any("histogram_quantile(0.95, sum by (le)" in q for q in queries)
    assert any("histogram_quantile(0.5, sum by (le)" in q for q in queries)
    for name in ("voice_turns_total", "voice_interruptions_total", "voice_errors_total"):
        assert any(f"rate({name}" in q for q in queries), name
    assert any("voice_active_sessions" in q for q in queries)


def test_the_scrape_configuration_is_valid_for_prometheus(tmp_path: Path) -> None:
    from voice.bench.balancer import need

    token = tmp_path / "token"
    token.write_text("secret\n")
    shipped = (ROOT / "deploy" / "prometheus.yml").read_text()
    assert "/etc/prometheus/voice-serve-token" in shipped
    config = tmp_path / "prometheus.yml"
    config.write_text(shipped.replace("/etc/prometheus/voice-serve-token", str(token)))
    checked = subprocess.run([need("promtool"), "check", "config", str(config)],
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_traces_asked_for_without_opentelemetry_installed_is_one_clear_error() -> None:
    code = textwrap.dedent("""
        import sys
        sys.modules["opentelemetry.exporter.otlp.proto.http.trace_exporter"] = None  # absent
        from voice.errors import VoiceError
        from voice.serve.tracing import TraceConfig, check
        try:
            check(TraceConfig(on=True), {})
        except VoiceError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout  # fmt: skip
    assert "pip install 'voice[otel]'" in out and "not installed" in out
