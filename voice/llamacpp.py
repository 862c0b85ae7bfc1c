"""llama.cpp's process-wide set-up, for every engine that runs on it (the language
model in voice.think, the sentence encoder in voice.embed): keep it off Intel AMX,
where its AMX kernels crash the process.

On the development machine (a VM on a CPU that reports ``amx_tile`` and
``amx_int8``), llama-cpp-python 0.3.36 built from source with its defaults
(``GGML_NATIVE``) repacks the weights for AMX, and the first batch of more than
one token then dies in ``ggml_backend_amx_mul_mat`` with a segmentation fault:
no error, no traceback, the whole server gone. llama.cpp picks AMX (and its
other weight repacks) through "extra buffer types"; loading the model with
``use_extra_bufts`` off keeps to the plain CPU kernels, which work everywhere.

llama-cpp-python's ``Llama`` does not expose that parameter, so on a CPU that
reports AMX we patch the function it takes its model parameters' defaults from.
Elsewhere nothing changes (the repacks are a speed-up there). Set
``VOICE_LLAMA_EXTRA_BUFFERS=1`` to keep them on a machine where AMX works.
"""

from __future__ import annotations

import functools
import logging
import os
import runpy
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENV = "VOICE_LLAMA_EXTRA_BUFFERS"


def cpu_has_amx(cpuinfo: str | None = None) -> bool:
    """Whether the CPU reports AMX (Linux's ``/proc/cpuinfo`` flags, read once)."""
    if cpuinfo is None:
        return _this_cpu_has_amx()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = line.split(":", 1)[-1].split()
            return "amx_tile" in flags or "amx_int8" in flags
    return False


@functools.cache
def _this_cpu_has_amx() -> bool:
    """Every LLM context asks; reading /proc/cpuinfo costs about a millisecond."""
    try:
        return cpu_has_amx(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return False


def avoid_amx() -> bool:
    """On a CPU with AMX, make every model llama-cpp-python loads from now on skip the
    extra buffer types. Idempotent; True if the patch is in place."""
    if os.environ.get(ENV) == "1" or not cpu_has_amx():
        return False
    import llama_cpp.llama_cpp as native

    defaults: Any = native.llama_model_default_params
    if getattr(defaults, "_voice_no_extra_buffers", False):
        return True

    def without_extra_buffers() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    without_extra_buffers._voice_no_extra_buffers = True  # type: ignore[attr-defined]
    native.llama_model_default_params = without_extra_buffers
    log.info("CPU reports AMX: llama.cpp's AMX and repacked weights are off (%s=1 keeps them)", ENV)
    return True


def main() -> None:
    """``python -m voice.llamacpp ARGS``: llama-cpp-python's OpenAI-compatible server
    (``python -m llama_cpp.server ARGS``), kept off AMX like the embedded backend."""
    avoid_amx()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
