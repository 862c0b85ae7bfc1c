"""The speaker's intonation where they stopped: a second opinion on the end of a turn
that needs no model.

Issue 21 asked for a prosody second opinion. The trained one (Smart Turn v3.2,
``voice bench prosody``) held back half of the real ends. Studies of turn-taking in
dialogue (Gravano and Hirschberg, 2011) name simpler cues: a turn is yielded on a
fall to the bottom of the speaker's range (or a high rise), and held on a level
"plateau" at mid range; the voice also goes quieter as a turn ends. These are
measured here from the audio alone, against the speaker's own pitch and loudness in
the seconds before, so that a low voice and a high one are judged alike.

The pitch tracker is the listener's (``voice.listen.pitch``, a plain YIN), here read
over the five seconds before each stop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voice.audio.format import SAMPLE_RATE, Float32Array
from voice.listen.pitch import WINDOW_SAMPLES, pitch_track

CONTEXT_S = 5.0  # the speaker's own range: the voiced frames of this much before
FINAL_S = 0.4  # where the last voiced stretch is looked for, before the stop
FINAL_FRAMES = 5  # the final pitch: the median of the last this many voiced frames
SLOPE_S = 0.25  # the final slope is fitted over the voiced frames of this much


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
