"""The voice held where the speech stopped (``voice.listen.pitch.held_sound_s``): on
made-up voices for the logic, then on the corpus's real pauses and turn ends."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from voice.bench.turnsets import TurnItem, build_conversation, build_set, decision_points
from voice.listen.pitch import held_sound_s

RATE = 16000


def voice(pitch_hz: np.ndarray) -> np.ndarray:
    """A voiced sound with this pitch sample by sample: a few harmonics, as a vowel has."""
    phase = 2 * np.pi * np.cumsum(pitch_hz) / RATE
    wave = sum(np.sin(k * phase) / k for k in (1, 2, 3, 4))
    return (0.2 * wave).astype(np.float32)


def steady(hz: float, seconds: float) -> np.ndarray:
    return voice(np.full(int(seconds * RATE), hz))


def glide(from_hz: float, to_hz: float, seconds: float) -> np.ndarray:
    return voice(np.geomspace(from_hz, to_hz, int(seconds * RATE)))


def test_a_vowel_held_at_one_pitch_is_measured_to_its_length() -> None:
    # A word at a moving pitch, then "uhh" held for half a second.
    speech = np.concatenate([glide(180, 140, 0.4), steady(120, 0.5)])
    assert 0.4 <= held_sound_s(speech) <= 0.5


def test_a_last_syllable_whose_pitch_falls_is_not_held() -> None:
    # A turn's end: the pitch falls by a few semitones over its last syllable.
    speech = np.concatenate([steady(150, 0.3), glide(150, 110, 0.3)])
    assert held_sound_s(speech) < 0.15


def hiss(seconds: float) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (0.05 * rng.standard_normal(int(seconds * RATE))).astype(np.float32)


def test_a_held_word_is_held_through_its_last_consonant() -> None:
    # "wooords": the held vowel, then a long voiceless "s" before the pause.
    assert held_sound_s(np.concatenate([steady(120, 0.5), hiss(0.45)])) >= 0.4


def test_a_note_that_goes_on_past_the_stop_is_the_room_not_the_speaker() -> None:
    # Music under the speech: the VAD's stop lands inside a held note, which plays on.
    speech = np.concatenate([glide(180, 140, 0.4), steady(220, 0.5)])
    assert held_sound_s(speech, steady(220, 0.1)) == 0.0
    assert held_sound_s(speech, np.zeros(1600, np.float32)) >= 0.4  # a real pause


def test_no_voice_at_the_stop_holds_nothing() -> None:
    assert held_sound_s(np.concatenate([steady(120, 0.5), hiss(0.7)])) == 0.0
    assert held_sound_s(np.zeros(RATE, np.float32)) == 0.0
    assert held_sound_s(np.full(RATE, 0.3, np.float32)) == 0.0  # a stuck input is no voice
    assert held_sound_s(np.zeros(0, np.float32)) == 0.0


CONVERSATION = Path(__file__).parents[1] / "corpus" / "conversation"


@pytest.fixture(scope="module")
def turns() -> list[TurnItem]:
    return build_conversation(CONVERSATION) + build_set("pairs") + build_set("pairs_noisy")


def test_the_corpus_fillers_are_held_and_no_turn_ends_on_a_held_voice(
    turns: list[TurnItem],
) -> None:
    """Every turn end of the conversations and of the read pairs (quiet, or under a tap,
    a bike, jazz or Brahms) ends on a voice that moves (or none); the spontaneous
    monologues' "uh [1.33 s]" and drawn-out "...some words [1.16 s]" are held."""
    held = {}
    for item in turns:
        for at_s, is_end in decision_points(item):
            stop = int(at_s * RATE)  # and the 100 ms the listener's pass runs on
            after = item.audio[stop : stop + RATE // 10]
            held[(item.name, round(at_s, 1), is_end)] = held_sound_s(item.audio[:stop], after)
    ends = {key: s for key, s in held.items() if key[2]}
    assert len(ends) >= 15
    assert max(ends.values()) < 0.25, ends
    at = {(name, at): s for (name, at, _), s in held.items()}
    assert at[("mfa-cold_corpus", 17.9)] >= 0.3  # "...original one. [0.69 s] uh [1.33 s] and"
    assert at[("mfa-acoustic_corpus", 16.9)] >= 0.3  # "...some words [1.16 s] and"
    pauses = [s for key, s in held.items() if not key[2]]
    assert sum(s >= 0.25 for s in pauses) <= len(pauses) // 5  # held is the exception
