"""Live figures for operators: ``/metrics`` in the Prometheus text format.

Counters only grow (rates are the monitoring system's job); latencies are
summaries whose quantiles (p50, p95, as everywhere in this project) cover the
last :data:`WINDOW` turns, so a slow hour shows up instead of being averaged
away by a good week. Everything is updated from the event loop thread and read
by the same thread, so no locks.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from voice.events import Error as ErrorEvent
from voice.events import Event, Interrupted, ReplyStarted, TurnMetrics
from voice.runtime.memory import HeapUsage
from voice.stats import percentile

WINDOW = 500  # turns the latency quantiles are taken over
QUANTILES = (0.5, 0.95)


@dataclass
class Summary:
    """A Prometheus summary over a sliding window (observed in ms, exposed in seconds)."""

    window: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    total: float = 0.0
    count: int = 0

    def observe(self, ms: float) -> None:
        self.window.append(ms)
        self.total += ms / 1000.0
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out = []
        for q in QUANTILES:
            ms = percentile(list(self.window), q * 100)
            value = float("nan") if ms is None else ms / 1000.0
            out.append(f'{name}{{quantile="{q}"}} {_number(value)}')
        out.append(f"{name}_sum {_number(self.total)}")
        out.append(f"{name}_count {self.count}")
        return out


class ServerMetrics:
    def __init__(self) -> None:
        self.started = time.time()
        self.connections = 0
        self.sessions_opened = 0
        self.refused: Counter[str] = Counter()  # reason -> connections turned away
        self.errors: Counter[str] = Counter()  # code -> error messages sent
        self.turns = 0
        self.replies = 0
        self.interruptions = 0
        self.voice_to_voice = Summary()
        self.barge_in = Summary()

    def observe(self, event: Event) -> None:
        """Every event a session sends its client passes through here."""
        if isinstance(event, TurnMetrics):
            self.turns += 1
            if event.voice_to_voice_ms is not None:
                self.voice_to_voice.observe(event.voice_to_voice_ms)
            if event.barge_in_ms is not None:
                self.barge_in.observe(event.barge_in_ms)
        elif isinstance(event, ReplyStarted):
            self.replies += 1
        elif isinstance(event, Interrupted):
            self.interruptions += 1
        elif isinstance(event, ErrorEvent):
            self.errors[event.code] += 1

    def error(self, code: str) -> None:
        self.errors[code] += 1

    def refuse(self, reason: str) -> None:
        self.refused[reason] += 1

    def prometheus(
        self, hub: dict[str, object], rss_bytes: int | None, heap: HeapUsage | None = None
    ) -> str:
        """The exposition text; ``hub`` is :meth:`EngineHub.stats`, ``heap`` what
        :func:`voice.runtime.memory.heap_usage` says (a leak shows there)."""
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, lines: Iterable[str]) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(lines)

        def one(name: str, kind: str, help_text: str, value: float) -> None:
            metric(name, kind, help_text, [f"{name} {_number(value)}"])

        def by_label(name: str, help_text: str, label: str, counts: dict[str, float]) -> None:
            metric(name, "counter", help_text, [
                f'{name}{{{label}="{_label(key)}"}} {_number(value)}'
                for key, value in sorted(counts.items())
            ])  # fmt: skip

        one("voice_active_sessions", "gauge", "Sessions open now.", _num(hub.get("sessions")))
        one("voice_max_sessions", "gauge", "Sessions allowed at once.", _num(hub["max_sessions"]))
        one("voice_connections_total", "counter", "WebSocket connections.", self.connections)
        one("voice_sessions_opened_total", "counter", "Sessions opened.", self.sessions_opened)
        by_label("voice_refused_total", "Connections turned away, by reason.", "reason",
                 dict(self.refused))  # fmt: skip
        one("voice_turns_total", "counter", "User turns answered.", self.turns)
        one("voice_replies_total", "counter", "Replies started.", self.replies)
        one("voice_interruptions_total", "counter", "Replies cut by barge-in.", self.interruptions)
        by_label("voice_errors_total", "Error messages sent to clients, by code.", "code",
                 dict(self.errors))  # fmt: skip
        metric(
            "voice_voice_to_voice_seconds",
            "summary",
            f"End of user speech to first reply audio played (last {WINDOW} turns).",
            self.voice_to_voice.lines("voice_voice_to_voice_seconds"),
        )
        metric(
            "voice_barge_in_seconds",
            "summary",
            f"Onset of speech over a reply to its audio stopping (last {WINDOW}).",
            self.barge_in.lines("voice_barge_in_seconds"),
        )
        one(
            "voice_engine_busy_ratio",
            "gauge",
            "Share of time the engine thread computed.",
            _num(hub.get("engine_busy")),
        )
        by_kind = hub.get("by_kind")
        if isinstance(by_kind, dict):
            by_label("voice_engine_jobs_total", "Engine jobs run, by kind.", "kind",
                     {k: v["jobs"] for k, v in by_kind.items()})  # fmt: skip
            by_label("voice_engine_seconds_total", "Engine compute seconds, by kind.", "kind",
                     {k: v["seconds"] for k, v in by_kind.items()})  # fmt: skip
        if rss_bytes is not None:
            one("process_resident_memory_bytes", "gauge", "Resident memory.", rss_bytes)
        if heap is not None:
            if heap.in_use_bytes is not None:
                one("voice_heap_in_use_bytes", "gauge", "C heap held by live allocations.",
                    heap.in_use_bytes)  # fmt: skip
            if heap.free_bytes is not None:
                one("voice_heap_free_bytes", "gauge", "Freed C heap kept for reuse.",
                    heap.free_bytes)  # fmt: skip
            one("voice_python_allocated_blocks", "gauge", "Memory blocks Python objects hold.",
                heap.python_blocks)  # fmt: skip
        one("process_start_time_seconds", "gauge", "Start time (Unix).", self.started)
        return "\n".join(out) + "\n"


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
