"""`voice bench turns`: the measuring on scripted event timelines, and the building of
its sets on synthetic audio (pure logic; the real models only run in the bench)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voice.audio import write_wav
from voice.bench.corpus import Clip
from voice.bench.turns import MODES, measure_turn, mode_settings, play_spans, summarize_set
from voice.bench.turnsets import (
    BACKGROUNDS,
    TurnItem,
    build_hesitations,
    build_noisy,
    build_pairs,
    floor_turns,
    hesitation_point,
    read_rttm,
    read_textgrid_words,
    room_tone,
    splice,
    under_noise,
)
from voice.config import Settings

RATE = 16000
CONVERSATION = Path(__file__).parents[1] / "corpus" / "conversation"


def ev(kind: str, ms: float, reply_id: int | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "audio_ms": ms, **extra}
    if reply_id is not None:
        out["reply_id"] = reply_id
    return out


def reply(rid: int, start: float, audio: float, text: str = "x", uid: int = 1) -> list[Any]:
    return [
        ev("reply_start", start, rid, text=text, utterance_id=uid, speculative=False),
        ev("playback_start", audio, rid),
    ]


# Two stretches of speech with a 1 s pause between: 1000-2000 ms and 3000-4000 ms.
SPEECH = [(1000.0, 2000.0), (3000.0, 4000.0)]


def test_a_reply_played_inside_the_pause_is_a_cut_in_and_its_talk_over_runs_to_the_pause() -> None:
    events = [
        *reply(1, 2600, 2800, "Hello there."),
        ev("paused", 3150, 1),  # the user resumed at 3000: 150 ms over their speech
        ev("interrupted", 3400, 1),
        ev("reply_end", 3400, 1, interrupted=True),
        *reply(2, 4600, 4700, "hello there how are you", uid=2),
        ev("reply_end", 9000, 2, interrupted=False),
    ]
    row = measure_turn(SPEECH, "hello there how are you", events)
    assert row["cut_ins"] == 1
    assert row["mid_turn_pauses"] == 1 and row["pauses_with_reply_start"] == 1
    assert row["talk_over_ms"] == [150]
    assert row["answer_text"] == "hello there how are you" and row["answer_after_end"]
    assert row["wer"] == 0.0 and row["whole"]
    assert row["voice_to_voice_ms"] == 700


def test_a_hesitation_counts_the_cut_ins_at_its_spliced_pause_apart_from_the_readers_own() -> None:
    speech = [(1000.0, 2000.0), (2500.0, 3000.0), (4000.0, 5000.0)]  # own pause, then spliced
    at_own = [*reply(1, 2100, 2150), ev("interrupted", 2600, 1), *reply(2, 5500, 5600)]
    at_spliced = [*reply(1, 3500, 3550), ev("interrupted", 4100, 1), *reply(2, 5500, 5600)]
    rows = {
        name: measure_turn(speech, "", events, spliced_ms=(3000.0, 4000.0))
        for name, events in (("own", at_own), ("spliced", at_spliced))
    }
    assert rows["own"]["cut_ins"] == rows["spliced"]["cut_ins"] == 1
    assert rows["own"]["cut_in_at_spliced_pause"] is False
    assert rows["spliced"]["cut_in_at_spliced_pause"] is True
    assert measure_turn(speech, "", at_spliced)["cut_in_at_spliced_pause"] is None  # no splice
    summary = summarize_set([{**rows[n], "pause_s": 1.0} for n in ("own", "spliced")])
    assert summary["cut_in_rate_up_to_1.5s"] == 1.0
    assert summary["cut_in_at_spliced_pause_rate_up_to_1.5s"] == 0.5


def test_a_reply_started_in_the_pause_but_cancelled_before_audio_is_no_cut_in() -> None:
    events = [
        ev("reply_start", 2700, 1, text="hello", utterance_id=1, speculative=True),
        ev("reply_end", 3050, 1, interrupted=True),
        *reply(2, 4500, 4600, "hello there"),
    ]
    row = measure_turn(SPEECH, "hello there", events)
    assert row["cut_ins"] == 0 and row["talk_over_ms"] == []
    assert row["pauses_with_reply_start"] == 1  # the decision was taken in the pause
    assert row["voice_to_voice_ms"] == 600


def test_a_reply_that_plays_on_over_the_end_answers_a_fragment_and_has_no_voice_to_voice() -> None:
    events = [*reply(1, 2500, 2700, "hello"), ev("reply_end", 8000, 1, interrupted=False)]
    row = measure_turn(SPEECH, "hello there how are you", events)
    assert row["cut_ins"] == 1
    assert row["talk_over_ms"] == [1000]  # all of the second stretch
    assert row["answer_text"] == "hello" and not row["answer_after_end"] and not row["whole"]
    assert row["voice_to_voice_ms"] is None


def test_what_came_after_the_end_of_turn_silence_is_apart_from_the_silence() -> None:
    """A long turn's reply is late either because the turn was given a long silence
    (its words looked unfinished) or because compute came after it: both are kept."""
    metrics = {"user_start_ms": 1000, "user_end_ms": 4000, "end_silence_ms": 500,
               "voice_to_voice_ms": 740}  # fmt: skip
    events = [*reply(1, 4500, 4740), ev("turn_metrics", 9000, 1, **metrics)]
    row = measure_turn(SPEECH, "", events)
    assert row["end_silence_ms"] == 500 and row["after_endpoint_ms"] == 240
    long_row = {**row, "speech_s": 20.0, "pause_s": None}
    summary = summarize_set([long_row, {**row, "speech_s": 2.0, "pause_s": None}])
    assert summary["reply_after_endpoint_ms"]["n"] == 2
    assert summary["reply_after_endpoint_over_15s_ms"]["n"] == 1
    assert summary["voice_to_voice_over_15s_ms"]["p50"] == 740


def test_without_a_reference_the_recognised_span_must_cover_the_turn() -> None:
    metrics = {"user_start_ms": 3200, "user_end_ms": 3700}  # 300 ms slack each side
    row = measure_turn(SPEECH, "", [*reply(1, 4500, 4600), ev("turn_metrics", 9000, 1, **metrics)])
    assert row["coverage"] == 0.5 and not row["whole"]
    metrics["user_start_ms"] = 1250
    full = [*reply(1, 4500, 4600), ev("turn_metrics", 9000, 1, **metrics)]
    assert measure_turn(SPEECH, "", full)["whole"]


def test_an_answer_that_holds_the_words_before_the_pause_is_whole_despite_asr_errors() -> None:
    def final(ms: float, text: str, start: float) -> dict[str, Any]:
        return ev("final", ms, text=text, start_ms=start, end_ms=ms, utterance_id=1)

    finals = [final(2100, "Hello there.", 1000), final(4100, "how are ewe", 3000)]
    merged = measure_turn(SPEECH, "hello there how are you today my friend", [
        *finals, *reply(1, 4500, 4600, "Hello there. how are ewe")
    ])  # fmt: skip
    assert merged["wer"] > 0.25 and merged["holds_all_finals"] and merged["whole"]
    fragment = measure_turn(SPEECH, "hello there how are you today my friend", [
        *finals, *reply(1, 4500, 4600, "how are ewe")
    ])  # fmt: skip
    assert not fragment["holds_all_finals"] and not fragment["whole"]


def test_play_spans_follow_pause_and_resume() -> None:
    events = [
        ev("playback_start", 100, 1),
        ev("paused", 200, 1),
        ev("resumed", 500, 1),
        ev("reply_end", 900, 1, interrupted=False),
    ]
    assert play_spans(events) == {1: [(100, 200), (500, 900)]}


def test_set_summary_counts_per_minute_and_by_pause() -> None:
    def row(cut_ins: int, pause_s: float, whole: bool) -> dict[str, Any]:
        return {
            "speech_s": 30.0, "cut_ins": cut_ins, "mid_turn_pauses": 4,
            "pauses_with_reply_start": cut_ins, "talk_over_ms": [100] * cut_ins,
            "whole": whole, "answer_text": "x", "voice_to_voice_ms": 500, "pause_s": pause_s,
        }  # fmt: skip

    summary = summarize_set([row(2, 0.5, False), row(0, 2.0, True)])
    assert summary["cut_in_rate"] == 0.5 and summary["cut_ins_per_min"] == 2.0
    assert summary["answer_wer_percent"] == {"p50": None, "p90": None, "n": 0}  # no transcripts
    heard = summarize_set([{**row(0, 1.0, True), "wer": w} for w in (0.0, 0.125, 0.5)])
    assert heard["answer_wer_percent"] == {"p50": 12.5, "p90": 42.5, "n": 3}
    assert summary["pause_reply_start_rate"] == 0.25
    assert summary["whole_turn_rate"] == 0.5
    assert summary["cut_in_rate_by_pause"] == {"0.5s": 1.0, "2.0s": 0.0}
    assert summary["cut_in_rate_up_to_1.5s"] == 1.0


def test_a_mode_may_name_settings_that_do_not_exist_yet(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        s, skipped = mode_settings(
            Settings(), {"turn.complete_silence_ms": 900, "turn.not_a_setting": 3000}
        )
    assert s.turn.complete_silence_ms == 900
    assert skipped == ["turn.not_a_setting"] and "not_a_setting" in caplog.text
    for overrides in MODES.values():
        assert mode_settings(Settings(), overrides)[1] == []


# -- the sets ------------------------------------------------------------------------


def tone_words(words: list[tuple[str, float, float]], seconds: float) -> np.ndarray:
    """A quiet noise floor with a loud tone where each word is."""
    rng = np.random.default_rng(0)
    audio = (rng.standard_normal(int(seconds * RATE)) * 0.002).astype(np.float32)
    t = np.arange(len(audio)) / RATE
    for _, start, end in words:
        span = (t >= start) & (t < end)
        audio[span] += 0.3 * np.sin(2 * np.pi * 220 * t[span]).astype(np.float32)
    return audio


WORDS = [
    (" He", 0.3, 0.5), (" walked", 0.55, 0.9), (" out", 0.95, 1.1), (" of", 1.1, 1.25),
    (" the", 1.3, 1.45), (" old", 1.55, 1.8), (" house", 1.85, 2.3), (" today.", 2.35, 2.8),
]  # fmt: skip


def test_the_pause_goes_after_the_function_word_nearest_the_middle() -> None:
    index, boundary = hesitation_point(WORDS) or (-1, 0.0)
    assert WORDS[index][0] == " the" and 1.45 <= boundary <= 1.55
    assert hesitation_point([(" Go", 0.0, 0.2), (" to", 0.2, 0.3)]) is None  # "to" is last


def test_the_held_out_pause_is_never_the_tuned_sets_word() -> None:
    tuned = hesitation_point(WORDS)
    assert tuned is not None
    # Two-thirds of the way through is nearest "the" too, so the next nearest is taken.
    index, _ = hesitation_point(WORDS, 2 / 3, avoid=[tuned[0]]) or (-1, 0.0)
    assert WORDS[index][0] == " of"
    only = [(" Go", 0.0, 0.2), (" to", 0.2, 0.3), (" bed", 0.35, 0.6)]
    assert hesitation_point(only, 2 / 3, avoid=[1]) is None  # no other word to pause after
    # A later held-out set avoids the earlier ones' words as well: none is left here.
    assert hesitation_point(WORDS, 1 / 3, avoid=[tuned[0], index]) is None


def test_room_tone_is_the_clips_own_quiet_not_digital_silence() -> None:
    audio = tone_words(WORDS, 3.0)
    tone = room_tone(audio, 1.2)
    assert len(tone) == int(1.2 * RATE)
    rms = float(np.sqrt(np.mean(tone**2)))
    assert 0.0005 < rms < 0.005


def test_room_tone_of_a_clip_trimmed_close_to_its_words_holds_no_speech() -> None:
    """A CMU Arctic clip has at most 0.15 s of quiet at its edges and between words:
    any 0.3 s window holds a syllable. The tone must be the room's, not a loop of it."""
    rng = np.random.default_rng(3)
    parts = []
    for _ in range(6):
        parts.append(0.001 * rng.standard_normal(int(0.15 * RATE)))  # the room, -60 dB
        parts.append(0.1 * np.sin(np.arange(int(0.4 * RATE)) * 2 * np.pi * 180 / RATE))
    audio = np.concatenate(parts).astype(np.float32)
    tone = room_tone(audio, 1.0)
    assert len(tone) == RATE
    assert float(np.sqrt(np.mean(tone**2))) < 0.0015  # the room's 0.001, not a syllable's


