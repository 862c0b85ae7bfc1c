"""A synthetic-shape GGUF (random weights, the bundled tokenizer; voice bench shapes)
loads in the embedded backend and speaks its noise, a run of words, through the real
reply pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("gguf")

pytestmark = pytest.mark.slow


def test_a_synthetic_model_speaks_noise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from voice.bench.shapes import Shape, write_synthetic
    from voice.reply.pipeline import ReplyDone, SpokenAudio, speak_reply
    from voice.speak.tts import PiperTts, TtsConfig
    from voice.think.backend import LlmConfig, Message
    from voice.think.llama import LlamaBackend

    monkeypatch.setenv("VOICE_CACHE_DIR", str(tmp_path))
    tiny = Shape("llama", 256, 2, 2, 1, 256, 49152, "q8_0")  # SmolLM2's tokenizer
    path = write_synthetic("test-tiny", tiny)
    assert path.stat().st_size > 49152 * 256  # the embeddings at least
    llm = LlamaBackend(LlmConfig(model=str(path), convert_to="", max_reply_tokens=24))
    messages = [Message("system", "You are noise."), Message("user", "Say something.")]
    items = list(speak_reply(llm, PiperTts(TtsConfig()), messages))
    done = items[-1]
    assert isinstance(done, ReplyDone) and not done.cancelled
    # Noise made of words, which the chunker cuts as it cuts a reply (pieces of words
    # and symbols, sampled as often as words, took up to 30 tokens to a first chunk).
    words = done.generated.split()
    assert len(words) >= 5 and sum(w.isalpha() and w.islower() for w in words) >= 0.8 * len(words)
    assert any(isinstance(i, SpokenAudio) for i in items)
