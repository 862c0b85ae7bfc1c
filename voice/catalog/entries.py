"""The catalogue of models `voice models pull` can fetch, and where pulled ones live.

The catalogue is a TOML file inside the package (``catalog.toml``), so an installed
copy finds it wherever it is. A pulled model is a folder ``<models dir>/<name>/`` that
holds its files and ``voice-model.json`` (the repository, the commit fetched and each
file's checked hash); the folder appears only once every file is fetched and checked,
so its existence is what "installed" means. A catalogue name can stand wherever a model
path does, and resolving it never downloads anything: a name not pulled yet is an error
that gives the pull command.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from voice.errors import ConfigError, ModelNotFoundError

ROLES = ("llm", "asr", "tts")
MANIFEST = "voice-model.json"
ROLE_WORDS = {"llm": "language model", "asr": "speech model", "tts": "voice"}
# The llm settings a catalogue entry's sampling may give (names as in [llm]).
SAMPLING_KEYS = (
    "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
    "frequency_penalty",
)  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One catalogue model: what to fetch (repo, revision, files) and what it is."""

    name: str
    role: str
    repo: str
    revision: str
    files: tuple[str, ...]
    optional: tuple[str, ...] = ()
    sha256: dict[str, str] = field(default_factory=dict)
    languages: tuple[str, ...] = ()
    licence: str = ""
    size_mb: int = 0
    ram_mb: int = 0
    notes: str = ""
    cost: str = ""  # what it costs on this machine's 2 cores, measured (docs/performance.md)
    # A language model's own sampling (its authors' generation_config.json), used where
    # the settings leave the project's defaults: those were tuned on SmolLM2-135M.
    sampling: dict[str, float] = field(default_factory=dict)

    def speaks(self, language: str) -> bool:
        """Whether this model handles ``language`` (ISO 639-1); "multi" is every one."""
        return "multi" in self.languages or language in self.languages


def _entry(name: str, raw: Any, source: str) -> Entry:
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: [{name}] must be a table.")
    try:
        role, repo, files = raw["role"], raw["repo"], raw["files"]
    except KeyError as exc:
        raise ConfigError(f"{source}: [{name}] needs {exc.args[0]!r}.") from None
    if role not in ROLES:
        raise ConfigError(f"{source}: [{name}] role must be one of {', '.join(ROLES)}.")
    if not files or not all(isinstance(f, str) for f in files):
        raise ConfigError(f"{source}: [{name}] files must be a list of paths in the repo.")
    sha = raw.get("sha256", {})
    if isinstance(sha, str):  # one file: the hash may be given bare
        sha = {files[0]: sha}
    sampling = raw.get("sampling", {})
    unknown = set(sampling) - set(SAMPLING_KEYS) if isinstance(sampling, dict) else {"?"}
    if unknown:
        raise ConfigError(
            f"{source}: [{name}] sampling must be a table of {', '.join(SAMPLING_KEYS)}."
        )
    return Entry(
        name=name,
        role=role,
        repo=str(repo),
        revision=str(raw.get("revision", "main")),
        files=tuple(files),
        optional=tuple(raw.get("optional", ())),
        sha256={str(k): str(v).lower() for k, v in sha.items()},
        languages=tuple(raw.get("languages", ())),
        licence=str(raw.get("licence", "")),
        size_mb=int(raw.get("size_mb", 0)),
        ram_mb=int(raw.get("ram_mb", 0)),
        notes=str(raw.get("notes", "")),
        cost=str(raw.get("cost", "")),
        sampling={str(k): float(v) for k, v in sampling.items()},
    )


def load_catalog(path: str | Path | None = None) -> dict[str, Entry]:
    """The catalogue: the packaged ``catalog.toml``, or ``path`` (or $VOICE_CATALOG)."""
    path = path or os.environ.get("VOICE_CATALOG")
    if path:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the model catalogue {path}: {exc}.") from None
    else:
        source = "catalog.toml"
        text = resources.files("voice.catalog").joinpath("catalog.toml").read_text("utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the model catalogue {source} is not valid TOML: {exc}.") from None
    return {name: _entry(name, raw, source) for name, raw in data.items()}


def models_dir() -> Path:
    """Where pulled models live: $VOICE_MODELS_DIR, else ~/.local/share/voice/models."""
    base = os.environ.get("VOICE_MODELS_DIR")
    if base:
        return Path(base).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(data) / "voice" / "models"


def installed_dir(name: str) -> Path | None:
    """The folder of a pulled model, or None when it is not (completely) pulled."""
    folder = models_dir() / name
    return folder if (folder / MANIFEST).is_file() else None


def read_manifest(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    return data


def lookup(spec: str, role: str) -> Path | None:
    """The folder of catalogue model ``spec`` if it names one for ``role``; None when
    ``spec`` is not a catalogue name (so it is a path or something else). A catalogue
    name that is not pulled, or that names another role's model, is an error."""
    spec = spec.strip()
    if not spec or "/" in spec or spec.startswith((".", "~")):
        return None
    try:
        entry = load_catalog().get(spec)
    except ConfigError:
        return None
    if entry is None:
        return None
    if entry.role != role:
        raise ModelNotFoundError(
            f"{spec} is a {ROLE_WORDS[entry.role]}, not a {ROLE_WORDS[role]}.",
            "`voice models list` shows each catalogue model's role.",
        )
    folder = installed_dir(spec)
    if folder is None:
        raise ModelNotFoundError(
            f"the {ROLE_WORDS[role]} {spec} is not pulled yet (nothing is downloaded "
            "while a conversation runs).",
            f"Fetch it once with `voice models pull {spec}` ({entry.size_mb} MB).",
        )
    return folder


def entry_file(folder: Path, entry_path: str) -> Path:
    """Where a repository file of an entry is kept in its pulled folder (its base name:
    a Piper voice's ``zh/zh_CN/.../x.onnx`` is ``<folder>/x.onnx``)."""
    return folder / Path(entry_path).name


_MAIN_SUFFIX = {"llm": ".gguf", "tts": ".onnx"}


def entry_for_model(spec: str, role: str) -> Entry | None:
    """The catalogue entry a model setting means: its name, or the path of a file an
    entry fetches (a pulled GGUF given by path is still that model); None otherwise.
    Never raises: a setting that is no catalogue model simply has no entry."""
    spec = spec.strip()
    if not spec or spec == "default":
        return None
    try:
        catalog = load_catalog()
    except ConfigError:
        return None
    entry = catalog.get(spec)
    if entry is not None:
        return entry if entry.role == role else None
    base = Path(spec).name
    for entry in catalog.values():
        if entry.role == role and any(Path(f).name == base for f in entry.files):
            return entry
    return None


def catalogue_path(spec: str, role: str) -> Path | None:
    """What a model setting means when it is a catalogue name: the pulled folder (speech
    models), its ``.gguf`` (language models) or its ``.onnx`` (voices); None when
    ``spec`` is no catalogue name. Never downloads (see :func:`lookup`)."""
    folder = lookup(spec, role)
    if folder is None or role not in _MAIN_SUFFIX:
        return folder
    suffix = _MAIN_SUFFIX[role]
    for path in sorted(folder.iterdir()):
        if path.name.endswith(suffix):
            return path
    raise ModelNotFoundError(
        f"the pulled model {spec} in {folder} has no {suffix} file.",
        f"Pull it again: `voice models rm {spec} && voice models pull {spec}`.",
    )
