"""``voice bench traces``: what observability costs a conversation, traces off and on.

Two measurements, each against the other setting in the same run:

- **voice-to-voice as a client feels it**: a real ``voice serve`` in a subprocess,
  started fresh for each run, with nothing of OpenTelemetry configured (off: no
  exporter, nothing imported) or with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a
  local OTLP/HTTP sink in this process (on: a trace per turn, sent every 200 ms).
  The client load is ``voice bench serve``'s (six corpus turns per client, "stop"
  said over two replies); the runs go off, on, on, off, ... so that a drift of the
  machine's speed falls on both. Also the server's CPU time per turn, and its CPU at
  rest for a few seconds after the run (the exporter's thread, if anything).
- **the event loop's share**: in this process, what one turn costs the thread that
  serves the clients: the per-connection tracker that derives the timings (always on:
  the metrics need it), making a turn's spans (on), and one ``/metrics`` scrape.

Timings need the CPU to themselves: run it under the shared lock.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from voice.bench.conversation import BENCH_REPLY_TOKENS
from voice.bench.corpus import Clip
from voice.bench.serve import ServerProcess, _ClientResult, _converse, plan
from voice.events import (
    Event,
    Final,
    Paused,
    ReplyStarted,
    SpeculationStarted,
    SpeechEnd,
    StateChanged,
    TurnMetrics,
)
from voice.serve.metrics import ServerMetrics
from voice.serve.phases import TurnTimeline, TurnTracker
from voice.serve.tracing import TraceConfig, make_tracer
from voice.stats import p50_p95

LOOP_TURNS = 2000  # turns timed in process for the event loop's share
OTHER_EVENTS = 30  # a turn's partials, states, reply text and audio chunks: passed over
SCRAPES = 200
IDLE_S = 5.0  # after each run: the server at rest


class OtlpSink:
    """Accepts OTLP/HTTP exports and counts them; decodes nothing (a collector would)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", 0))
                self.rfile.read(size)
                sink.requests += 1
                sink.bytes += size
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _run(clips: list[Clip], clients: int, env: dict[str, str]) -> dict[str, Any]:
    turns, barges = plan(clips)
    server = ServerProcess(clients, env)
    try:

        async def everyone() -> list[_ClientResult]:
            jobs = []
            for k in range(clients):
                mine = [turns[(k * 6 + j) % len(turns)] for j in range(6)]
                jobs.append(_converse(server.ws_url, mine, barges[k % len(barges)], seed=k))
            return list(await asyncio.gather(*jobs))

        cpu0 = server.cpu_s()
        results = asyncio.run(everyone())
        cpu = server.cpu_s() - cpu0
        server.wait_idle()
        idle0, wall0 = server.cpu_s(), time.perf_counter()
        time.sleep(IDLE_S)  # a server with no one talking: what its threads cost at rest
        idle = (server.cpu_s() - idle0) / (time.perf_counter() - wall0)
    finally:
        server.stop()
    answered = sum(r.answered for r in results)
    return {
        "v2v_ms": [ms for r in results for ms in r.v2v_ms],
        "server_v2v_ms": [ms for r in results for ms in r.server_v2v_ms],
        "barge_ms": [ms for r in results for ms in r.barge_ms],
        "turns": sum(r.turns for r in results),
        "answered": answered,
        "cpu_s_per_turn": round(cpu / max(1, answered), 3),
        "idle_cpu_percent": round(100.0 * idle, 2),
        "errors": sorted({e for r in results for e in r.errors}),
    }


def _scripted_turn(base_ms: float) -> list[Event]:
    """The events of a typical turn (speculative, paused by a cough) for the loop timing."""
    uid, rid = int(base_ms), int(base_ms) + 1
    other = StateChanged(audio_ms=base_ms, state="listening", previous="speaking")
    return [other] * OTHER_EVENTS + [
        SpeculationStarted(audio_ms=base_ms + 1300, utterance_id=uid, gen_id=rid, text="a"),
        SpeechEnd(
            audio_ms=base_ms + 1800, utterance_id=uid, start_ms=base_ms, end_ms=base_ms + 1000
        ),
        Final(
            audio_ms=base_ms + 1850,
            utterance_id=uid,
            text="a",
            start_ms=base_ms,
            end_ms=base_ms + 1000,
            compute_ms=40.0,
        ),
        ReplyStarted(
            audio_ms=base_ms + 1850, reply_id=rid, utterance_id=uid, text="a", speculative=True
        ),
        Paused(audio_ms=base_ms + 3000, reply_id=rid),
        TurnMetrics(
            audio_ms=base_ms + 4000,
            turn_id=uid,
            reply_id=rid,
            user_text="a",
            user_start_ms=base_ms,
            user_end_ms=base_ms + 1000,
            end_silence_ms=800.0,
            eot_probability=None,
            speculative=True,
            asr_final_ms=40.0,
            llm_first_token_ms=300.0,
            first_audio_ready_ms=700.0,
            voice_to_voice_ms=900.0,
            barge_in_ms=150.0,
            interrupted=False,
        ),
    ]


