"""The intonation measure of ``voice bench eot``: the pitch tracker and the contour
of the voice where it stopped, on tones whose pitch and level are known (pure signal
processing), and its pitch on a real voice in the voice's range."""

from __future__ import annotations

import numpy as np
import pytest

from voice.bench.intonation import final_contour
from voice.listen.pitch import pitch_track

RATE = 16000


def voice_like(hz_from: float, hz_to: float, seconds: float, fade_db: float = 0.0) -> np.ndarray:
    """A buzz (a fundamental and two harmonics) gliding from one pitch to another, its
    level falling by ``fade_db`` over the last half second."""
    t = np.arange(int(seconds * RATE)) / RATE
    hz = hz_from + (hz_to - hz_from) * t / seconds
    phase = 2 * np.pi * np.cumsum(hz) / RATE
    buzz = np.sin(phase) + 0.5 * np.sin(2 * phase) + 0.3 * np.sin(3 * phase)
    gain = np.ones_like(t)
    fading = t > seconds - 0.5
    gain[fading] = 10 ** (fade_db / 20 * (t[fading] - (seconds - 0.5)) / 0.5)
    return (0.2 * buzz * gain).astype(np.float32)


@pytest.mark.parametrize("hz", [90.0, 150.0, 240.0])
def test_it_finds_a_steady_pitch(hz: float) -> None:
    _, pitch, _ = pitch_track(voice_like(hz, hz, 1.0))
    assert np.nanmedian(pitch) == pytest.approx(hz, rel=0.03)
    assert np.isnan(pitch).mean() < 0.1


def test_a_fall_to_the_bottom_of_the_range_is_a_negative_final_pitch_and_slope() -> None:
    contour = final_contour(voice_like(200.0, 140.0, 2.0), 2.0)
    assert contour.final_st is not None and contour.slope_st_s is not None
    assert contour.final_st < -2.5 and contour.slope_st_s < -2.0


def test_a_rise_and_a_plateau_are_told_from_a_fall() -> None:
    rise = final_contour(voice_like(150.0, 210.0, 2.0), 2.0)
    level = final_contour(voice_like(180.0, 180.0, 2.0), 2.0)
    assert rise.final_st is not None and rise.final_st > 2.5
    assert level.final_st is not None and abs(level.final_st) < 0.5
    assert level.slope_st_s is not None and abs(level.slope_st_s) < 1.0


def test_a_voice_that_goes_quiet_at_the_end_has_a_low_final_level() -> None:
    faded = final_contour(voice_like(180.0, 180.0, 2.0, fade_db=-12.0), 2.0)
    steady = final_contour(voice_like(180.0, 180.0, 2.0), 2.0)
    assert faded.final_db is not None and steady.final_db is not None
    assert faded.final_db < -6.0 < steady.final_db


def test_silence_and_noise_have_no_contour() -> None:
    assert final_contour(np.zeros(RATE * 2, np.float32), 2.0).final_st is None
    noise = np.random.default_rng(1).normal(0, 0.1, RATE * 2).astype(np.float32)
    assert final_contour(noise, 2.0).final_st is None


def test_a_real_voice_is_tracked_inside_the_range_of_speech() -> None:
    from tests.conftest import clip

    _, pitch, _ = pitch_track(clip("cmu_arctic_axb_a0004", lead_s=0.0))
    voiced = pitch[~np.isnan(pitch)]
    assert voiced.size > 50  # at least half a second of voice in a read sentence
    assert 80.0 < np.median(voiced) < 300.0