def test_a_spliced_pause_is_a_gap_in_the_ground_truth(tmp_path: Path) -> None:
    audio = tone_words(WORDS, 3.0)
    assert len(splice(audio, 1.5, 1.0)) == len(audio) + RATE
    write_wav(tmp_path / "a.wav", audio)
    clip = Clip("librispeech_x", tmp_path / "a.wav", 3.0, "he walked out of the old house today",
                "speech", [])  # fmt: skip
    items = build_hesitations([clip], lambda _: WORDS)
    assert len(items) == 1
    item = items[0]
    assert item.pause_s == 0.5 and "the [0.5 s] old" in item.note
    assert item.reference == clip.text
    longest = max(b - a for a, b in item.pauses)
    assert 0.55 <= longest <= 0.7  # the spliced pause and the words' own gap around it
    (spliced,) = [p for p in item.pauses if p[1] - p[0] == longest]
    assert item.pause_at_s is not None and spliced[0] - 0.1 <= item.pause_at_s < spliced[1]
    assert abs(item.speech[0][0] - (0.5 + 0.3)) < 0.05  # the lead of room tone
    (held,) = build_hesitations([clip], lambda _: WORDS, kind="hesitation_heldout")
    assert held.set == "hesitation_heldout" and "of [0.7 s] the" in held.note
    assert build_hesitations([clip], lambda _: WORDS, kind="hesitation_early") == []


