"""Observability end to end: a real Prometheus server (Debian's, started here on a free
loopback port) scrapes two real `voice serve` workers (real models) while Python clients
hold a few turns on each; PromQL over both gives the fleet's voice-to-voice p95 from the
histograms, and the workers' turn counters add up to the turns the clients played. One
of the workers also sends a trace per turn over OTLP/HTTP to a receiver in this test,
which decodes them with `opentelemetry-proto`: each turn's spans, in the order a turn
goes through them."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SERVER_ENV, VoiceServer, clip
from services import OtlpReceiver, PrometheusProcess, free_port

from voice.serve.client import VoiceClient

pytestmark = [pytest.mark.slow, pytest.mark.alone]

ROOT = Path(__file__).resolve().parents[2]

TURNS = (
    "cmu_arctic_axb_a0005",
    "vctk_p225_001",
)  # "Will we ever forget it.", "Please call Stella."
# Short greedy replies: each turn is played to its end in real time.
WORKER_ENV = {**SERVER_ENV, "VOICE_LLM_MAX_REPLY_TOKENS": "8", "VOICE_LLM_REPLY_SENTENCES": "1"}
P95 = "histogram_quantile(0.95, sum by (le) (rate(voice_voice_to_voice_seconds_bucket[1m])))"


class Fleet:
    """Prometheus in front of two workers; worker 0 sends traces to the receiver."""

    def __init__(self, folder: Path) -> None:
        self.receiver = OtlpReceiver()
        self.ports = [free_port(), free_port()]
        self.prometheus = PrometheusProcess(folder, [f"127.0.0.1:{p}" for p in self.ports])
        traced = {
            **WORKER_ENV,
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.receiver.url,
            "OTEL_SERVICE_NAME": "voice-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "200",  # ms: send each turn's spans soon
        }
        envs = [traced, {k: v for k, v in WORKER_ENV.items() if not k.startswith("OTEL_")}]
        args: list[tuple[str, ...]] = [("--trace-conversation-id",), ()]
        self.workers: list[VoiceServer | None] = [None, None]

        def start(i: int) -> None:
            self.workers[i] = VoiceServer(1, envs[i], port=self.ports[i], args=args[i])

        starting = [threading.Thread(target=start, args=(i,)) for i in (0, 1)]
        for thread in starting:  # the models load in parallel
            thread.start()
        for thread in starting:
            thread.join()
        assert all(self.workers), "a worker did not start"

    def stop(self) -> None:
        self.prometheus.stop()
        for worker in self.workers:
            if worker is not None:
                worker.stop()
        self.receiver.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    running = Fleet(tmp_path_factory.mktemp("prometheus"))
    yield running
    running.stop()


async def _talk(port: int) -> VoiceClient:
    async with VoiceClient(f"ws://127.0.0.1:{port}/ws") as client:
        for n, name in enumerate(TURNS, start=1):
            client.say(clip(name, lead_s=0.3), onset_s=0.3)
            await client.wait_for(
                lambda n=n: client.message_count("turn_metrics") >= n, 60, "a turn"
            )
        return client


def test_prometheus_scrapes_both_workers_and_adds_their_histograms(fleet: Fleet) -> None:
    assert fleet.prometheus.wait_value("count(up == 1)", 2) == 2  # both workers scraped

    async def main() -> list[VoiceClient]:
        return list(await asyncio.gather(*(_talk(port) for port in fleet.ports)))

    clients = asyncio.run(main())
    played = [client.message_count("turn_metrics") for client in clients]
    assert all(n >= len(TURNS) for n in played)
    total = fleet.prometheus.wait_value("sum(voice_turns_total)", sum(played))
    assert total == sum(played)
    per_worker = {
        r["metric"]["instance"]: float(r["value"][1])
        for r in fleet.prometheus.query("voice_turns_total")
    }
    assert per_worker == {
        f"127.0.0.1:{p}": float(n) for p, n in zip(fleet.ports, played, strict=True)
    }
    heard = sum(
        1 for c in clients for m in c.of_type("turn_metrics") if m["voice_to_voice_ms"] is not None
    )
    assert heard >= len(TURNS)
    assert fleet.prometheus.value("sum(voice_voice_to_voice_seconds_count)") == heard
    p95 = fleet.prometheus.value(P95)
    assert p95 is not None and 0.05 <= p95 <= 5.0, p95  # over both workers, in seconds
    p50 = fleet.prometheus.value(P95.replace("0.95", "0.5"))
    assert p50 is not None and p50 <= p95

    # Every panel of the shipped dashboard is PromQL this Prometheus runs over both
    # workers (Grafana's variables as Grafana would fill them in).
    board = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"].replace("$__rate_interval", "1m").replace("$job", "voice")
            fleet.prometheus.query(expr)  # fails on an error
    assert fleet.prometheus.value('sum(voice_active_sessions{job=~"voice"})') is not None

    # Worker 0's turns, one trace each, the conversation id on them (the flag allows it).
    traced = clients[0]
    turns = {m["reply_id"]: m for m in traced.of_type("turn_metrics")}
    arrived = asyncio.run(_wait_traces(fleet.receiver, len(turns)))
    assert arrived, f"{len(fleet.receiver.traces())} traces of {len(turns)}"
    complete = 0
    for spans in fleet.receiver.traces().values():
        complete += _check_turn(spans, traced.conversation_id or "", turns)
    assert complete >= 1  # a turn answered by the LLM, with every phase


async def _wait_traces(receiver: OtlpReceiver, count: int) -> bool:
    for _ in range(100):
        done = [t for t in receiver.traces().values() if any(s["name"] == "voice.turn" for s in t)]
        if len(done) >= count:
            return True
        await asyncio.sleep(0.1)
    return False


def _check_turn(
    spans: list[dict[str, Any]], conversation_id: str, turns: dict[int, dict[str, Any]]
) -> bool:
    """The spans of one turn's trace, against the turn's figures as the client got them;
    whether the turn had every phase (an apology after an LLM failure has no token)."""
    assert {s["service"] for s in spans} == {"voice-under-test"}
    assert {s["path"] for s in spans} == {"/v1/traces"}
    (root,) = [s for s in spans if s["name"] == "voice.turn"]
    assert root["parent"] == ""
    assert root["attributes"]["voice.conversation_id"].string_value == conversation_id
    figures = turns[root["attributes"]["voice.reply_id"].int_value]
    children = {s["name"]: s for s in spans if s is not root}
    assert all(s["parent"] == root["id"] for s in children.values())
    need = {"speech", "endpoint", "recognition"}
    if figures["voice_to_voice_ms"] is not None:
        need.add("playback")
    if figures["llm_first_token_ms"] is not None:
        need.add("llm.first_token")
        if figures["first_audio_ready_ms"] is not None:
            need.add("tts.first_audio")
    if figures["speculative"]:
        need.add("speculation")
    if figures["barge_in_ms"] is not None:
        need.add("barge_in")
    assert set(children) == need, (sorted(children), figures)
    for span in children.values():
        assert root["start"] <= span["start"] <= span["end"] <= root["end"], span["name"]
    speech, endpoint = children["speech"], children["endpoint"]
    # The order a turn goes through: the user speaks, the endpoint waits out the silence,
    # the final transcript; the reply's first token, then its first audio; it plays
    # after the turn ended.
    assert speech["start"] == root["start"] and speech["end"] == endpoint["start"]
    if not {"llm.first_token", "tts.first_audio", "playback"} <= set(children):
        return False
    playback = children["playback"]
    assert endpoint["end"] <= playback["start"]
    assert children["recognition"]["end"] <= playback["start"]
    first_token, first_audio = children["llm.first_token"], children["tts.first_audio"]
    assert first_token["end"] == first_audio["start"] <= first_audio["end"] <= playback["start"]
    return True
