"""How fast the echo slides against its reference when two devices' clocks disagree.

A microphone and a speaker on two devices (a USB microphone, the laptop's
speakers) each run on their own crystal, and no two agree: 20-100 parts per
million apart is common. Paired frame by frame, the echo canceller's reference
then slides against its echo, a sample every 0.6-3 s, and WebRTC's canceller,
which fits its filter to one alignment, does not keep up: in the simulated
desk (tests/component/test_echo_alignment.py) a 100 ppm drift left -15 to -20
dB of the echo within the first minute, where one clock leaves -65 dB.

The drift is measured on the echo itself: during a reply, each second of
microphone is cross-correlated with its reference (GCC-PHAT, which whitens
the spectrum so that the direct path stands out of speech and reverberation)
to find how far the echo lags, to a fraction of a sample. A robust line through
those lags over the session is the drift. Timing the callbacks instead (when
each device's blocks arrive) measures the sound server's buffers, which it may
resize at any moment (PulseAudio and PipeWire adapt their latency); the echo's
lag is what the canceller has to follow. On the PulseAudio rig, whose virtual
devices fall behind when two busy loops starve the sound server, the echo's
lag grew 66-79 ppm in 8 loaded one-minute sessions of 12, by 40-53 samples
uncorrected; corrected, it held within 6 samples once the drift was known.

``skew`` is what :class:`voice.transports.desk.PlayedReference` needs: the
played samples gained per microphone sample, made up a sample at a time.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, level_db

Float32Array = npt.NDArray[np.float32]

WINDOW = SAMPLE_RATE  # one lag measurement per second of audio
MAX_LAG = SAMPLE_RATE // 4  # the echo is looked for up to 250 ms after its reference
EARLY = SAMPLE_RATE // 100  # and up to 10 ms before it (a reference come too late)
LOUD_DB = -40.0  # a reference window quieter than this (dBFS RMS) has no echo to find
CLEAR_PEAK = 8.0  # the lag's peak, in spreads of the correlation: else double talk or noise
MIN_LAGS = 8  # lags measured before there is a verdict
MIN_SPAN_S = 20.0  # seconds they must span
KEEP_S = 600.0  # lags older than this are forgotten: a crystal warms up
MAX_SKEW = 1e-3  # beyond 0.1% it is not drift: the echo path itself changed
STRAY = SAMPLE_RATE * 3 // 1000  # a lag this far (3 ms) from the last ones is a stray peak
JUMP = 3  # unless this many in a row agree: then the echo path's delay jumped
RECENT = 5  # the lags a new one is held against
FIT_LAGS = 200  # the fit takes at most this many, spread over the span: 20k slopes


class EchoDrift:
    """Feed it each (microphone, reference) frame as the canceller gets them; read
    ``skew``. Lags are measured on the reference as handed out, after the samples
    already made up, which ``corrected`` (their running count) undoes."""

    def __init__(self) -> None:
        self._mic: list[Float32Array] = []
        self._ref: list[Float32Array] = []
        self._held = 0
        self._at = 0  # microphone samples seen
        self._lags: list[tuple[float, float]] = []  # (second, lag without corrections)
        self._strays: list[tuple[float, float]] = []  # lags far from the others, in a row
        self.skew = 0.0

    def feed(self, mic: Float32Array, reference: Float32Array, corrected: int) -> None:
        """``corrected``: samples the reference has dropped (> 0) or repeated so far."""
        self._mic.append(mic)
        self._ref.append(reference)
        self._held += len(mic)
        self._at += len(mic)
        if self._held < WINDOW:
            return
        mic_w, ref_w = np.concatenate(self._mic), np.concatenate(self._ref)
        self._mic, self._ref, self._held = [], [], 0
        lag = echo_lag(mic_w, ref_w)
        if lag is None:
            return
        # A dropped sample brings every later reference sample one earlier, so the
        # echo then lags it by one more: the uncorrected lag has that taken off.
        now, lag = self._at / SAMPLE_RATE, lag - corrected
        self._lags = [(t, v) for t, v in self._lags if now - t <= KEEP_S]
        recent = [v for _, v in self._lags[-RECENT:]]
        if recent and abs(lag - float(np.median(recent))) > STRAY:
            # A peak of the user's voice, or the path's delay jumped (a device's
            # buffering changed): only lags that keep agreeing start a new line.
            self._strays.append((now, lag))
            levels = [v for _, v in self._strays[-JUMP:]]
            if len(levels) < JUMP or max(levels) - min(levels) > STRAY:
                return
            self._lags, self._strays = self._strays[-JUMP:], []
        else:
            self._strays = []
            self._lags.append((now, lag))
        self.skew = self._fit()

    @property
    def lags(self) -> int:
        """Lags measured (and not yet forgotten)."""
        return len(self._lags)

    @property
    def known(self) -> bool:
        """Whether there are enough lags, over long enough, for a verdict."""
        return len(self._lags) >= MIN_LAGS and self._lags[-1][0] - self._lags[0][0] >= MIN_SPAN_S

    def _fit(self) -> float:
        if not self.known:
            return self.skew
        t = np.array([p[0] for p in self._lags])
        lag = np.array([p[1] for p in self._lags])
        if len(t) > FIT_LAGS:
            # Every pair of 600 lags (ten minutes of reply) is 180k slopes, 10 ms each
            # second on the frame loop; an even subset keeps the span, and so the line.
            keep = np.linspace(0, len(t) - 1, FIT_LAGS).round().astype(int)
            t, lag = t[keep], lag[keep]
        i, j = np.triu_indices(len(t), 1)
        apart = t[j] - t[i] > 1.0
        # Theil-Sen: the median of the pairwise slopes, deaf to the odd wrong peak.
        slope = float(np.median((lag[j] - lag[i])[apart] / (t[j] - t[i])[apart]))
        # The echo lags its reference less and less when the speaker runs fast: the
        # reference, paired by count, falls behind what is playing.
        skew = -slope / SAMPLE_RATE
        return skew if abs(skew) <= MAX_SKEW else 0.0


def echo_lag(mic: Float32Array, reference: Float32Array) -> float | None:
    """How many samples the echo in ``mic`` comes after ``reference`` (fractional),
    or None where there is no clear echo: a quiet reference, double talk, noise."""
    if level_db(reference) < LOUD_DB:
        return None
    n = 1 << int(np.ceil(np.log2(len(mic) + len(reference))))
    cross = np.fft.rfft(mic, n) * np.conj(np.fft.rfft(reference, n))
    cross /= np.abs(cross) + 1e-12
    corr = np.fft.irfft(cross, n)
    window = np.concatenate([corr[-EARLY:], corr[: MAX_LAG + 1]])  # lags -EARLY..MAX_LAG
    peak = int(np.argmax(window))
    spread = float(np.std(window))
    if spread <= 0 or window[peak] < CLEAR_PEAK * spread or peak in (0, len(window) - 1):
        return None
    left, mid, right = window[peak - 1], window[peak], window[peak + 1]
    bend = left - 2 * mid + right
    offset = 0.5 * (left - right) / bend if bend < 0 else 0.0
    return float(peak - EARLY + offset)