def test_pairs_join_one_speakers_sentences(tmp_path: Path) -> None:
    clips = []
    for name in ("s1", "s2", "t1"):
        write_wav(tmp_path / f"{name}.wav", tone_words(WORDS, 3.0))
        clips.append(Clip(name, tmp_path / f"{name}.wav", 3.0, f"text {name}", "speech", []))
    items = build_pairs(clips, {"s1": "S", "s2": "S", "t1": "T"})
    assert [i.name for i in items] == ["pair-s1+s2"]
    item = items[0]
    assert item.reference == "text s1 text s2" and item.pause_s == 0.8
    assert abs(max(b - a for a, b in item.pauses) - 0.8) < 0.05


def _speech_and_noise_db(item: TurnItem, clean: TurnItem) -> tuple[float, float]:
    noise = item.audio - clean.audio
    inside = np.concatenate([clean.audio[int(a * RATE) : int(b * RATE)] for a, b in clean.speech])
    level = lambda x: 10 * np.log10(np.mean(x.astype(np.float64) ** 2))  # noqa: E731
    return float(level(inside)), float(level(noise))


def test_a_background_plays_under_the_whole_item_at_the_asked_level() -> None:
    audio = tone_words(WORDS, 3.0)
    clean = TurnItem("hesitation-x-0.5s", "hesitation", audio, [(0.5, 2.5)], "the words", 0.5,
                     "...the [0.5 s] old...", 1.2)  # fmt: skip
    noise = np.random.default_rng(3).normal(0, 0.3, RATE).astype(np.float32)  # 1 s, looped
    noisy = under_noise(clean, noise, "hiss", 10.0)
    assert len(noisy.audio) == len(audio)
    speech_db, noise_db = _speech_and_noise_db(noisy, clean)
    assert abs(speech_db - noise_db - 10.0) < 0.5
    # The truth is the clean speech's; the pause and the reference are kept.
    assert (noisy.speech, noisy.reference, noisy.pause_s, noisy.pause_at_s) == (
        clean.speech,
        clean.reference,
        clean.pause_s,
        clean.pause_at_s,
    )
    assert noisy.set == "hesitation_noisy" and noisy.name.endswith("-hiss")
    assert "under hiss at 10 dB" in noisy.note
    # Looped with cross-faded seams: the background is there in the last second too.
    tail = noisy.audio[-RATE:] - audio[-RATE:]
    assert float(np.sqrt(np.mean(tail**2))) > 0.1 * float(np.sqrt(np.mean(noise**2)))


