"""``voice bench shapes``: what a bigger language model costs here, without its weights.

No bigger GGUF can be fetched on this machine, but the cost of a token depends on a
model's shape and quantization, not on what its weights say. So this writes GGUFs with
random weights in the real shapes (the ``gguf`` package: f16, then quantized by
llama.cpp as the catalogue's files are), with the bundled SmolLM2's tokenizer (padded
with never-produced tokens to Qwen2.5's 151,936 for the Qwen shapes: the output layer's
size is the vocabulary's). Their text is noise, a run of random words (so that
sentence chunking cuts it as it cuts a reply); every token costs what the real model's
does. Measured on ``conversation.lane_threads`` (2: a conversation's LLM gets
the lane's threads for decoding and pre-fill), one shape at a time:

* ``prefill_tok_s``: the system prompt and a user turn, cold (no KV reused);
* ``first_token_ms``: a user turn after the system prompt's KV (what a turn costs
  here: the session keeps the system prompt's KV), up to the first sampled token;
* ``decode_tok_s``: 48 tokens, one at a time (end-of-text never chosen).
"""

from __future__ import annotations

import ctypes
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from voice.config import Settings
from voice.models import models_cache_dir, resolve_llm_model


@dataclass(frozen=True)
class Shape:
    arch: str  # llama (SmolLM2) or qwen2
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    quant: str  # as the catalogue's file: q4_k_m or q8_0


# From each model's config.json (hidden_size, num_hidden_layers, num_attention_heads,
# num_key_value_heads, intermediate_size, vocab_size); all tie their embeddings.
SHAPES = {
    "smollm2-135m": Shape("llama", 576, 30, 9, 3, 1536, 49152, "q8_0"),
    "smollm2-360m": Shape("llama", 960, 32, 15, 5, 2560, 49152, "q8_0"),
    "smollm2-1.7b": Shape("llama", 2048, 24, 32, 32, 8192, 49152, "q4_k_m"),
    "qwen2.5-0.5b": Shape("qwen2", 896, 24, 14, 2, 4864, 151936, "q4_k_m"),
    "qwen2.5-1.5b": Shape("qwen2", 1536, 28, 12, 2, 8960, 151936, "q4_k_m"),
}
_FTYPES = {"q4_k_m": 15, "q8_0": 7}  # llama.cpp's LLAMA_FTYPE_MOSTLY_*
# A whole lower-case word after a space, in the byte-level vocabulary ("Ġ" is the space).
_WORD = re.compile("\u0120[a-z]{2,9}")


def _tokenizer() -> dict[str, Any]:
    import gguf

    reader = gguf.GGUFReader(str(resolve_llm_model("default")))

    def field(name: str) -> Any:
        return reader.fields[name].contents()

    return {
        "tokens": list(field("tokenizer.ggml.tokens")),
        "types": list(field("tokenizer.ggml.token_type")),
        "merges": list(field("tokenizer.ggml.merges")),
        "template": field("tokenizer.chat_template"),
    }


