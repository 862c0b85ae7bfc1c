"""Live figures for operators: ``/metrics`` through ``prometheus_client``.

Latencies are histograms, not summaries: a summary's quantiles cannot be added up
across workers, a histogram's buckets can, so Prometheus answers "voice-to-voice p95
over the whole fleet this hour" with ``histogram_quantile(0.95, sum by (le)
(rate(voice_voice_to_voice_seconds_bucket[1h])))``. The buckets (:data:`BUCKETS_S`)
are the same for every latency so that panels compare, and put an edge on each of the
project's targets (100 and 200 ms for a barge-in, 500 / 800 ms and 1 s for
voice-to-voice, 1.5 s for a loaded server), with at most 100 ms between edges up to
1 s, where the figures live.

Each server has its own :class:`~prometheus_client.CollectorRegistry`, never the
process's global one: tests, benchmarks and an embedding application may run several
servers in one process. Labels are bounded: an error code or a refusal reason is a
short snake_case word from the code base, at most :data:`MAX_LABEL_VALUES` of them per
metric; anything else is counted as ``other``. No label ever carries a conversation.

Counters and histograms are updated on the event loop's thread as events go to the
clients; the hub's figures are read when Prometheus scrapes.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from voice.events import Error as ErrorEvent
from voice.events import (
    Event,
    Interrupted,
    KnowledgeAnswer,
    ReplyStarted,
    TurnContinued,
    TurnMetrics,
)
from voice.runtime.memory import HeapUsage
from voice.serve.phases import SpeculationEnded, TurnTimeline

CONTENT_TYPE = "text/plain; version=0.0.4"
BUCKETS_S = (
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    2.0,
    2.5,
    3.0,
    4.0,
    5.0,
)
MAX_LABEL_VALUES = 40
_LABEL_VALUE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
OTHER = "other"

# name -> help; each a histogram in seconds over BUCKETS_S
HISTOGRAMS = {
    "voice_voice_to_voice_seconds": "End of the user's speech to the first reply sample played.",
    "voice_barge_in_seconds": "Onset of speech over a reply to its audio stopping.",
    "voice_final_transcript_seconds": "The endpoint decided to the final transcript known.",
    "voice_llm_first_token_seconds": "The reply's LLM generation started to its first token.",
    "voice_tts_first_audio_seconds": (
        "The LLM's first token to the first reply audio synthesized (the first chunk's text "
        "and its synthesis)."
    ),
    "voice_speculation_lead_seconds": (
        "How long a speculative reply had been prepared when the turn ended and it was used."
    ),
    "voice_speculation_waste_seconds": (
        "How long a speculative reply was prepared before it was thrown away."
    ),
}


def bounded(value: str, seen: set[str]) -> str:
    """``value`` as a label value, or :data:`OTHER` when it is not a short snake_case
    word or the metric already has :data:`MAX_LABEL_VALUES` others."""
    if value in seen:
        return value
    if not _LABEL_VALUE.match(value) or len(seen) >= MAX_LABEL_VALUES:
        return OTHER
    seen.add(value)
    return value


class _Labelled:
    """A counter with one bounded label."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.seen: set[str] = {OTHER}

    def inc(self, value: str) -> None:
        self.counter.labels(bounded(value, self.seen)).inc()