def test_every_background_meets_every_pause_length() -> None:
    noise_dir = Path(__file__).parents[1] / "corpus" / "noise"
    audio = tone_words(WORDS, 3.0)
    items = [
        TurnItem(f"h{i}", "hesitation", audio, [(0.5, 2.5)], "w", (0.5, 1.0, 1.5, 2.0)[i % 4])
        for i in range(16)
    ]
    noisy = build_noisy(items, noise_dir)
    pairs = {(item.pause_s, item.name.split("-", 1)[1]) for item in noisy}
    assert len(pairs) == 16 and len({name for _, name in pairs}) == len(BACKGROUNDS)


def test_meeting_turns_end_when_another_speaker_takes_the_floor() -> None:
    turns = floor_turns(read_rttm(CONVERSATION / "ami_es2004_excerpt.rttm")["mixture"])
    assert [(s, round(t, 2)) for s, t, _ in turns] == [
        ("FEE016", 0.0),
        ("MEO015", 5.18),
        ("FEE013", 7.43),
        ("FEE016", 29.78),
        ("MEO015", 44.46),
    ]
    # FEE016's 2 s interjection at 53.8 s is inside MEO015's segment: talked through.
    assert [(round(a, 2), round(b, 2)) for a, b in turns[-1][2]] == [(44.46, 60.0)]


def test_textgrid_words_are_read_with_their_times() -> None:
    words = read_textgrid_words(CONVERSATION / "mfa_acoustic_corpus.TextGrid")
    assert words[:3] == [("this", 1.05, 1.2), ("is", 1.2, 1.34), ("the", 1.34, 1.46)]


def test_turn_item_pauses_are_the_gaps_between_speech() -> None:
    item = TurnItem("x", "pairs", np.zeros(RATE, np.float32), [(0.5, 1.0), (1.3, 2.0)])
    assert item.pauses == [(1.0, 1.3)] and item.speech_s == pytest.approx(1.2)
