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
    """Admits audio up to real time since the first frame, plus a burst."""

    def __init__(self, burst_s: float = BURST_S, flood_s: float = FLOOD_S) -> None:
        self.burst_s = burst_s
        self.flood_s = flood_s
        self._start: float | None = None
        self.admitted_s = 0.0
        self.offered_s = 0.0  # admitted and dropped
        self.dropped_s = 0.0

    def admit(self, seconds: float, now: float) -> bool:
        """True if audio of this length, arriving at ``now`` (monotonic s), is within
        the allowance; the caller drops it otherwise."""
        if self._start is None:
            self._start = now
        self.offered_s += seconds
        if self.admitted_s + seconds > (now - self._start) + self.burst_s:
            self.dropped_s += seconds
            return False
        self.admitted_s += seconds
        return True

    def speed(self, now: float) -> float:
        """Audio offered per second of wall time since the first frame (1.0 = real time;
        2.0 when a client declares 8 kHz and sends 16 kHz)."""
        if self._start is None:
            return 0.0
        return self.offered_s / max(now - self._start, self.burst_s)

    def flooding(self, now: float) -> bool:
        """Offered audio this far beyond real time is not jitter: cut the client off."""
        return self._start is not None and self.offered_s - (now - self._start) > self.flood_s