class ServerMetrics:
    """The figures of one server. ``observe`` takes every event a session sends its
    client; ``derived`` what each connection's :class:`~voice.serve.phases.TurnTracker`
    made of them (the timings no single event carries)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.connections = 0
        self.sessions_opened = 0
        self.registry = CollectorRegistry()
        r = self.registry
        self.turns = Counter(
            "voice_turns", "User turns answered (a reply played or cut).", registry=r
        )
        self.replies = Counter("voice_replies", "Replies started.", registry=r)
        self.interruptions = Counter(
            "voice_interruptions", "Replies cut by the user speaking over them.", registry=r
        )
        self.continuations = Counter(
            "voice_continuations",
            "Turns the user went on with after a pause had ended them (joined as one turn).",
            registry=r,
        )
        self.cut_ins = Counter(
            "voice_cut_ins",
            "Continuations where the reply to the first part had already been heard.",
            registry=r,
        )
        self.speculations = Counter(
            "voice_speculations",
            "Speculative replies ended, by outcome (used, cancelled).",
            ["outcome"],
            registry=r,
        )
        self.errors = _Labelled(
            Counter(
                "voice_errors", "Error messages sent to clients, by code.", ["code"], registry=r
            )
        )
        self.knowledge = _Labelled(
            Counter(
                "voice_knowledge_answers",
                "Replies the knowledge file decided, by kind (say, unknown, context, chat, ask, "
                "repeat).",
                ["kind"],
                registry=r,
            )
        )
        self.refused = _Labelled(
            Counter("voice_refused", "Connections turned away, by reason.", ["reason"], registry=r)
        )
        self.latency = {
            name: Histogram(name, text, buckets=BUCKETS_S, registry=r)
            for name, text in HISTOGRAMS.items()
        }
        self._live = _Live(self)
        r.register(self._live)

    # -- fed by the connections ---------------------------------------------------------

    def observe(self, event: Event) -> None:
        """Every event a session sends its client passes through here."""
        if isinstance(event, TurnMetrics):
            self.turns.inc()
            self._seconds("voice_voice_to_voice_seconds", event.voice_to_voice_ms)
            self._seconds("voice_barge_in_seconds", event.barge_in_ms)
            self._seconds("voice_llm_first_token_seconds", event.llm_first_token_ms)
        elif isinstance(event, ReplyStarted):
            self.replies.inc()
        elif isinstance(event, Interrupted):
            self.interruptions.inc()
        elif isinstance(event, TurnContinued):
            self.continuations.inc()
            if event.heard_ms > 0:
                self.cut_ins.inc()
        elif isinstance(event, ErrorEvent):
            self.errors.inc(event.code)
        elif isinstance(event, KnowledgeAnswer):
            self.knowledge.inc(event.kind)

    def derived(self, seen: SpeculationEnded | TurnTimeline) -> None:
        """What a connection's :class:`~voice.serve.phases.TurnTracker` made of the events."""
        if isinstance(seen, SpeculationEnded):
            self.speculations.labels(seen.outcome).inc()
            name = "lead" if seen.outcome == "used" else "waste"
            self._seconds(f"voice_speculation_{name}_seconds", seen.held_ms)
        else:
            self._seconds("voice_final_transcript_seconds", seen.final_after_endpoint_ms)
            self._seconds("voice_tts_first_audio_seconds", seen.tts_first_audio_ms)

    def _seconds(self, name: str, ms: float | None) -> None:
        if ms is not None and ms >= 0:
            self.latency[name].observe(ms / 1000.0)

    def error(self, code: str) -> None:
        self.errors.inc(code)

    def refuse(self, reason: str) -> None:
        self.refused.inc(reason)

    # -- read by Prometheus ---------------------------------------------------------------

    def prometheus(
        self,
        hub: dict[str, object],
        rss_bytes: int | None,
        heap: HeapUsage | None = None,
        queue_depth: int | None = None,
    ) -> bytes:
        """The exposition; ``hub`` is :meth:`EngineHub.stats`, ``heap`` what
        :func:`voice.runtime.memory.heap_usage` says (a leak shows there)."""
        self._live.now = (hub, rss_bytes, heap, queue_depth)
        try:
            return bytes(generate_latest(self.registry))
        finally:
            self._live.now = None


class _Live(Collector):
    """The figures read at scrape time: the hub's, the process's and the counts kept as
    plain numbers by the server."""

    def __init__(self, owner: ServerMetrics) -> None:
        self.owner = owner
        self.now: tuple[dict[str, object], int | None, HeapUsage | None, int | None] | None
        self.now = None

    def describe(self) -> list[Metric]:
        return []  # collected at scrape time only; the names are free for nothing else

    def collect(self) -> Iterator[Metric]:
        owner = self.owner
        yield _counter("voice_connections", "WebSocket connections.", owner.connections)
        yield _counter("voice_sessions_opened", "Sessions opened.", owner.sessions_opened)
        yield _gauge("process_start_time_seconds", "Start time (Unix).", owner.started)
        if self.now is None:
            return
        hub, rss, heap, queue = self.now
        yield _gauge("voice_active_sessions", "Sessions open now.", _num(hub.get("sessions")))
        yield _gauge(
            "voice_max_sessions", "Sessions allowed at once.", _num(hub.get("max_sessions"))
        )
        yield _gauge(
            "voice_sessions_opening",
            "Sessions waiting for an LLM context.",
            _num(hub.get("sessions_opening")),
        )
        yield _gauge(
            "voice_engine_busy_ratio",
            "Share of time the engine thread computed.",
            _num(hub.get("engine_busy")),
        )
        if queue is not None:
            yield _gauge(
                "voice_engine_queue_depth",
                "Sessions whose next engine job waited at the last scheduling.",
                queue,
            )
        by_kind = hub.get("by_kind")
        if isinstance(by_kind, dict):
            yield _by_kind("voice_engine_jobs", "Engine jobs run, by kind.", by_kind, "jobs")
            yield _by_kind(
                "voice_engine_seconds", "Engine compute seconds, by kind.", by_kind, "seconds"
            )
        if rss is not None:
            yield _gauge("process_resident_memory_bytes", "Resident memory.", rss)
        if heap is not None:
            if heap.in_use_bytes is not None:
                yield _gauge(
                    "voice_heap_in_use_bytes", "C heap held by live allocations.", heap.in_use_bytes
                )
            if heap.free_bytes is not None:
                yield _gauge(
                    "voice_heap_free_bytes", "Freed C heap kept for reuse.", heap.free_bytes
                )
            yield _gauge(
                "voice_python_allocated_blocks",
                "Memory blocks Python objects hold.",
                heap.python_blocks,
            )


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _counter(name: str, text: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, text, value=value)


def _by_kind(name: str, text: str, by_kind: dict[str, Any], key: str) -> CounterMetricFamily:
    family = CounterMetricFamily(name, text, labels=["kind"])
    for kind, figures in sorted(by_kind.items()):
        if isinstance(figures, dict):
            family.add_metric([str(kind)], _num(figures.get(key)))
    return family


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
