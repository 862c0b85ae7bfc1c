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
    without audio cannot be saved up: the bucket never holds less than nothing, unless
    the server itself stalled (then as much as it stalled)."""

    def __init__(self, burst_s: float = BURST_S, flood_s: float = FLOOD_S) -> None:
        self.burst_s = burst_s
        self.flood_s = flood_s
        self._last: float | None = None
        self._start = 0.0
        self.ahead_s = 0.0  # admitted audio ahead of real time
        self.offered_ahead_s = 0.0  # the same, counting what was dropped
        self.offered_s = 0.0
        self.dropped_s = 0.0

    def _drain(self, now: float, forgive_s: float) -> None:
        if self._last is None:
            self._start = self._last = now
        elapsed, self._last = now - self._last, now
        # Quiet time is not saved up, except time the server itself was not reading.
        self.ahead_s = max(-forgive_s, self.ahead_s - elapsed)
        self.offered_ahead_s = max(-forgive_s, self.offered_ahead_s - elapsed)

    def admit(self, seconds: float, now: float, forgive_s: float = 0.0) -> bool:
        """True if audio of this length, arriving at ``now`` (monotonic s), is within
        the allowance; the caller drops it otherwise. ``forgive_s``: how long the
        server itself was lately not reading (:class:`LoopLag`); audio that piled up
        meanwhile arrives in a clump and is admitted."""
        self._drain(now, forgive_s)
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

    def flooding(self, now: float, forgive_s: float = 0.0) -> bool:
        """Offered audio this far beyond real time is not jitter: cut the client off."""
        self._drain(now, forgive_s)
        return self.offered_ahead_s > self.flood_s


class LoopLag:
    """How long the event loop has lately been unable to run.

    While the loop is blocked (a long garbage collection, a slow callback, the machine
    swapping) nobody reads the sockets; a client's real-time frames wait there and are
    then read in one clump. That clump is the server's doing, not the client's: the
    rate guard forgives as much audio as the loop was away, so no user loses speech to
    the server's own stall. A heartbeat task notes each time it runs; a stall is the
    gap between beats, remembered for a while because the clump may be read after the
    heartbeat has caught up. Only the stall's length can be saved up, and only then: a
    client that is quiet on its own still gets no credit for a burst."""

    def __init__(self, period_s: float = 0.05, memory_s: float = 10.0) -> None:
        self.period_s = period_s
        self.memory_s = memory_s
        self.last_beat = time.monotonic()
        self._stalls: deque[tuple[float, float]] = deque(maxlen=64)  # (when, seconds)

    def beat(self, now: float) -> None:
        """The loop ran at ``now``; a gap since the last beat longer than the period is
        a stall."""
        gap = now - self.last_beat - self.period_s
        if gap > self.period_s:
            self._stalls.append((now, gap))
        self.last_beat = now

    def recent_s(self, now: float) -> float:
        """The longest stall in the remembered window, including one still going on
        (the heartbeat has not run yet while the clump is being read)."""
        current = now - self.last_beat - self.period_s
        past = (gap for when, gap in self._stalls if now - when <= self.memory_s)
        return max(max(past, default=0.0), current if current > self.period_s else 0.0)

    async def watch(self) -> None:
        """The heartbeat; runs until cancelled."""
        while True:
            await asyncio.sleep(self.period_s)
            self.beat(time.monotonic())
