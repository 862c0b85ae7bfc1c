"""The echo's lag behind its reference, and its drift, from signals with a known delay
(corpus speech as the reply; the real canceller under drift is in
tests/component/test_echo_alignment.py)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import clip

from voice.transports.drift import FIT_LAGS, WINDOW, EchoDrift, echo_lag

SPEECH = 0.3 * clip("librispeech_8266-258262-0001", lead_s=0.0)  # 16 s, few pauses
OTHER = 0.3 * clip("ljspeech_LJ001-0008", lead_s=0.0)


def delayed(signal: np.ndarray, samples: float) -> np.ndarray:
    """``signal`` later by a (fractional) number of samples, same length."""
    n = 2 * len(signal)
    spectrum = np.fft.rfft(signal, n) * np.exp(-2j * np.pi * np.fft.rfftfreq(n) * samples)
    return np.fft.irfft(spectrum, n)[: len(signal)].astype(np.float32)


def window(second: int) -> np.ndarray:
    start = (second % 14) * WINDOW
    return SPEECH[start : start + WINDOW]


def test_the_echos_lag_is_found_to_a_fraction_of_a_sample() -> None:
    reference = window(2)
    room = 0.4 * delayed(reference, 1149.4) + 0.1 * delayed(reference, 1400)  # a reflection
    noise = np.random.default_rng(0).normal(0, 0.003, WINDOW).astype(np.float32)
    lag = echo_lag(room + noise, reference)
    assert lag == pytest.approx(1149.4, abs=0.2)


def test_no_lag_without_an_echo_of_the_reference() -> None:
    reference = window(2)
    assert echo_lag(delayed(reference, 500), 0.001 * reference) is None  # nothing played
    assert echo_lag(OTHER[:WINDOW], reference) is None  # the mic hears someone else


def feed_second(drift: EchoDrift, lag: float, corrected: int, mic: np.ndarray | None = None,
                second: int = 0) -> None:  # fmt: skip
    reference = window(second)
    heard = delayed(reference, lag) if mic is None else mic
    for k in range(0, WINDOW, 320):
        drift.feed(heard[k : k + 320], reference[k : k + 320], corrected)


def test_a_steady_drift_is_measured_on_the_echo() -> None:
    drift = EchoDrift()
    for second in range(40):  # the speaker 100 ppm fast: the echo lags 1.6 samples less a second
        feed_second(drift, 1000 - 1.6 * second, 0, second=second)
    assert drift.known and drift.skew * 1e6 == pytest.approx(100, abs=5)


def test_lags_on_a_corrected_reference_count_the_correction() -> None:
    drift = EchoDrift()
    for second in range(40):  # the same drift already made up (a sample dropped each
        # 0.6 s brings the reference on by one): the lag holds still
        feed_second(drift, 1000, corrected=round(1.6 * second), second=second)
    assert drift.skew * 1e6 == pytest.approx(100, abs=10)


def test_a_stray_peak_is_ignored_and_a_jump_in_the_delay_starts_afresh() -> None:
    drift = EchoDrift()
    for second in range(60):  # the speaker 100 ppm fast, as above
        if second == 15:  # the user's voice, loud, over the reply
            feed_second(drift, 0, 0, mic=OTHER[:WINDOW] + 0.01 * window(second), second=second)
        elif second == 20:
            feed_second(drift, 300, 0, second=second)  # a lone wrong peak
        else:  # from 30 s on, the device buffers 25 ms more: the echo comes later
            feed_second(drift, 1000 - 1.6 * second + (400 if second >= 30 else 0), 0,
                        second=second)  # fmt: skip
        if second == 29:
            assert drift.skew * 1e6 == pytest.approx(100, abs=5)
    assert drift.skew * 1e6 == pytest.approx(100, abs=5)
    assert drift.lags <= 30  # only the lags since the jump


def test_ten_minutes_of_lags_are_fitted_on_a_subset_that_keeps_the_line() -> None:
    drift = EchoDrift()
    for second in range(600):  # 100 ppm, ten minutes of reply: a lag a loud second, 200 fitted
        feed_second(drift, 1000 - 1.6 * second, 0, second=second)
    assert drift.lags > FIT_LAGS  # (quiet seconds give none)
    assert drift.skew * 1e6 == pytest.approx(100, abs=1)
