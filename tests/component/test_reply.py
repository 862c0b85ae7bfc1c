"""The mouth end to end: the bundled LLM streams into sentence chunks spoken by Piper."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from voice.audio import read_wav
from voice.reply.pipeline import ReplyDone, SpokenAudio, TextDelta, speak_reply
from voice.speak.tts import PiperTts, TtsConfig
from voice.think.backend import LlmConfig, Message
from voice.think.llama import LlamaBackend

QUESTION = [
    Message("system", "You are a helpful assistant. Answer in three sentences."),
    Message("user", "Tell me about the moon."),
]


@pytest.fixture(scope="module")
def parts() -> tuple[LlamaBackend, PiperTts]:
    return LlamaBackend(LlmConfig(temperature=0.0, max_reply_tokens=80)), PiperTts(TtsConfig())


def test_text_streams_and_audio_starts_before_the_reply_is_done(parts) -> None:  # type: ignore[no-untyped-def]
    llm, tts = parts
    items = list(speak_reply(llm, tts, QUESTION))
    done = items[-1]
    assert isinstance(done, ReplyDone) and not done.cancelled
    deltas = [i.text for i in items if isinstance(i, TextDelta)]
    audio = [i for i in items if isinstance(i, SpokenAudio)]
    assert "".join(deltas) == done.text
    assert audio, "the reply was spoken"
    assert [a.index for a in audio] == sorted(a.index for a in audio)  # in order
    t = done.timings
    assert t.first_token_s is not None and t.first_audio_s is not None and t.done_s is not None
    assert t.first_token_s < t.first_audio_s < t.done_s


def test_cancel_stops_text_and_audio(parts) -> None:  # type: ignore[no-untyped-def]
    llm, tts = parts
    cancel = threading.Event()
    items = []
    for item in speak_reply(llm, tts, QUESTION, cancel):
        items.append(item)
        if isinstance(item, SpokenAudio):
            cancel.set()
    assert isinstance(items[-1], ReplyDone) and items[-1].cancelled
    after = items[items.index(next(i for i in items if isinstance(i, SpokenAudio))) + 1 : -1]
    assert after == []  # nothing produced after the cancel reached the caller
    full = list(speak_reply(llm, tts, QUESTION))
    assert len(items[-1].text) < len(full[-1].text)  # type: ignore[union-attr]


def test_voice_chat_speaks_each_turn_to_a_wav(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "voice.cli", "chat", "--out-dir", str(tmp_path)],
        input="Hello, who are you?\nWhat is the weather like on Mars?\n",
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("first token") == 2 and "first audio" in result.stdout
    for name in ("turn_001.wav", "turn_002.wav"):
        audio = read_wav(tmp_path / name)
        assert len(audio) > 16000 * 0.5
