"""Long pauses inside a pass's audio are cut before Whisper hears them, and the pass's
times are put back on the audio as it was (voice.listen.pauses; pure logic)."""

from __future__ import annotations

import numpy as np

from voice.audio.format import FRAME_SAMPLES
from voice.listen.pauses import Cut, pause_runs, result_to_original, squeeze, to_original
from voice.listen.whisper import Segment, Transcription, WordTime

F = FRAME_SAMPLES  # 20 ms


def test_only_pauses_with_speech_after_them_are_found() -> None:
    voiced = [True] * 5 + [False] * 50 + [True] * 5 + [False] * 30  # ends in a pause
    assert pause_runs(voiced, 0, 0, len(voiced) * F) == [(5 * F, 55 * F)]
    # Offsets are from the pass's first sample; frames before the audio are not read.
    assert pause_runs(voiced, 0, 3 * F, 60 * F) == [(2 * F, 52 * F)]
    assert pause_runs(voiced, 0, 10 * F, 60 * F) == [(0, 45 * F)]
    # Frames the flags no longer hold count as voiced: nothing is cut blind.
    assert pause_runs(voiced, 1000 * F, 0, 60 * F) == []


def test_a_long_pause_is_cut_from_its_middle_and_times_map_back() -> None:
    audio = np.concatenate([np.ones(16000), np.zeros(24000), np.ones(8000)]).astype(np.float32)
    short, cuts = squeeze(audio, [(16000, 40000)], keep_ms=300)
    assert cuts == [Cut(at=16000 + 2400, removed=24000 - 4800)]
    assert len(short) == len(audio) - 19200
    assert short[16000 + 2400 - 1] == 0 and short[16000 + 4800] == 1  # 0.3 s of pause left
    assert to_original(0.5, cuts) == 0.5  # before the cut
    assert to_original((16000 + 4800) / 16000, cuts) == 40000 / 16000  # the speech after it
    unchanged, none = squeeze(audio, [(16000, 20000)], keep_ms=300)  # 0.25 s: kept whole
    assert none == [] and unchanged is audio


def test_a_pass_over_the_shortened_audio_gets_the_original_times() -> None:
    cuts = [Cut(at=24000, removed=16000)]  # 1 s cut 1.5 s in
    result = Transcription(
        words=["the", "two"],
        timed_words=[WordTime("the", 1.2, 1.4, 0.9), WordTime("two", 1.7, 2.0, 0.8)],
        segments=[Segment(0.0, 2.0, "the two")],
    )
    back = result_to_original(result, cuts)
    assert [(w.start_s, w.end_s) for w in back.timed_words] == [(1.2, 1.4), (2.7, 3.0)]
    assert [(s.start_s, s.end_s) for s in back.segments] == [(0.0, 3.0)]
    assert back.words == result.words and result_to_original(result, []) is result
