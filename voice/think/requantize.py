"""Load-time conversion of a GGUF to Q8_0, cached on disk: faster pre-fill, same model.

On these CPUs llama.cpp pre-fills Q4_1 weights (the bundled SmolLM2) at ~8 ms a
token even in batches; Q8_0 takes ~5 ms (18 tokens: 162 -> 93 ms), which is
most of the time to first token of a warm turn. Converting Q4_1 to Q8_0 only
re-encodes 4-bit values in 8 bits: perplexity on our corpus text was 47.49 vs
47.43. Decoding is ~15% slower, still ~10x faster than speech. The converted
file is written once (about a second) into the cache folder and reused.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from voice.models import derived_model_path

log = logging.getLogger(__name__)

_HIGH_PRECISION = ("q8_0", "f16", "f32", "bf16")
# K-quants (the catalogue's Q4_K_M files) stay as they are: converted to Q8_0 they
# decoded 10-31% slower and answered a turn 0-85% later on 2 cores (voice bench shapes:
# Qwen2.5 0.5B / 1.5B and SmolLM2 1.7B shapes, docs/performance.md).
_K_QUANTS = ("q2_k", "q3_k", "q4_k", "q5_k", "q6_k")


def converted_model(source: Path, target: str = "q8_0") -> Path:
    """The Q8_0 copy of ``source`` (made once), or ``source`` itself if not worth it or failed."""
    if not target or any(tag in source.name.lower() for tag in _HIGH_PRECISION + _K_QUANTS):
        return source
    try:
        import llama_cpp
    except ImportError:
        return source
    out = derived_model_path(source, source.stem, f"{target}.gguf")
    if out.is_file():
        return out
    ftype = {"q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0}.get(target)
    if ftype is None:
        log.warning("llm.convert_to=%r is not supported (use 'q8_0' or ''); not converting", target)
        return source
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(f".{os.getpid()}.partial")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = ftype
        params.allow_requantize = True
        params.nthread = 2
        log.info("converting %s to %s once, into %s", source.name, target, out.parent)
        with _quiet_stderr():  # llama.cpp prints a line per tensor
            status = llama_cpp.llama_model_quantize(
                str(source).encode(), str(partial).encode(), ctypes.byref(params)
            )
        if status != 0:
            raise OSError(f"llama_model_quantize returned {status}")
        os.replace(partial, out)  # atomic: a crash never leaves a half-written model
    except OSError as exc:
        log.warning("could not convert %s to %s (%s); using it as it is", source, target, exc)
        return source
    return out


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence native code writing to file descriptor 2 (start-up only)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
