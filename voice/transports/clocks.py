"""How fast two sound devices' clocks really run, against each other.

A microphone and a speaker on two devices (a USB microphone, the laptop's
speakers) each run on their own crystal, and no two agree: 20-100 parts per
million apart is common. Paired frame by frame, the echo canceller's reference
then slides against its echo, a sample every 0.6-3 s, and WebRTC's canceller,
which fits its filter to one alignment, does not keep up: in the simulated
desk (tests/component/test_echo_alignment.py) a 100 ppm drift left -11 to -34
dB of the echo within the first minute, where the same devices on one clock
leave -65 dB.

Sample counts alone cannot show the drift: they move in whole device blocks
(10-20 ms), minutes apart. The time each block arrives can: a line through
each second's earliest block, arrival time against samples delivered, gives
each stream's true rate to a few ppm within a minute, however late the busy
machine runs the callbacks.
``clock_skew`` turns the two rates into how much played audio gains (or
loses) on the microphone per sample, which :class:`PlayedReference` drops (or
repeats) a sample at a time to keep the echo path still.
"""

from __future__ import annotations

import math
import threading

FORGET_S = 600.0  # older arrivals fade with this time constant: a crystal warms up
MIN_SPAN_S = 10.0  # no verdict on a clock before it has been watched this long
SETTLE_S = 2.0  # a stream's first blocks come in a burst (the output primes its buffer)
MAX_SKEW = 1e-3  # beyond 0.1% it is not drift but a device misreporting its rate


class StreamClock:
    """A device stream's true sample rate, from when its blocks arrive.

    A block can come late (the machine is busy), never early: so each second of the
    stream is represented by its earliest block against the nominal rate, and a line
    is fitted through those. (A plain fit through every block was 14 ppm off after a
    minute of blocks one in fifty of which came 80 ms late; the earliest ones, 2.)
    The line is an exponentially weighted least-squares fit, kept as centred moments
    so that it stays exact over days of samples.

    ``add`` is called from the stream's callback (one thread), the rest from another:
    a lock keeps the sums consistent."""

    def __init__(self, nominal_rate: int) -> None:
        self.nominal_rate = nominal_rate
        self._lock = threading.Lock()
        self._samples = 0  # delivered so far
        self._t0: float | None = None
        self._earliest: tuple[float, float, float] | None = None  # this second's
        self._weight = 0.0
        self._mean_x = self._mean_y = 0.0
        self._cxx = self._cxy = 0.0
        self._first_y: float | None = None
        self._last_y = 0.0

    def add(self, samples: int, now: float) -> None:
        """A block of ``samples`` arrived at monotonic time ``now``."""
        with self._lock:
            if self._t0 is None:
                self._t0 = now
            self._samples += samples
            x, y = float(self._samples), now - self._t0
            if y < SETTLE_S:
                return
            lateness = y - x / self.nominal_rate
            if self._earliest is None or lateness < self._earliest[0]:
                self._earliest = (lateness, x, y)
            if self._samples // self.nominal_rate != (self._samples - samples) // self.nominal_rate:
                _, best_x, best_y = self._earliest
                self._fit(best_x, best_y)
                self._earliest = None

    def _fit(self, x: float, y: float) -> None:
        if self._first_y is None:
            self._first_y = y
        decay = math.exp(-max(y - self._last_y, 0.0) / FORGET_S)
        self._last_y = y
        self._weight = self._weight * decay + 1.0
        dx = x - self._mean_x
        self._mean_x += dx / self._weight
        self._mean_y += (y - self._mean_y) / self._weight
        self._cxx = self._cxx * decay + dx * (x - self._mean_x)
        self._cxy = self._cxy * decay + dx * (y - self._mean_y)

    def seconds_per_sample(self) -> float | None:
        """The fitted slope, or None before ``MIN_SPAN_S`` of blocks."""
        with self._lock:
            if self._first_y is None or self._last_y - self._first_y < MIN_SPAN_S:
                return None
            if self._cxx <= 0.0:
                return None
            return self._cxy / self._cxx

    def rate_error(self) -> float | None:
        """How much faster than its nominal rate it runs (1e-4: 100 ppm fast)."""
        slope = self.seconds_per_sample()
        return None if slope is None else 1.0 / (slope * self.nominal_rate) - 1.0


def clock_skew(mic: StreamClock, speaker: StreamClock) -> float:
    """Played samples gained on the microphone per microphone sample (after both are
    resampled to one rate): positive when the speaker runs fast against the mic. 0
    until both clocks are known, or when the figure is not plausibly drift."""
    mic_error, speaker_error = mic.rate_error(), speaker.rate_error()
    if mic_error is None or speaker_error is None:
        return 0.0
    skew = (1.0 + speaker_error) / (1.0 + mic_error) - 1.0
    return skew if abs(skew) <= MAX_SKEW else 0.0
