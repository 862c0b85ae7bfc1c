"""The wake gate on scripted timelines with fake engines (pure logic; the real detector
and models are in tests/component/test_wake.py).

Loud frames are speech. The "wake phrase" is audio at 0.35: the fake detector fires on
the first frame after 400 ms of it, as a real one fires just after the phrase ends.
The fake recogniser says "Jarvis," for the phrase's audio it is given and one word per
200 ms of other speech at 0.3 ("stop" for speech at 0.25).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import LoudIsSpeech

from voice.conversation.session import ConversationConfig, Session
from voice.conversation.wake import WakeConfig, WakeGate, earcon_tone, strip_phrase
from voice.errors import ConfigError, ModelNotFoundError
from voice.listen.endpoint import EndpointConfig
from voice.listen.listener import ListenConfig, Listener
from voice.listen.wake import resolve_wake_model
from voice.listen.whisper import Transcription
from voice.reply.history import History
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate

PHRASE, TALK, STOP = 0.35, 0.3, 0.25
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
REPLY = "It is a fine day for that, I think. Yes indeed."


class PhraseDetector:
    """Fires on the first frame after 400 ms of the phrase's level."""

    phrase = "Hey Jarvis"

    def __init__(self) -> None:
        self.run = 0
        self.frames = 0

    def process(self, frame: np.ndarray) -> bool:
        self.frames += 1
        peak = np.abs(frame.astype(np.float32) / 32768).max()
        if abs(peak - PHRASE) < 0.01:
            self.run += 1
            return False
        fired, self.run = self.run >= 20, 0
        return fired

    def reset(self) -> None:
        self.run = 0

    def close(self) -> None:
        pass


class Asr:
    def __init__(self) -> None:
        self.passes = 0

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.passes += 1
        level = np.abs(audio)
        if np.sum(np.abs(level - STOP) < 0.01) > 1600:
            return Transcription(words=["Stop."])
        phrase_ms = int(np.sum(np.abs(level - PHRASE) < 0.01) / 16)
        talk_ms = int(np.sum(np.abs(level - TALK) < 0.01) / 16)
        words = (["Jarvis,"] if phrase_ms >= 100 else []) + WORDS[: talk_ms // 200]
        if len(words) > 1:
            words[-1] += "."
        return Transcription(words=words)


class Llm:
    context_tokens = 2048

    def count_tokens(self, messages) -> int:  # type: ignore[no-untyped-def]
        return sum(len(m.content.split()) + 4 for m in messages)

    def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
        yield from (w + " " for w in REPLY.split(" "))


class Tts:
    def synthesize(self, text, cancel=None) -> Iterator[np.ndarray]:  # type: ignore[no-untyped-def]
        yield np.full(len(text) * 1600, 0.01, np.float32)


def tone(seconds: float, level: float) -> np.ndarray:
    return np.full(int(seconds * 16000), level, np.float32)


def said(*parts: tuple[float, float]) -> np.ndarray:
    return np.concatenate([tone(s, level) for s, level in parts])


def run(
    turns: list[ScriptTurn], follow_up_s: float = 3.0, earcon: bool = True
) -> tuple[SimulationResult, Session, Asr]:
    asr = Asr()
    engines = Engines(asr=asr, llm=Llm(), tts=Tts())
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    gate = WakeGate(
        PhraseDetector(),
        WakeConfig(wake_word="hey_jarvis", follow_up_s=follow_up_s),
        earcon_tone() if earcon else None,
    )
    history = History("Be brief.", 2048, 100, Llm().count_tokens)
    session = Session(listener, history, ConversationConfig(speculate=False), wake=gate)
    return simulate(Script(turns), session, engines), session, asr


def kinds(result: SimulationResult, *types: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] in types]


WAKE_AND_ASK = said((0.6, PHRASE), (1.2, TALK))  # "Hey Jarvis, one two three four five six."


def test_speech_without_the_wake_word_is_not_recognised_or_answered() -> None:
    result, session, asr = run([ScriptTurn(said((1.5, TALK)), "talk", at_s=0.5)])
    assert asr.passes == 0  # idle: no recognition at all
    assert not kinds(result, "speech_start", "final", "reply_start", "wake")
    assert [e["reason"] for e in kinds(result, "idle")] == ["start"]
    assert session.state == "idle"


def test_a_request_in_the_same_breath_is_answered_without_the_phrase() -> None:
    result, session, _ = run([ScriptTurn(WAKE_AND_ASK, "wake", at_s=0.5)])
    wake = kinds(result, "wake")
    assert [w["reason"] for w in wake] == ["wake_word"]
    finals = kinds(result, "final")
    assert [f["text"] for f in finals] == ["One two three four five six."]
    assert kinds(result, "reply_start")[0]["text"] == "One two three four five six."
    assert "jarvis" not in " ".join(m.content.lower() for m in session.history.so_far())
    assert float(np.abs(result.played).max()) > 0.2  # the earcon (replies are at 0.01)
    assert kinds(result, "reply_end")[0]["interrupted"] is False


def test_the_phrase_alone_then_a_request_after_a_pause() -> None:
    turns = [
        ScriptTurn(said((0.6, PHRASE)), "wake", at_s=0.5),
        ScriptTurn(said((1.0, TALK)), "ask", at_s=2.5),
    ]
    result, _, _ = run(turns, earcon=False)
    assert [f["text"] for f in kinds(result, "final") if f["text"]] == ["One two three four five."]
    assert len(kinds(result, "reply_start")) == 1
    assert float(np.abs(result.played).max()) < 0.2  # earcon "none": nothing but the reply


