"""Fetch, check, remove and re-check catalogue models through ``huggingface_hub``.

A pull goes through the hub's own client, so a mirror (``HF_ENDPOINT``), a token
(``HF_TOKEN``), its progress bars and its resumable downloads all work as users of the
hub expect. What this module adds is the part a voice needs to trust a file:

* every file is fetched at one commit (the pinned revision, resolved once), into a
  staging folder under ``<models dir>/.partial/``; an interrupted pull leaves its
  ``.incomplete`` file there and the next pull resumes it with an HTTP Range request;
* every file is hashed and compared with the catalogue's sha256, else with the hub's
  own LFS sha256 at that commit, else (small files kept in git) with its git blob id;
  a mismatch deletes the staging folder and nothing is put in place;
* only when every file is checked does the folder move into place (one rename), with a
  ``voice-model.json`` recording the commit and each file's sha256 for ``verify``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voice.catalog.entries import MANIFEST, Entry, entry_file, models_dir, read_manifest
from voice.errors import ModelNotFoundError, VoiceError

DEFAULT_ENDPOINT = "https://huggingface.co"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")


class OfflineError(VoiceError):
    """The hub (or the mirror) cannot be reached."""

    code = "offline"


class IntegrityError(VoiceError):
    """A fetched file is not the file the catalogue or the hub vouches for."""

    code = "integrity"


@dataclass(frozen=True)
class Pulled:
    name: str
    folder: Path
    commit: str
    files: dict[str, str]  # file name in the folder -> sha256


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _offline_env() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return value in ("1", "true", "yes", "on")


def file_hashes(path: Path) -> tuple[str, str]:
    """The file's sha256 and its git blob id (sha1 of ``blob <size>\\0`` + content)."""
    sha256 = hashlib.sha256()
    blob = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            sha256.update(block)
            blob.update(block)
    return sha256.hexdigest(), blob.hexdigest()


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _hub_failure(exc: BaseException, entry: Entry, filename: str) -> VoiceError:
    """One clear error for a failed request to the hub."""
    status = _status(exc)
    where = endpoint()
    if status in (401, 403):
        return VoiceError(
            f"{where} refused {entry.repo} (HTTP {status}): the repository is gated or private.",
            "Accept its licence on the hub and set HF_TOKEN to a token of yours.",
            code="hub_refused",
        )
    if status == 404:
        return ModelNotFoundError(
            f"{entry.repo}@{entry.revision} has no {filename} on {where}.",
            "The catalogue entry is out of date; report it, or pull from a mirror that has it.",
        )
    if status is not None:
        return VoiceError(f"{where} answered HTTP {status} for {entry.repo}/{filename}.",
                          "Try again later.", code="hub_error")  # fmt: skip
    return OfflineError(
        f"cannot reach {where} to pull {entry.name} ({type(exc).__name__}): this machine "
        "looks offline.",
        "Connect to the network, or set HF_ENDPOINT to a mirror you can reach.",
    )


