"""The wake word through the real models: microWakeWord's "hey_jarvis", Whisper, SmolLM2
and Piper, on scripted conversations on the virtual clock.

No recording of "Hey Jarvis" ships, so the bundled Piper voice says it (the benchmark,
``voice bench wake``, adds other paces, pitches, espeak-ng's voices and noise); the
speech without the wake word is corpus audio.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import clip

from voice.app.build import build_session, load_engines
from voice.audio.format import float_to_pcm16
from voice.config import Settings, load_settings
from voice.errors import ConfigError, ModelNotFoundError
from voice.listen.wake import load_wake_detector
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate

FOLLOW_UP_S = 3.0


def settings() -> Settings:
    out = Settings()
    out.llm.max_reply_tokens = 60
    out.llm.temperature = 0.0  # the same (long enough) reply every run: barge-in finds it
    out.tts.variation = False  # the same voice every run: the request, and replies as long
    out.wake.wake_word = "hey_jarvis"
    out.wake.follow_up_s = FOLLOW_UP_S
    return out


@pytest.fixture(scope="module")
def engines() -> Engines:
    return load_engines(settings())


@pytest.fixture(scope="module")
def same_breath(engines: Engines) -> np.ndarray:
    """ "Hey Jarvis, what time is it?" said in one breath by the bundled voice."""
    return np.asarray(engines.tts.synthesize_all("Hey Jarvis, what time is it?"), np.float32)


def converse(engines: Engines, turns: list[ScriptTurn]) -> SimulationResult:
    return simulate(Script(turns), build_session(settings(), engines), engines, repeatable=True)


def of(result: SimulationResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


def corpus(name: str, after: str | None = None, delay: float = 0.0,
           at_s: float | None = None) -> ScriptTurn:  # fmt: skip
    return ScriptTurn(clip(name, lead_s=0.0), name, at_s=at_s, after=after, delay_s=delay)


def test_the_detector_hears_the_phrase_and_not_other_speech(same_breath: np.ndarray) -> None:
    def detections(audio: np.ndarray) -> int:
        detector = load_wake_detector("hey_jarvis")
        pcm = float_to_pcm16(np.concatenate([np.zeros(8000, np.float32), audio]))
        return sum(detector.process(pcm[i : i + 320]) for i in range(0, len(pcm) - 319, 320))

    assert detections(same_breath) == 1
    assert detections(clip("jfk_inaugural_1961")) == 0


def test_same_breath_request_answered_then_a_follow_up_then_idle(
    engines: Engines, same_breath: np.ndarray
) -> None:
    result = converse(engines, [
        corpus("cmu_arctic_axb_a0004", at_s=0.3),  # "You were glad to see ..." : no wake word
        ScriptTurn(same_breath, "wake", at_s=4.0),
        corpus("cmu_arctic_aew_a0001", after="reply_end", delay=1.0),  # a follow-up
        corpus("cmu_arctic_aew_a0002", after="reply_end", delay=FOLLOW_UP_S + 1.5),  # too late
    ])  # fmt: skip
    wakes = of(result, "wake")
    assert [w["reason"] for w in wakes] == ["wake_word"]
    assert wakes[0]["audio_ms"] > 4000  # not on the speech before it
    finals = [f for f in of(result, "final") if f["text"].strip()]
    assert len(finals) == 2  # the request and the follow-up; nothing before or after
    request = finals[0]["text"].lower()
    assert "what time" in request and "jarvis" not in request
    replies = of(result, "reply_start")
    assert [r["text"] for r in replies] == [f["text"] for f in finals]
    assert [e["reason"] for e in of(result, "idle")] == ["start", "quiet"]
    assert of(result, "idle")[-1]["audio_ms"] < result.turns[-1].start_sample / 16  # type: ignore[operator]


def test_barge_in_over_a_reply_needs_no_wake_word(
    engines: Engines, same_breath: np.ndarray
) -> None:
    result = converse(engines, [
        ScriptTurn(same_breath, "wake", at_s=0.5),
        corpus("cmu_arctic_aew_a0003", after="reply_start", delay=1.0),
    ])  # fmt: skip
    assert len(of(result, "wake")) == 1
    (interrupted,) = of(result, "interrupted")
    assert interrupted["played_ms"] > 0
    assert len(of(result, "reply_start")) == 2  # the barge-in's words are answered


def test_a_missing_or_bad_model_is_one_clear_error_at_start(tmp_path: Any) -> None:
    with pytest.raises(ModelNotFoundError, match=r"wake word model.*not found"):
        load_settings(env={"VOICE_WAKE_WAKE_WORD": str(tmp_path / "mine.tflite")})
    (tmp_path / "mine.json").write_text(
        '{"wake_word": "Hey Mine", "model": "mine.tflite",'
        ' "micro": {"probability_cutoff": 0.9, "sliding_window_size": 5}}'
    )
    (tmp_path / "mine.tflite").write_bytes(b"\0" * 64)
    with pytest.raises(ConfigError, match="not a TensorFlow Lite model"):
        load_settings(env={"VOICE_WAKE_WAKE_WORD": str(tmp_path / "mine.json")})
    (tmp_path / "mine.tflite").write_bytes(b"\x1c\0\0\0TFL3" + b"\7" * 200)  # a broken body
    with pytest.raises(ConfigError, match="could not be read as a TensorFlow Lite model"):
        load_settings(env={"VOICE_WAKE_WAKE_WORD": str(tmp_path / "mine.json")})
    with pytest.raises(ConfigError, match="neither a built-in model nor a file"):
        load_settings(env={"VOICE_WAKE_WAKE_WORD": "hey_siri"})