def test_a_follow_up_inside_the_window_is_answered_and_one_after_it_is_not() -> None:
    turns = [
        ScriptTurn(WAKE_AND_ASK, "wake", at_s=0.5),
        ScriptTurn(said((0.8, TALK)), "follow-up", after="reply_end", delay_s=1.0),
        ScriptTurn(said((0.8, TALK)), "too late", after="reply_end", delay_s=4.0),
    ]
    result, session, _ = run(turns, follow_up_s=3.0)
    assert [r["text"] for r in kinds(result, "reply_start")] == [
        "One two three four five six.",
        "one two three four.",  # no phrase to take off: as heard
    ]
    idles = kinds(result, "idle")
    assert [e["reason"] for e in idles] == ["start", "quiet"]
    last_reply_end = kinds(result, "reply_end")[-1]["audio_ms"]
    assert idles[-1]["audio_ms"] == pytest.approx(last_reply_end + 3000, abs=100)
    assert session.state == "idle"


def test_speech_over_a_reply_barges_in_without_the_wake_word() -> None:
    turns = [
        ScriptTurn(WAKE_AND_ASK, "wake", at_s=0.5),
        ScriptTurn(said((1.0, TALK)), "barge", after="reply_start", delay_s=1.5),
    ]
    result, _, _ = run(turns)
    assert kinds(result, "interrupted")
    assert len(kinds(result, "reply_start")) == 2  # and the barge-in is answered
    assert len(kinds(result, "wake")) == 1


def test_a_stop_phrase_sends_it_back_to_idle_at_once() -> None:
    turns = [
        ScriptTurn(WAKE_AND_ASK, "wake", at_s=0.5),
        ScriptTurn(said((0.5, STOP)), "stop", after="reply_start", delay_s=1.5),
    ]
    result, session, _ = run(turns, follow_up_s=30.0)
    assert kinds(result, "interrupted")
    idles = kinds(result, "idle")
    assert [e["reason"] for e in idles] == ["start", "stop"]
    assert session.state == "idle"


def test_a_typed_turn_wakes_it() -> None:
    asr = Asr()
    engines = Engines(asr=asr, llm=Llm(), tts=Tts())
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    gate = WakeGate(PhraseDetector(), WakeConfig(wake_word="x"))
    history = History("Be brief.", 2048, 100, Llm().count_tokens)
    session = Session(listener, history, wake=gate)
    assert session.take()[0].type == "idle"
    session.submit_text("What time is it?")
    assert gate.awake and not listener.dormant
    assert [e.type for e in session.take() if e.type == "wake"] == ["wake"]
    del engines


@pytest.mark.parametrize(
    ("heard", "left"),
    [
        ("Jarvis, what time is it?", "What time is it?"),
        ("Hey Jarvis. What time is it?", "What time is it?"),
        ("Travis what time is it?", "What time is it?"),
        ("vis, what's the weather?", "What's the weather?"),
        ("Jarvis.", ""),
        ("What time is it?", "What time is it?"),
        ("Hey, what time is it?", "What time is it?"),
    ],
)
def test_the_phrase_is_taken_off_the_words(heard: str, left: str) -> None:
    assert strip_phrase(heard, "Hey Jarvis") == left


def test_a_missing_or_bad_model_is_one_clear_error(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="neither a built-in model nor a file"):
        resolve_wake_model("hey_jarvisss")
    with pytest.raises(ModelNotFoundError, match="not found"):
        resolve_wake_model(str(tmp_path / "mine.tflite"))
    bad = tmp_path / "mine.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not a microWakeWord model description"):
        resolve_wake_model(str(bad))
    bad.write_text('{"wake_word": "Hey Mine", "model": "mine.tflite", "micro": {}}')
    with pytest.raises(ConfigError, match="probability_cutoff"):
        resolve_wake_model(str(bad))
    bad.write_text(
        '{"wake_word": "Hey Mine", "model": "mine.tflite",'
        ' "micro": {"probability_cutoff": 0.9, "sliding_window_size": 5}}'
    )
    (tmp_path / "mine.tflite").write_bytes(b"definitely not a model")
    with pytest.raises(ConfigError, match="not a TensorFlow Lite model"):
        resolve_wake_model(str(bad))
    model = resolve_wake_model("hey_jarvis", threshold=0.9)
    assert model.phrase == "Hey Jarvis" and model.cutoff == 0.9
    assert resolve_wake_model("hey_jarvis").cutoff == 0.7  # measured here (docs/wake.md)
    assert resolve_wake_model("okay_nabu").cutoff == 0.85  # its own: not measured


def test_a_cutoff_wakes_once_per_deaf_second_on_a_probability_trace() -> None:
    """voice bench wake --modes negatives scores each stream once and counts the wakes
    of every cutoff from its probability trace, deaf a second after each as live."""
    from voice.bench.wake_negatives import wakes

    trace = np.zeros(200, np.float32)
    trace[10:14] = 0.95  # one phrase-like bump: one wake
    trace[30] = 0.99  # within the deaf second (50 frames) of it: none
    trace[120:122] = 0.85  # later: a wake at 0.8 but not at 0.9
    assert wakes(trace, 0.9, 50) == [10]
    assert wakes(trace, 0.8, 50) == [10, 120]
    assert wakes(trace, 0.999, 50) == []
