"""The sentence encoder on llama.cpp: the same BERT, its weights in Q8_0.

Why: a knowledge lookup is one question through the encoder on the session's
thread, and the target is 10 ms at p95 on 2 shared cores. The NumPy forward pass
(:mod:`voice.embed.minilm`) does float32 products through BLAS; llama.cpp runs
the same six layers with 8-bit weights, a question about a third quicker on one
thread (8.4 against 12.2 ms at the median on 2 AVX2 cores; docs/knowledge.md, "The
embedding engine"), in an engine the project already ships. Its vectors are within
a cosine of 0.999 of the float32 ones.

The GGUF is written once from the safetensors (the `gguf` package, which also
quantizes) into the models cache, keyed by the weights file, and reused; the
tokenizer goes in as llama.cpp's WordPiece spelling of the same vocabulary
(continuations lose their ``##``, word starts gain U+2581), so both engines cut
a text into the same pieces.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.cpus import thread_budget
from voice.llamacpp import avoid_amx
from voice.models import derived_model_path

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]


def _spelled(token: str) -> str:
    """llama.cpp's WordPiece spelling of a BERT vocabulary entry."""
    if token.startswith("[") and token.endswith("]"):
        return token  # [CLS], [SEP], [PAD], [UNK], [MASK], [unused12]
    return token[2:] if token.startswith("##") else "\u2581" + token


def gguf_of(folder: Path, weights: dict[str, npt.NDArray[Any]]) -> Path:
    """The Q8_0 GGUF of the BERT in ``folder`` (its ``weights`` read from
    model.safetensors), written once into the models cache; raises OSError (or
    ImportError without the `gguf` package) when it cannot be made."""
    stem = f"{folder.parent.name}-{folder.name}"
    out = derived_model_path(folder / "model.safetensors", stem, "q8_0.gguf")
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(f".{os.getpid()}.partial")
    try:
        _write_gguf(folder, weights, partial)
        os.replace(partial, out)  # atomic: a crash never leaves half a model in place
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    log.info("wrote the sentence encoder as %s", out)
    return out


def _write_gguf(folder: Path, weights: dict[str, npt.NDArray[Any]], out: Path) -> None:
    import gguf

    spec = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    vocab = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    layers = int(spec["num_hidden_layers"])
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_context_length(int(spec["max_position_embeddings"]))
    writer.add_embedding_length(int(spec["hidden_size"]))
    writer.add_feed_forward_length(int(spec["intermediate_size"]))
    writer.add_block_count(layers)
    writer.add_head_count(int(spec["num_attention_heads"]))
    writer.add_layer_norm_eps(float(spec.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)  # as sentence-transformers pools it
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda item: int(item[1]))]
    control = [t.startswith("[") and t.endswith("]") for t in tokens]
    writer.add_tokenizer_model("bert")
    writer.add_token_list([_spelled(t) for t in tokens])
    writer.add_token_types(
        [gguf.TokenType.CONTROL if c else gguf.TokenType.NORMAL for c in control]
    )
    writer.add_token_type_count(int(spec.get("type_vocab_size", 2)))
    vocab_log = logging.getLogger("gguf.vocab")  # it warns of [CLS], which llama.cpp knows
    level = vocab_log.level
    vocab_log.setLevel(logging.ERROR)
    try:
        gguf.SpecialVocab(folder, n_vocab=len(tokens)).add_to_gguf(writer, quiet=True)
    finally:
        vocab_log.setLevel(level)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, layers)
    for name, tensor in weights.items():
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue  # the pooler is not used for sentence embeddings
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise OSError(f"{name} in {folder} is not a BERT tensor llama.cpp knows")
        data = np.asarray(tensor, dtype=np.float32)
        if data.ndim == 2 and data.shape[1] % 32 == 0 and not new.startswith("token_types"):
            q8 = gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(new, gguf.quants.quantize(data, q8), raw_dtype=q8)
        else:  # norms, biases and the two-row token types stay float32
            writer.add_tensor(new, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


class LlamaBert:
    """Token-cut texts in, mean-pooled unit vectors out, on llama.cpp (one context,
    ``threads`` threads, one call at a time)."""

    def __init__(self, path: Path, threads: int, max_tokens: int) -> None:
        from llama_cpp import Llama

        avoid_amx()  # llama.cpp's AMX kernels crash on batches of tokens (voice.llamacpp)
        batch = max_tokens + 2  # the longest text a caller passes, with [CLS] and [SEP]
        threads = thread_budget(threads)
        self._llm = Llama(
            model_path=str(path),
            embedding=True,
            n_ctx=batch,
            n_batch=batch,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> FloatArray:
        with self._lock:
            rows = self._llm.embed(list(texts), truncate=False)
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit: FloatArray = vectors / np.maximum(norms, 1e-12)
        return unit
