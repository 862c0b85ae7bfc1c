"""The speaker's intonation where they stopped: a second opinion on the end of a turn
that needs no model.

Issue 21 asked for a prosody second opinion. The trained one (Smart Turn v3.2,
``voice bench prosody``) held back half of the real ends. Studies of turn-taking in
dialogue (Gravano and Hirschberg, 2011) name simpler cues: a turn is yielded on a
fall to the bottom of the speaker's range (or a high rise), and held on a level
"plateau" at mid range; the voice also goes quieter as a turn ends. These are
measured here from the audio alone, against the speaker's own pitch and loudness in
the seconds before, so that a low voice and a high one are judged alike.

The pitch tracker is a plain YIN (de Cheveigne and Kawahara, 2002): the cumulative-
mean-normalised difference function of each 25 ms window, its first dip under a
threshold taken as the period. It is written from the paper with numpy, and is slow
enough only for benches (about 16 ms a second of audio here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, Float32Array

FloatArray = npt.NDArray[np.float64]

HOP_S = 0.01
WINDOW_SAMPLES = 400  # 25 ms: two periods of a 80 Hz voice
LOWEST_HZ = 60.0
HIGHEST_HZ = 400.0
DIP = 0.2  # YIN's threshold on the normalised difference: under it, a period
QUIET_DB = -35.0  # frames this far under the loud frames of the context are not voice
SILENT_DB = -60.0  # nor is anything under this (full scale 0 dB): digital silence has no pitch
CONTEXT_S = 5.0  # the speaker's own range: the voiced frames of this much before
FINAL_S = 0.4  # where the last voiced stretch is looked for, before the stop
FINAL_FRAMES = 5  # the final pitch: the median of the last this many voiced frames
SLOPE_S = 0.25  # the final slope is fitted over the voiced frames of this much


def pitch_track(audio: Float32Array) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(frame start seconds, pitch in Hz or NaN where unvoiced, level in dB) every
    ``HOP_S``."""
    hop = int(HOP_S * SAMPLE_RATE)
    longest = int(SAMPLE_RATE / LOWEST_HZ)
    shortest = int(SAMPLE_RATE / HIGHEST_HZ)
    span = WINDOW_SAMPLES + longest
    samples = np.asarray(audio, dtype=np.float64)
    count = max(0, (len(samples) - span) // hop + 1)
    if count == 0:
        empty = np.zeros(0)
        return empty, empty, empty
    index = np.arange(count)[:, None] * hop + np.arange(span)[None, :]
    frames = samples[index]
    window = frames[:, :WINDOW_SAMPLES]
    size = 1 << int(np.ceil(np.log2(span + WINDOW_SAMPLES)))
    spectrum = np.fft.rfft(frames, size) * np.conj(np.fft.rfft(window, size))
    correlation = np.fft.irfft(spectrum, size)[:, : longest + 1]
    squares = np.cumsum(np.pad(frames**2, ((0, 0), (1, 0))), axis=1)
    lags = np.arange(longest + 1)
    energy_at_lag = squares[:, lags + WINDOW_SAMPLES] - squares[:, lags]
    difference = energy_at_lag[:, :1] + energy_at_lag - 2.0 * correlation
    difference[:, 0] = 0.0
    running = np.cumsum(difference[:, 1:], axis=1)
    normalised = np.ones_like(difference)
    normalised[:, 1:] = difference[:, 1:] * lags[1:] / np.maximum(running, 1e-12)
    level = 10.0 * np.log10(np.mean(window**2, axis=1) + 1e-12)
    pitch = np.full(count, np.nan)
    search = normalised[:, shortest : longest + 1]
    for row in range(count):
        under = np.flatnonzero(search[row] < DIP)
        if under.size == 0:
            continue
        lag = under[0]
        while lag + 1 < search.shape[1] and search[row, lag + 1] < search[row, lag]:
            lag += 1  # down to the bottom of the dip
        pitch[row] = SAMPLE_RATE / (lag + shortest)
    loud = float(np.percentile(level, 90))
    pitch[(level < loud + QUIET_DB) | (level < SILENT_DB)] = np.nan
    times: FloatArray = np.arange(count, dtype=np.float64) * HOP_S
    return times, pitch, np.asarray(level, dtype=np.float64)


@dataclass(frozen=True)
class Contour:
    """How the voice ended, against the speaker's own range before it.

    ``final_st``: the last voiced pitch in semitones from the speaker's median (a fall
    to the bottom of the range is negative). ``slope_st_s``: its slope over the last
    ``SLOPE_S`` of voice, semitones a second. ``final_db``: the last voiced frames'
    level against the median of the voiced ones. ``None`` where too little was voiced.
    """

    final_st: float | None
    slope_st_s: float | None
    final_db: float | None


UNMEASURED = Contour(None, None, None)


def final_contour(audio: Float32Array, stop_s: float) -> Contour:
    """The contour of the voice up to ``stop_s`` (where the speech stops)."""
    start_s = max(0.0, stop_s - CONTEXT_S)
    heard = audio[int(start_s * SAMPLE_RATE) : int(stop_s * SAMPLE_RATE)]
    times, pitch, level = pitch_track(heard)
    voiced = ~np.isnan(pitch)
    if voiced.sum() < 2 * FINAL_FRAMES:
        return UNMEASURED
    semitones = 12.0 * np.log2(pitch / np.median(pitch[voiced]))
    # A frame's window runs WINDOW_SAMPLES past its start: its centre is its time.
    centres = times + WINDOW_SAMPLES / 2 / SAMPLE_RATE
    end_s = len(heard) / SAMPLE_RATE
    near = voiced & (centres >= end_s - FINAL_S)
    if near.sum() < FINAL_FRAMES:
        return UNMEASURED
    last = np.flatnonzero(near)
    final_st = float(np.median(semitones[last[-FINAL_FRAMES:]]))
    final_db = float(np.median(level[last[-FINAL_FRAMES:]]) - np.median(level[voiced]))
    fitted = last[centres[last] >= centres[last[-1]] - SLOPE_S]
    slope = None
    if fitted.size >= FINAL_FRAMES:
        slope = float(np.polyfit(centres[fitted], semitones[fitted], 1)[0])
    return Contour(final_st, slope, final_db)