def write_synthetic(name: str, shape: Shape | None = None) -> Path:
    """The quantized synthetic GGUF of shape ``name`` (one of :data:`SHAPES`, or any
    ``shape`` given), written once into the cache, then reused."""
    import gguf

    shape = shape or SHAPES[name]
    out = models_cache_dir() / f"synthetic-{name}-words.{shape.quant}.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    f16 = out.with_suffix(f".{os.getpid()}.f16.tmp")  # two runs at once never share it
    tok = _tokenizer()
    tokens, types = tok["tokens"], tok["types"]
    pad = shape.vocab - len(tokens)
    tokens += [f"Ġsynthetic{i}" for i in range(pad)]  # normal tokens no merge produces
    types += [1] * pad
    writer = gguf.GGUFWriter(str(f16), shape.arch)
    a = shape.arch
    writer.add_name(f"synthetic {name}")
    writer.add_context_length(4096)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.hidden // shape.heads)
    writer.add_rope_freq_base(1e6 if a == "qwen2" else 1e5)
    writer.add_layer_norm_rms_eps(1e-6 if a == "qwen2" else 1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(tok["merges"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(tok["template"])
    # Random values drawn once and reused at random offsets: the cost of a token does
    # not depend on the weights being independent.
    rng = np.random.default_rng(53)
    pool = (rng.standard_normal(1 << 24, dtype=np.float32) * 0.02).astype(np.float16)

    def weights(*dims: int) -> np.ndarray:
        size = int(np.prod(dims))
        start = int(rng.integers(0, pool.size))
        return np.resize(np.roll(pool, -start), size).reshape(dims)

    ones = np.ones
    kv = shape.kv_heads * (shape.hidden // shape.heads)
    # The embeddings are also the output layer (tied): rows of word tokens drawn larger
    # make the noise a run of words, which the sentence chunker cuts as it cuts a real
    # reply (its first chunk after three or four words). Rows of every other token
    # (pieces of words, symbols, the end of text, the padding) drawn small are never
    # sampled; uniformly random rows chose them, and a first chunk of word pieces took
    # up to 30 tokens to reach a place to cut. A token costs the same either way.
    scale = np.array([8.0 if _WORD.fullmatch(t) else 0.25 for t in tokens], np.float16)
    embeddings = weights(shape.vocab, shape.hidden) * scale[:, None]
    writer.add_tensor("token_embd.weight", embeddings)
    writer.add_tensor("output_norm.weight", ones(shape.hidden, np.float32))
    for i in range(shape.layers):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", ones(shape.hidden, np.float32))
        writer.add_tensor(f"{b}.attn_q.weight", weights(shape.hidden, shape.hidden))
        writer.add_tensor(f"{b}.attn_k.weight", weights(kv, shape.hidden))
        writer.add_tensor(f"{b}.attn_v.weight", weights(kv, shape.hidden))
        writer.add_tensor(f"{b}.attn_output.weight", weights(shape.hidden, shape.hidden))
        if a == "qwen2":
            writer.add_tensor(f"{b}.attn_q.bias", np.zeros(shape.hidden, np.float32))
            writer.add_tensor(f"{b}.attn_k.bias", np.zeros(kv, np.float32))
            writer.add_tensor(f"{b}.attn_v.bias", np.zeros(kv, np.float32))
        writer.add_tensor(f"{b}.ffn_norm.weight", ones(shape.hidden, np.float32))
        writer.add_tensor(f"{b}.ffn_gate.weight", weights(shape.ffn, shape.hidden))
        writer.add_tensor(f"{b}.ffn_up.weight", weights(shape.ffn, shape.hidden))
        writer.add_tensor(f"{b}.ffn_down.weight", weights(shape.hidden, shape.ffn))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    try:
        _quantize(f16, out, shape.quant)
    finally:
        f16.unlink(missing_ok=True)
    return out


def _quantize(source: Path, out: Path, quant: str) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = _FTYPES[quant]
    params.nthread = 2
    params.allow_requantize = True
    partial = out.with_suffix(f".{os.getpid()}.partial")
    try:
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if status != 0:
            raise OSError(f"llama_model_quantize returned {status}")
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)


def requantized(source: Path, quant: str) -> Path:
    """``source`` converted to ``quant`` once (what llm.convert_to did to every GGUF
    before K-quants were exempted), cached beside it."""
    out = source.with_name(f"{source.stem}.as-{quant}.gguf")
    if not out.is_file():
        _quantize(source, out, quant)
    return out


SYSTEM = (
    "You are a helpful voice assistant. Your replies are spoken aloud: plain words, no "
    "lists, markdown or emoji. Answer in one or two short sentences."
)
USER = "What should I cook for dinner tonight if I have rice, eggs and some spinach?"


def measure(path: Path, threads: int, decode_tokens: int = 48) -> dict[str, Any]:
    from llama_cpp import Llama

    from voice.llamacpp import avoid_amx

    avoid_amx()  # as the backend does: llama.cpp's AMX kernels crash on this machine
    llm = Llama(
        model_path=str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
        verbose=False,
    )  # fmt: skip
    system = llm.tokenize(
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n".encode(), add_bos=False, special=True
    )
    user = llm.tokenize(
        f"<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n".encode(),
        add_bos=False,
        special=True,
    )
    eos = llm.token_eos()
    llm.eval(system + user)  # warm the weights into memory
    llm.reset()  # type: ignore[no-untyped-call]
    started = time.perf_counter()
    llm.eval(system + user)
    prefill_s = time.perf_counter() - started
    llm.reset()  # type: ignore[no-untyped-call]
    llm.eval(system)  # the session keeps this KV between turns
    started = time.perf_counter()
    llm.eval(user)
    logits = np.asarray(llm.scores[llm.n_tokens - 1])
    logits[eos] = -np.inf
    token = int(np.argmax(logits))
    first_token_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(decode_tokens):
        llm.eval([token])
        logits = np.asarray(llm.scores[llm.n_tokens - 1])
        logits[eos] = -np.inf
        token = int(np.argmax(logits))
    decode_s = time.perf_counter() - started
    size_mb = path.stat().st_size / 1e6
    llm.close()
    return {
        "file_mb": round(size_mb),
        "prompt_tokens": len(system) + len(user),
        "turn_tokens": len(user),
        "prefill_tok_s": round((len(system) + len(user)) / prefill_s, 1),
        "first_token_ms": round(first_token_s * 1000),
        "decode_tok_s": round(decode_tokens / decode_s, 1),
    }


def bench_shapes(settings: Settings, names: list[str] | None = None) -> dict[str, Any]:
    """Measure each shape; "bundled" is the real SmolLM2-135M as the backend loads it
    (its Q8_0 conversion), to check that a synthetic 135M costs what the real one does;
    "NAME@q8_0" is shape NAME converted to Q8_0 as llm.convert_to did before K-quants
    were exempted (the measurement that exempted them)."""
    from voice.think.requantize import converted_model

    threads = settings.conversation.lane_threads  # what a conversation's LLM runs on
    rows: dict[str, Any] = {}
    for name in names or ["bundled", *SHAPES]:
        if name == "bundled":
            real = converted_model(resolve_llm_model("default"), "q8_0")
            rows[name] = {"quant": "q8_0", **measure(real, threads)}
            continue
        shape_name, _, convert = name.partition("@")  # "smollm2-1.7b@q8_0": as converted
        path = write_synthetic(shape_name)
        if convert:  # converted as llm.convert_to would (K-quants are now exempt)
            path = requantized(path, convert)
        quant = convert or SHAPES[shape_name].quant
        rows[name] = {"quant": quant, **measure(path, threads)}
    return {"threads": threads, "shapes": rows}
