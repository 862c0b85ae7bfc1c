"""Per-connection limits: how fast audio may arrive, how long a session may last.

A microphone produces audio at real time. A client that sends faster (a buggy
resampler, a script replaying a file, a flood) would make the server
transcribe more than real time for one user and starve the others, so audio
beyond real time plus a small burst allowance (network jitter delivers frames
in clumps) is dropped with an error, and a client far ahead is disconnected.
"""

from __future__ import annotations

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
    without audio cannot be saved up: the bucket never holds less than nothing."""

    def __init__(self, burst_s: float = BURST_S, flood_s: float = FLOOD_S) -> None:
        self.burst_s = burst_s
        self.flood_s = flood_s
        self._last: float | None = None
        self._start = 0.0
        self.ahead_s = 0.0  # admitted audio ahead of real time
        self.offered_ahead_s = 0.0  # the same, counting what was dropped
        self.offered_s = 0.0
        self.dropped_s = 0.0

    def _drain(self, now: float) -> None:
        if self._last is None:
            self._start = self._last = now
        elapsed, self._last = now - self._last, now
        self.ahead_s = max(0.0, self.ahead_s - elapsed)
        self.offered_ahead_s = max(0.0, self.offered_ahead_s - elapsed)

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
