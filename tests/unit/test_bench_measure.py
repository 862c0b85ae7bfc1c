"""How `voice bench conversation` measures a run against its script (pure logic on
hand-made events): from where each clip's speech really is, not where the VAD put it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from voice.bench.conversation import (
    _measure,
    _recognition_under_load,
    bench_conversation,
    new_counts,
)
from voice.config import Settings
from voice.errors import ConfigError
from voice.transports.simulate import ScriptTurn

RATE = 16000


def clip(speech_s: float, lead_s: float = 0.2) -> np.ndarray:
    """``lead_s`` of silence, then ``speech_s`` of loud audio."""
    return np.concatenate([np.zeros(int(lead_s * RATE)), np.full(int(speech_s * RATE), 0.3)])


def placed(audio: np.ndarray, at_s: float, expect: str = "turn") -> ScriptTurn:
    return ScriptTurn(audio=audio.astype(np.float32), name=f"clip@{at_s}", expect=expect,
                      start_sample=int(at_s * RATE))  # fmt: skip


def event(kind: str, ms: float, reply_id: int = 1) -> dict[str, Any]:
    return {"type": kind, "audio_ms": ms, "reply_id": reply_id}


def test_voice_to_voice_runs_from_the_clips_last_loud_frame() -> None:
    turns = [placed(clip(2.0), 0.5), placed(clip(1.0), 5.0)]
    # Clip 1's speech: 0.7-2.7 s. A reply cut in at 1.5 s (interrupted), the answer
    # played from 3.2 s; clip 2's speech ends at 6.2 s, answered at 6.75 s.
    events = [
        event("reply_start", 1500, 1), event("playback_start", 1520, 1),
        event("interrupted", 1700, 1), event("reply_end", 1700, 1),
        event("reply_start", 3150, 2), event("playback_start", 3200, 2),
        event("reply_end", 4000, 2),
        event("reply_start", 6700, 3), event("playback_start", 6750, 3),
        event("reply_end", 7500, 3),
    ]  # fmt: skip
    c = new_counts()
    _measure(True, turns, events, c)
    assert c["user_turns"] == 2 and c["cut_ins"] == 1 and c["cut_in_replies"] == 1
    assert c["v2v"] == [500.0, 550.0]
    assert c["cut_in_clips"] == ["clip@0.5"]


def test_a_cut_in_that_talks_over_the_end_has_no_voice_to_voice() -> None:
    turns = [placed(clip(2.0), 0.5)]
    events = [event("reply_start", 1500), event("playback_start", 1520), event("reply_end", 4000)]
    c = new_counts()
    _measure(True, turns, events, c)
    assert c["cut_ins"] == 1 and c["v2v"] == []


def test_barge_in_runs_from_the_interrupting_clips_first_loud_frame() -> None:
    opener = placed(clip(1.0), 0.5)
    stop = placed(clip(0.5, lead_s=0.3), 3.0, expect="barge_in")  # speech from 3.3 s
    events = [
        event("reply_start", 2000), event("playback_start", 2020),
        event("paused", 3390), event("interrupted", 3700), event("reply_end", 3700),
    ]  # fmt: skip
    c = new_counts()
    _measure(False, [opener, stop], events, c)
    assert c["barge_ins"] == c["barge_ins_stopped"] == 1
    assert c["barge_in"] == [90.0]  # to the pause, when the audio stopped
    assert c["user_turns"] == 0 and c["opener_turns"] == 1  # openers are counted apart


def test_noise_over_a_reply_counts_its_pauses_and_kills_apart() -> None:
    opener = placed(clip(1.0), 0.5)
    noise = placed(clip(2.0, lead_s=0.0), 3.0, expect="noise")  # 3.0-5.0 s
    events = [
        event("reply_start", 2000), event("playback_start", 2020),
        event("paused", 3100), event("resumed", 3400), event("paused", 4000),
        event("resumed", 5500), event("paused", 6000), event("reply_end", 8000),
    ]  # fmt: skip
    c = new_counts()
    _measure(False, [opener, noise], events, c)
    assert c["false_barge_in_trials"] == 1 and c["false_barge_ins"] == 0
    # Two pauses while the noise played; the one after it is not the noise's.
    assert (c["noise_trials"], c["noise_trials_paused"], c["noise_pauses"]) == (1, 1, 2)


def test_first_words_over_a_reply_count_speech_not_the_noise_scripts_inventions() -> None:
    def over_a_reply(conversation: str, words_after_ms: float) -> list[dict[str, Any]]:
        said = [
            {"type": "reply_start", "audio_ms": 1000},
            {"type": "speech_start", "audio_ms": 1600, "start_ms": 1500, "utterance_id": 2},
            {"type": "partial", "audio_ms": 1500 + words_after_ms, "text": "Stop.",
             "utterance_id": 2},
        ]  # fmt: skip
        return [{**e, "conversation": conversation} for e in said]

    events = over_a_reply("barge_in-stop", 300) + over_a_reply("noise-jazz", 3800)
    assert _recognition_under_load(events)["first_words_over_a_reply_ms"]["n"] == 1
    assert _recognition_under_load(events)["first_words_over_a_reply_ms"]["p50"] == 300


def test_an_unknown_mode_is_named_before_anything_loads() -> None:
    with pytest.raises(ConfigError, match="no conversation bench mode fast") as caught:
        bench_conversation([], Settings(), modes=["default", "fast"])
    assert "no_speculation" in caught.value.hint
