"""The sentence encoder's two engines on the bundled all-MiniLM-L6-v2: llama.cpp with
Q8_0 weights (a lookup's few texts) and the float32 NumPy pass (many texts)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

import voice.embed.minilm as minilm
from voice.embed import Embedder, EmbedderConfig

TEXTS = [
    "Where is the cafe?",
    "Is there a coffee shop in the building?",
    "When does the museum close on Sundays?",
    "hello",
    "Où est le café ? Wie spät ist es?",  # accents: both engines strip them the same way
    "The long hall. " * 80,  # past the 128-piece cut: both engines cut at the same piece
]


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> tuple[Embedder, Embedder]:
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VOICE_CACHE_DIR", str(cache))
        q8 = Embedder(EmbedderConfig(engine="llama"))
    return q8, Embedder(EmbedderConfig(engine="numpy"))


def test_the_llama_engine_gives_the_float32_vectors_within_rounding(
    engines: tuple[Embedder, Embedder],
) -> None:
    q8, f32 = engines
    assert q8._llama is not None, "llama.cpp did not load the converted encoder"
    fast, exact = q8.embed(TEXTS), f32.embed(TEXTS)
    assert fast.shape == exact.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-4)
    assert (fast * exact).sum(1).min() > 0.998  # Q8_0 weights: the same vectors, rounded
    # What retrieval relies on: a paraphrase is nearer than another question.
    cafe, coffee, closing = fast[:3]
    assert cafe @ coffee > cafe @ closing + 0.1


def test_many_texts_go_through_the_float32_pass(engines: tuple[Embedder, Embedder]) -> None:
    q8, f32 = engines
    many = [f"Where is room {i}?" for i in range(minilm.QUERY_TEXTS + 1)]
    np.testing.assert_array_equal(q8.embed(many), f32.embed(many))  # bit for bit
    assert q8.name == f32.name  # stored vectors are the float32 pass's, whichever engine


def test_the_converted_model_is_written_once_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICE_CACHE_DIR", str(tmp_path))
    Embedder(EmbedderConfig(engine="llama"))
    (model,) = (tmp_path / "models").iterdir()  # one file, no partial left beside it
    assert model.name.endswith(".q8_0.gguf")
    written = model.stat().st_mtime_ns
    Embedder(EmbedderConfig(engine="llama"))
    assert model.stat().st_mtime_ns == written


def test_without_llama_cpp_the_float32_pass_answers_and_says_so(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unavailable(*_: object) -> Path:
        raise ImportError("No module named 'gguf'")

    monkeypatch.setattr(minilm, "gguf_of", unavailable)
    with caplog.at_level(logging.WARNING, logger="voice.embed.minilm"):
        embedder = Embedder(EmbedderConfig(engine="llama"))
    assert embedder._llama is None
    assert "runs on NumPy" in caplog.text and "gguf" in caplog.text
    assert embedder.embed(["hello"]).shape == (1, 384)


def test_an_unknown_engine_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="'llama' or 'numpy'"):
        Embedder(EmbedderConfig(engine="onnx"))
