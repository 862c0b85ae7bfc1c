"""`voice chat` and the streamed reply when an engine fails (fake engines: the failure
paths are pure logic; the real models are in tests/component/test_reply.py)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from test_conversation_core import FakeLlm

import voice.reply.chat as chat
from voice.config import Settings
from voice.errors import VoiceError
from voice.reply.pipeline import speak_reply
from voice.think.http import LlmUnavailableError


class FlakyLlm(FakeLlm):
    """The server is down for the first reply, back for the next; counts the tokens it
    was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.tokens = 0

    def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == 1:
            raise LlmUnavailableError("the LLM server at 127.0.0.1:8080 is not answering.")
        for word in ["Fine,", "thank", "you.", "And", "you?"]:
            if cancel is not None and cancel.is_set():
                return
            self.tokens += 1
            yield word + " "


class Voice:
    output_rate = 16000

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def warm_up(self) -> None:
        pass

    def synthesize(self, text: str, cancel: threading.Event | None = None) -> Iterator[np.ndarray]:
        if self.fail:
            raise VoiceError("the voice model failed.")
        yield np.full(1600, 0.1, np.float32)


def test_one_failed_reply_does_not_end_the_chat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = FlakyLlm()
    monkeypatch.setattr(chat, "make_backend", lambda config: llm)
    monkeypatch.setattr(chat, "PiperTts", lambda config: Voice())
    out = io.StringIO()
    settings = Settings()
    assert chat.run_chat(settings.llm, settings.tts, ["Hello?", "How are you?"], tmp_path, out) == 0
    text = out.getvalue()
    assert "not answering" in text and "type it again" in text
    assert "Fine, thank you." in text  # the second line was answered
    assert (tmp_path / "turn_002.wav").is_file()


class SlowLlm(FakeLlm):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = 0

    def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
        for _ in range(400):
            if cancel is not None and cancel.is_set():
                return
            self.tokens += 1
            threading.Event().wait(0.005)
            yield "Word. " if self.tokens % 5 == 0 else "word "


def test_a_voice_that_fails_stops_the_llm_too() -> None:
    llm = SlowLlm()
    with pytest.raises(VoiceError, match="voice model failed"):
        list(speak_reply(llm, Voice(fail=True), [], first_chunk_max_chars=0))
    assert llm.tokens < 100  # not the whole reply, generated for nobody