def pull(entry: Entry, *, progress: bool = True, log: Callable[[str], None] = print) -> Pulled:
    """Fetch ``entry`` into ``<models dir>/<name>``, checked; resume a killed pull."""
    if _offline_env():
        raise OfflineError(
            f"HF_HUB_OFFLINE is set, so {entry.name} cannot be pulled.",
            "Unset HF_HUB_OFFLINE on a machine with a network connection (or a mirror).",
        )
    import huggingface_hub
    from huggingface_hub.utils.tqdm import disable_progress_bars, enable_progress_bars

    # A bar on stderr whether or not it is a terminal (the hub's own bar hides itself
    # off a terminal); --no-progress turns it off.
    bar: dict[str, Any] = {}
    if progress:
        from tqdm import tqdm

        bar["tqdm_class"] = tqdm

    root = models_dir()
    staging = root / ".partial" / entry.name
    ready = staging / "ready"
    ready.mkdir(parents=True, exist_ok=True)
    hub = endpoint()
    (enable_progress_bars if progress else disable_progress_bars)()
    commit = entry.revision
    hashes: dict[str, str] = {}
    checks: dict[str, str] = {}
    for filename in (*entry.files, *entry.optional):
        required = filename in entry.files
        url = huggingface_hub.hf_hub_url(entry.repo, filename, revision=commit, endpoint=hub)
        try:
            meta = huggingface_hub.get_hf_file_metadata(url, endpoint=hub)
        except Exception as exc:
            if not required and _status(exc) == 404:
                continue
            raise _hub_failure(exc, entry, filename) from None
        if meta.commit_hash and not _GIT_SHA1.fullmatch(commit):
            commit = meta.commit_hash  # every later file from the same commit
        expected, kind = _expected_hash(entry, filename, meta.etag)
        fetched = staging / (Path(filename).name + ".part")
        try:
            _fetch(meta.location or url, fetched, meta.size, hub, filename, bar)
        except Exception as exc:
            raise _hub_failure(exc, entry, filename) from None
        sha256, blob = file_hashes(fetched)
        got = blob if kind == "git-sha1" else sha256
        if expected is None or got != expected:
            shutil.rmtree(staging, ignore_errors=True)
            raise IntegrityError(
                f"{entry.repo}/{filename} failed its check: {kind} {got[:16]}..., expected "
                f"{(expected or 'a hash from the hub')[:16]}...; nothing was installed.",
                "The mirror or the download is corrupt: pull again, or from another endpoint.",
            )
        target = entry_file(ready, filename)
        os.replace(fetched, target)
        hashes[target.name] = sha256
        checks[target.name] = kind
        log(f"{entry.name}: {target.name} ok ({kind} checked)")
    manifest = {
        "name": entry.name, "role": entry.role, "repo": entry.repo,
        "revision": entry.revision, "commit": commit, "endpoint": hub,
        "pulled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sha256": hashes, "checked_against": checks,
    }  # fmt: skip
    (ready / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    final = root / entry.name
    if final.exists():
        shutil.rmtree(final)
    os.replace(ready, final)
    shutil.rmtree(staging, ignore_errors=True)
    return Pulled(entry.name, final, commit, hashes)


def _fetch(
    url: str, part: Path, size: int | None, hub: str, filename: str, bar: dict[str, Any]
) -> None:
    """Download ``url`` into ``part``, continuing from what a killed pull left there
    (``http_get`` asks for the rest with ``Range: bytes=N-``). The hub's token goes
    only to the hub, never to the storage host an LFS file is redirected to."""
    from urllib.parse import urlparse

    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]

    headers = build_hf_headers()
    if urlparse(url).netloc != urlparse(hub).netloc:
        headers.pop("authorization", None)
    have = part.stat().st_size if part.is_file() else 0
    if size is not None and have > size:
        part.unlink()  # not a prefix of this file: start again
        have = 0
    with part.open("ab") as f:
        http_get(
            url, f, resume_size=have, headers=headers, expected_size=size,
            displayed_filename=Path(filename).name, **bar,
        )  # fmt: skip


def _expected_hash(entry: Entry, filename: str, etag: str | None) -> tuple[str | None, str]:
    """The hash a file must have, and what vouches for it."""
    if filename in entry.sha256:
        return entry.sha256[filename], "sha256 (catalogue)"
    tag = (etag or "").strip('"').lower().removeprefix("w/").strip('"')
    if _SHA256.fullmatch(tag):
        return tag, "sha256 (hub LFS)"
    if _GIT_SHA1.fullmatch(tag):
        return tag, "git-sha1"
    return None, "sha256 (hub LFS)"


def remove(name: str) -> bool:
    """Delete a pulled model and any unfinished pull of it; whether there was one."""
    root = models_dir()
    found = False
    for folder in (root / name, root / ".partial" / name):
        if folder.exists():
            shutil.rmtree(folder)
            found = True
    return found


def verify(folder: Path) -> list[str]:
    """The problems with a pulled model (empty when every file hashes as recorded)."""
    try:
        manifest: dict[str, Any] = read_manifest(folder)
    except (OSError, ValueError) as exc:
        return [f"{MANIFEST} unreadable ({exc})"]
    problems = []
    for name, expected in manifest.get("sha256", {}).items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name} missing")
        elif file_hashes(path)[0] != expected:
            problems.append(f"{name} does not match its sha256")
    return problems