def loop_cost(sink_url: str) -> dict[str, Any]:
    """Microseconds of the event loop's thread per turn (and per scrape), in process."""
    turns = [_scripted_turn(i * 10_000.0) for i in range(LOOP_TURNS)]
    metrics, tracker = ServerMetrics(), TurnTracker()
    timelines: list[TurnTimeline] = []
    started = time.perf_counter()
    for events in turns:
        for event in events:
            metrics.observe(event)
            seen = tracker.observe(event)
            if seen is not None:
                metrics.derived(seen)
                if isinstance(seen, TurnTimeline):
                    timelines.append(seen)
    tracked_us = (time.perf_counter() - started) / LOOP_TURNS * 1e6
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink_url, "OTEL_BSP_SCHEDULE_DELAY": "200"}
    traced_us: float | None = None
    # Every span of the timed turns queued, none dropped (the processor reads os.environ).
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(LOOP_TURNS * 10)
    try:
        tracer = make_tracer(TraceConfig(), 0, env)
    except Exception as exc:  # OpenTelemetry is not installed: say so, measure the rest
        tracer, traced_us = None, None
        print(f"voice bench traces: no span timing ({exc})", file=sys.stderr)
    if tracer is not None:
        started = time.perf_counter()
        for timeline in timelines:
            tracer.record(timeline, "")
        traced_us = (time.perf_counter() - started) / len(timelines) * 1e6
        tracer.shutdown()
    os.environ.pop("OTEL_BSP_MAX_QUEUE_SIZE", None)
    hub: dict[str, object] = {"sessions": 2, "max_sessions": 4, "engine_busy": 0.4}
    started = time.perf_counter()
    for _ in range(SCRAPES):
        metrics.prometheus(hub, 1, None, 0)
    scrape_us = (time.perf_counter() - started) / SCRAPES * 1e6
    return {
        "tracker_and_metrics_us_per_turn": round(tracked_us, 1),
        "spans_us_per_turn": None if traced_us is None else round(traced_us, 1),
        "scrape_us": round(scrape_us, 1),
    }


def bench_traces(clips: list[Clip], clients: int = 1, rounds: int = 2) -> dict[str, Any]:
    for key in [k for k in os.environ if k.startswith("OTEL_")]:
        del os.environ[key]  # off means nothing configured (the servers inherit this)
    sink = OtlpSink()
    base = {"VOICE_LLM_MAX_REPLY_TOKENS": str(BENCH_REPLY_TOKENS)}
    modes = {
        "off": base,
        "on": {**base, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_BSP_SCHEDULE_DELAY": "200"},
    }
    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    order = [m for r in range(rounds) for m in (("off", "on") if r % 2 == 0 else ("on", "off"))]
    try:
        for mode in order:
            runs[mode].append(_run(clips, clients, modes[mode]))
            print(f"voice bench traces: {mode} run {len(runs[mode])} done", file=sys.stderr)
        exported = {"requests": sink.requests, "bytes": sink.bytes}
        loop = loop_cost(sink.url)
    finally:
        sink.stop()
    report: dict[str, Any] = {"clients": clients, "rounds": rounds, "order": order}
    for mode, rows in runs.items():
        report[mode] = {
            "voice_to_voice_ms": p50_p95([ms for r in rows for ms in r["v2v_ms"]]),
            "per_run_voice_to_voice_ms": [p50_p95(r["v2v_ms"]) for r in rows],
            "server_voice_to_voice_ms": p50_p95([ms for r in rows for ms in r["server_v2v_ms"]]),
            "barge_in_ms": p50_p95([ms for r in rows for ms in r["barge_ms"]]),
            "barge_in_ms_each": [round(ms, 1) for r in rows for ms in r["barge_ms"]],
            "answered": f"{sum(r['answered'] for r in rows)}/{sum(r['turns'] for r in rows)}",
            "server_cpu_s_per_turn": [r["cpu_s_per_turn"] for r in rows],
            "server_idle_cpu_percent": [r["idle_cpu_percent"] for r in rows],
            "errors": sorted({e for r in rows for e in r["errors"]}),
        }
    report["exported_to_the_sink"] = exported
    report["event_loop"] = loop
    report["reply_tokens"] = BENCH_REPLY_TOKENS
    report["cpu_cores"] = os.cpu_count()
    return report
