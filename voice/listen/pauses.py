"""Long pauses inside a pass's audio, shortened before Whisper hears it.

A user who hesitates ("...that evening, the [1.5 s] two men shook hands") leaves a
second or more of room tone inside the turn, and every pass that covers it, the
turn's final above all, hears that silence too. Whisper is weakest there: it loops
("the-the-the-...") or guesses words into the quiet, and the words after the pause
come out garbled. Offline, one final pass over each hesitation of the corpus (31
items): WER 13.0% as spoken, 10.2% with the spliced pause cut to 0.3 s.

So a pause that the VAD heard as unvoiced, and after which the user spoke again
inside the same audio, is cut to ``keep`` (half of it either side of the cut); the
pause the audio ends in is never touched (the end-of-turn judgement reads it). The
pass's word and segment times are then put back on the audio as it was
(:func:`to_original`), so nothing downstream knows.

Pure functions over sample counts: the listener keeps the voiced flags and calls
these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE, Float32Array
from voice.listen.whisper import Transcription


@dataclass(frozen=True)
class Cut:
    """``removed`` samples were taken out at ``at`` (a sample of the shortened audio)."""

    at: int
    removed: int


def pause_runs(
    voiced: Sequence[bool], first_sample: int, start: int, end: int
) -> list[tuple[int, int]]:
    """The unvoiced runs of frames that lie inside samples ``start``..``end`` with voiced
    frames after them there, as (from, to) offsets from ``start``. ``voiced[k]`` is frame
    k's flag; frame k covers samples ``first_sample + k * FRAME_SAMPLES`` onwards. A
    frame outside what ``voiced`` holds counts as voiced (nothing is cut blind)."""
    runs: list[tuple[int, int]] = []
    first = max(0, -(-(start - first_sample) // FRAME_SAMPLES))  # the first whole frame
    last = min(len(voiced), (end - first_sample) // FRAME_SAMPLES)
    run_from: int | None = None
    for k in range(first, last):
        if not voiced[k]:
            if run_from is None:
                run_from = k
            continue
        if run_from is not None:
            lo = first_sample + run_from * FRAME_SAMPLES - start
            runs.append((lo, first_sample + k * FRAME_SAMPLES - start))
            run_from = None
    return runs  # a run still open at the end is the pause the audio ends in: left whole


def squeeze(
    audio: Float32Array, runs: list[tuple[int, int]], keep_ms: int
) -> tuple[Float32Array, list[Cut]]:
    """``audio`` with each run longer than ``keep_ms`` cut to ``keep_ms`` (from its
    middle), and where the cuts are."""
    keep = keep_ms * SAMPLE_RATE // 1000
    parts: list[Float32Array] = []
    cuts: list[Cut] = []
    pos = removed = 0
    for lo, hi in runs:
        if hi - lo <= keep:
            continue
        cut_from, cut_to = lo + keep // 2, hi - (keep - keep // 2)
        parts.append(audio[pos:cut_from])
        cuts.append(Cut(cut_from - removed, cut_to - cut_from))
        removed += cut_to - cut_from
        pos = cut_to
    if not cuts:
        return audio, []
    parts.append(audio[pos:])
    return np.concatenate(parts), cuts


def to_original(seconds: float, cuts: list[Cut]) -> float:
    """A time in the shortened audio as a time in the audio as it was."""
    at = seconds * SAMPLE_RATE
    return (at + sum(c.removed for c in cuts if c.at <= at)) / SAMPLE_RATE


def result_to_original(result: Transcription, cuts: list[Cut]) -> Transcription:
    """``result`` with its word and segment times put back on the audio as it was."""
    if not cuts:
        return result

    def back(seconds: float) -> float:
        return to_original(seconds, cuts)

    return replace(
        result,
        timed_words=[
            replace(w, start_s=back(w.start_s), end_s=back(w.end_s)) for w in result.timed_words
        ],
        segments=[
            replace(s, start_s=back(s.start_s), end_s=back(s.end_s)) for s in result.segments
        ],
    )
