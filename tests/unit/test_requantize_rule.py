"""Which GGUFs the embedded backend converts to Q8_0 on first use."""

from __future__ import annotations

from pathlib import Path

from voice.think.requantize import converted_model


def test_k_quants_and_high_precision_files_are_used_as_they_are(tmp_path: Path) -> None:
    for name in ("Qwen2.5-1.5B-Instruct-Q4_K_M.gguf", "smollm2-1.7b-instruct-q4_k_m.gguf",
                 "x-Q6_K.gguf", "smollm2-360m-instruct-q8_0.gguf", "m-f16.gguf"):  # fmt: skip
        source = tmp_path / name
        assert converted_model(source) == source  # no conversion, no file needed
