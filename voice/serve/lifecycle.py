"""A worker's life behind a load balancer: readiness, and draining before it stops.

A load balancer sends new conversations only to workers that say they can take
one (``GET /readyz``: 200, or 503 with the reason), and a worker that is about
to stop (a deploy, a scale-down: SIGTERM) should not cut people off mid-sentence.
So on the first SIGTERM a worker drains: ``/readyz`` answers 503 at once (the
balancer stops sending it new conversations), new WebSocket upgrades get HTTP
503 (nginx retries them on another worker), and each open conversation is
closed as soon as its current reply is over (the user heard all of it, and the
history holds it) or at the deadline, whichever comes first, with close code
1001 and a ``going_away`` message: the client reconnects at once, through the
balancer, to a worker that is ready. ``/healthz`` stays a liveness probe: a
draining worker is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

DRAIN_S = 20.0  # long enough for a reply in progress to be played to its end
DRAIN_POLL_S = 0.05
GOING_AWAY_TEXT = (
    "this server is going away (restarting or scaling down); reconnect to go on: "
    "the conversation continues on another server."
)


@dataclass
class Lifecycle:
    """Whether this worker takes new conversations, and its drain's deadline."""

    drain_s: float = DRAIN_S
    draining: bool = False
    drain_deadline: float | None = None  # time.monotonic() at which every connection closes
    connections: int = 0  # WebSocket connections this worker still holds
    _drain_started: asyncio.Event = field(default_factory=asyncio.Event)
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def begin_drain(self) -> bool:
        """Stop taking conversations; True the first time (False: already draining)."""
        if self.draining:
            return False
        self.draining = True
        self.drain_deadline = time.monotonic() + max(0.0, self.drain_s)
        self._drain_started.set()
        self._update_idle()
        return True

    def time_left(self) -> float:
        """Seconds until the drain's deadline (infinite while not draining)."""
        if self.drain_deadline is None:
            return float("inf")
        return self.drain_deadline - time.monotonic()

    def opened(self) -> None:
        self.connections += 1
        self._update_idle()

    def closed(self) -> None:
        self.connections = max(0, self.connections - 1)
        self._update_idle()

    def _update_idle(self) -> None:
        if self.connections == 0:
            self._idle.set()
        else:
            self._idle.clear()

    async def wait_drain_started(self) -> None:
        await self._drain_started.wait()

    async def drained(self, grace_s: float = 2.0) -> None:
        """Returns once a drain has begun and every connection is closed (or its deadline
        plus ``grace_s`` has passed: a connection stuck on a dead peer must not keep the
        worker alive; the server's own close ends it)."""
        await self._drain_started.wait()
        self._update_idle()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(0.0, self.time_left()) + grace_s)

    def readiness(self, stats: dict[str, Any]) -> tuple[HTTPStatus, dict[str, Any]]:
        """``/readyz``: 200 while a new conversation would be taken, else 503 and why."""
        sessions = int(stats.get("sessions", 0)) + int(stats.get("sessions_opening", 0))
        limit = int(stats.get("max_sessions", 0))
        body: dict[str, Any] = {"sessions": sessions, "max_sessions": limit}
        if self.draining:
            return HTTPStatus.SERVICE_UNAVAILABLE, {
                "status": "draining",
                "reason": "the server is shutting down; its open conversations are finishing.",
                "drain_s_left": round(max(0.0, self.time_left()), 1),
                **body,
            }
        if sessions >= limit:
            return HTTPStatus.SERVICE_UNAVAILABLE, {
                "status": "full",
                "reason": f"all {limit} sessions are taken.",
                **body,
            }
        return HTTPStatus.OK, {"status": "ready", **body}
