"""The devices' clocks measured from when their blocks arrive (pure arithmetic on
made-up arrival times; the drift against the real echo canceller is in
tests/component/test_echo_alignment.py)."""

from __future__ import annotations

import numpy as np
import pytest

from voice.transports.clocks import MIN_SPAN_S, StreamClock, clock_skew
from voice.transports.desk import PlayedReference


def watched(nominal: int, ppm: float, seconds: float, block: int, seed: int = 0,
            start: float = 1000.0) -> StreamClock:  # fmt: skip
    """A stream ``ppm`` fast, its blocks arriving up to 10 ms late, one in fifty 80 ms
    late (a busy machine)."""
    rng = np.random.default_rng(seed)
    clock, true_rate = StreamClock(nominal), nominal * (1 + ppm * 1e-6)
    for k in range(int(seconds * nominal / block)):
        late = rng.uniform(0, 0.010) + (0.080 if rng.random() < 0.02 else 0.0)
        clock.add(block, start + (k + 1) * block / true_rate + late)
    return clock


def test_a_clocks_true_rate_is_found_through_jittery_callbacks() -> None:
    assert watched(16000, 150, MIN_SPAN_S / 2, 320).rate_error() is None  # too soon
    error = watched(16000, 150, 60, 320).rate_error()
    assert error is not None and error * 1e6 == pytest.approx(150, abs=5)
    error = watched(48000, -40, 60, 480, seed=1).rate_error()
    assert error is not None and error * 1e6 == pytest.approx(-40, abs=5)


def test_the_skew_is_what_the_speaker_gains_on_the_microphone() -> None:
    mic = watched(48000, -50, 60, 480)
    speaker = watched(44100, 50, 60, 882, seed=1)
    assert clock_skew(mic, speaker) * 1e6 == pytest.approx(100, abs=15)
    assert clock_skew(speaker, mic) * 1e6 == pytest.approx(-100, abs=15)
    assert clock_skew(mic, StreamClock(44100)) == 0.0  # not watched yet: no correction
    assert clock_skew(mic, watched(44100, 5000, 60, 882)) == 0.0  # not drift: ignored


@pytest.mark.parametrize("skew", [1e-3, -1e-3])
def test_the_reference_makes_up_the_drift_a_sample_at_a_time(skew: float) -> None:
    drifting, steady = PlayedReference(), PlayedReference()
    drifting.skew = skew
    for reference in (drifting, steady):
        reference.add(np.zeros(3200, np.float32))
    for _ in range(1000):
        block = np.full(320, 0.1, np.float32)
        for reference in (drifting, steady):
            reference.add(block)
            assert len(reference.take(320)) == 320
    assert drifting.drift_corrected == round(1000 * 320 * skew)
    assert steady.buffered - drifting.buffered == drifting.drift_corrected


def test_an_output_streams_priming_burst_does_not_skew_its_clock() -> None:
    clock = StreamClock(16000)
    for _ in range(8):  # PortAudio fills the output buffer at once when it starts...
        clock.add(320, 500.0)
    for k in range(1, 30 * 50):  # ...and the device starts playing it 100 ms later
        clock.add(320, 500.1 + k * 0.02 * (1 - 30e-6))  # a block per 20 ms, 30 ppm fast
    error = clock.rate_error()
    assert error is not None and error * 1e6 == pytest.approx(30, abs=3)
