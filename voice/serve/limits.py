"""Per-connection limits: how fast audio may arrive, how long a session may last.

A microphone produces audio at real time. A client that sends faster (a buggy
resampler, a script replaying a file, a flood) would make the server
transcribe more than real time for one user and starve the others, so audio
beyond real time plus a small burst allowance (network jitter delivers frames
in clumps) is dropped with an error, and a client far ahead is disconnected.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

BURST_S = 1.0  # audio a client may be ahead of real time without loss (jitter, reconnects)
FLOOD_S = 10.0  # this far ahead, counting dropped audio, the client is cut off


@dataclass
class Limits:
    max_session_s: float = 3600.0  # a conversation this long is closed; reconnecting resumes
    idle_timeout_s: float = 60.0  # nothing received this long: the client is gone
    burst_s: float = BURST_S
    flood_s: float = FLOOD_S


class RateGuard:
    """A leaky bucket of audio: each second of wall time drains a second of audio, and
    audio is admitted while what is left in the bucket stays within the burst. Time
    without audio cannot be saved up: the bucket never holds less than nothing, except
    for time the server itself stalled since this client's last frame (``loop_lag``),
    credited once: the frames that piled up meanwhile arrive in a clump."""

    def __init__(
        self, burst_s: float = BURST_S, flood_s: float = FLOOD_S, loop_lag: LoopLag | None = None
    ) -> None:
        self.burst_s = burst_s
        self.flood_s = flood_s
        self.loop_lag = loop_lag
        self._last: float | None = None
        self._start = 0.0
        self.ahead_s = 0.0  # admitted audio ahead of real time
        self.offered_ahead_s = 0.0  # the same, counting what was dropped
        self.offered_s = 0.0
        self.dropped_s = 0.0

    def _drain(self, now: float) -> None:
        if self._last is None:
            self._start = self._last = now
        elapsed = now - self._last
        stalled = 0.0
        if self.loop_lag is not None and elapsed > 0:
            stalled = min(elapsed, self.loop_lag.stalled_since(self._last, now))
        self._last = now
        self.ahead_s = _drained(self.ahead_s, elapsed, stalled)
        self.offered_ahead_s = _drained(self.offered_ahead_s, elapsed, stalled)

    def admit(self, seconds: float, now: float) -> bool:
        """True if audio of this length, arriving at ``now`` (monotonic s), is within
        the allowance; the caller drops it otherwise."""
        self._drain(now)
        self.offered_s += seconds
        self.offered_ahead_s += seconds
        if self.ahead_s + seconds > self.burst_s:
            self.dropped_s += seconds
            return False
        self.ahead_s += seconds
        return True

    def speed(self, now: float) -> float:
        """Audio offered per second of wall time since the first frame (1.0 = real time;
        2.0 when a client declares 8 kHz and sends 16 kHz)."""
        if self._last is None:
            return 0.0
        return self.offered_s / max(now - self._start, self.burst_s)

    def flooding(self, now: float) -> bool:
        """Offered audio this far beyond real time is not jitter: cut the client off."""
        self._drain(now)
        return self.offered_ahead_s > self.flood_s


def _drained(ahead_s: float, elapsed_s: float, stalled_s: float) -> float:
    """The bucket after ``elapsed_s``: it may sink below empty only by the server's stall
    in that time (a credit the piled-up frames use up), and is never raised."""
    return max(ahead_s - elapsed_s, min(ahead_s, 0.0) - stalled_s)


class LoopLag:
    """How long the event loop has been unable to run, and when.

    While the loop is blocked (a long garbage collection, a slow callback, the machine
    swapping) nobody reads the sockets; a client's real-time frames wait there and are
    then read in one clump. That clump is the server's doing, not the client's, so the
    rate guard credits each connection with the stalls since its last frame, and no
    user loses speech to the server's own stall. A heartbeat task notes each time it
    runs; a stall is a gap between beats. A client that is quiet on its own gets no
    credit, and a stall is credited only once."""

    def __init__(self, period_s: float = 0.05) -> None:
        self.period_s = period_s
        self.last_beat = time.monotonic()
        self._stalls: deque[tuple[float, float]] = deque(maxlen=64)  # (ended at, seconds)

    def beat(self, now: float) -> None:
        """The loop ran at ``now``; a gap since the last beat longer than the period is
        a stall."""
        gap = now - self.last_beat - self.period_s
        if gap > self.period_s:
            self._stalls.append((now, gap))
        self.last_beat = now

    def stalled_since(self, since: float, now: float) -> float:
        """Seconds the loop stood still between ``since`` and ``now``. A stall that has
        just ended is noted here if the heartbeat has not run yet (a connection may read
        its clump first)."""
        if now - self.last_beat - self.period_s > self.period_s:
            self.beat(now)
        return sum(gap for ended, gap in self._stalls if ended > since)

    async def watch(self) -> None:
        """The heartbeat; runs until cancelled."""
        while True:
            await asyncio.sleep(self.period_s)
            self.beat(time.monotonic())
