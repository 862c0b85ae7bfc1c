"""`voice models pull` through the real huggingface_hub client against a local hub.

No network: tests/fakehub.py speaks the hub's file API (resolve, LFS redirect, Range).
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakehub import COMMIT, FakeHub

from voice.errors import ModelNotFoundError

pytest.importorskip("huggingface_hub")

REPO = "someone/tiny-gguf"
GGUF = "tiny-q4_k_m.gguf"
# huggingface_hub writes a download in 10 MiB blocks: a file of 12 MiB, stalled
# after 11, leaves 10 MiB on disk for the next pull to resume from.
BIG, STALL, BLOCK = 12 << 20, 11 << 20, 10 << 20


def _catalog(tmp: Path, extra: str = "") -> Path:
    path = tmp / "catalog.toml"
    path.write_text(
        f"""
["tiny-llm"]
role = "llm"
repo = "{REPO}"
revision = "main"
files = ["{GGUF}", "README.md"]
optional = ["LICENSE"]
languages = ["en"]
licence = "Apache-2.0"
size_mb = 3
ram_mb = 10
{extra}
""",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    server = FakeHub()
    data = os.urandom(BIG)
    server.add(REPO, GGUF, data, lfs=True)
    server.add(REPO, "README.md", b"# tiny\n", lfs=False)
    monkeypatch.setenv("VOICE_CATALOG", str(_catalog(tmp_path)))
    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no user token or cache
    yield server
    server.close()


def _entry() -> object:
    from voice.catalog import load_catalog

    return load_catalog()["tiny-llm"]


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "voice.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_name_not_pulled_says_how_to_pull_it(hub: FakeHub) -> None:
    from voice.models import resolve_llm_model

    with pytest.raises(ModelNotFoundError, match="voice models pull tiny-llm"):
        resolve_llm_model("tiny-llm")
    assert not hub.requests  # resolving never downloads


def test_pull_checks_every_file_and_the_name_then_resolves(hub: FakeHub, tmp_path: Path) -> None:
    from voice.catalog.pull import pull, verify
    from voice.models import resolve_llm_model

    done = pull(_entry(), progress=False, log=lambda _: None)  # type: ignore[arg-type]
    folder = tmp_path / "models" / "tiny-llm"
    assert done.folder == folder and done.commit == COMMIT
    assert resolve_llm_model("tiny-llm") == folder / GGUF
    data = hub.files[(REPO, GGUF)][0]
    assert done.files[GGUF] == hashlib.sha256(data).hexdigest()
    assert (folder / "README.md").read_bytes() == b"# tiny\n"
    assert not (folder / "LICENSE").exists()  # optional, absent upstream: skipped
    # every file after the first came from the commit the first resolved to
    assert any(COMMIT in path for _, path, _ in hub.requests)
    assert verify(folder) == []
    with (folder / GGUF).open("r+b") as f:
        f.write(b"\0\0\0\0")
    assert verify(folder) == [f"{GGUF} does not match its sha256"]


def test_a_killed_pull_resumes_with_a_range_request(hub: FakeHub, tmp_path: Path) -> None:
    hub.stall_after = STALL
    proc = _cli("models", "pull", "tiny-llm", env=dict(os.environ))
    staging = tmp_path / "models" / ".partial" / "tiny-llm"
    deadline = time.monotonic() + 60
    partial: list[Path] = []
    while time.monotonic() < deadline:
        partial = [p for p in staging.rglob("*.part") if p.stat().st_size >= BLOCK]
        if partial:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert partial, f"the first pull never got half-way: {err[-2000:]}"
    assert not (tmp_path / "models" / "tiny-llm").exists()  # nothing in place yet
    hub.stall_after = None
    hub.release()
    again = _cli("models", "pull", "tiny-llm", env=dict(os.environ))
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert "100%" in err  # huggingface_hub's progress bar
    assert "pulled tiny-llm" in out and "Apache-2.0" in out
    ranges = [r for method, path, r in hub.requests if method == "GET" and path.startswith("/cdn/")]
    assert f"bytes={BLOCK}-" in ranges  # resumed where the killed pull stopped
    folder = tmp_path / "models" / "tiny-llm"
    assert (folder / GGUF).read_bytes() == hub.files[(REPO, GGUF)][0]
    assert not (tmp_path / "models" / ".partial" / "tiny-llm").exists()


def test_a_wrong_sha256_is_refused_and_nothing_is_left(hub: FakeHub, tmp_path: Path) -> None:
    from voice.catalog.pull import IntegrityError, pull

    hub.corrupt = True
    with pytest.raises(IntegrityError, match="nothing was installed"):
        pull(_entry(), progress=False, log=lambda _: None)  # type: ignore[arg-type]
    models = tmp_path / "models"
    assert not (models / "tiny-llm").exists()
    assert not (models / ".partial" / "tiny-llm").exists()


def test_a_catalogue_sha256_is_checked_too(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice.catalog.pull import IntegrityError, pull

    catalog = _catalog(tmp_path, f'sha256 = {{ "{GGUF}" = "{"ab" * 32}" }}')
    monkeypatch.setenv("VOICE_CATALOG", str(catalog))
    with pytest.raises(IntegrityError, match="catalogue"):
        pull(_entry(), progress=False, log=lambda _: None)  # type: ignore[arg-type]
    assert not (tmp_path / "models" / "tiny-llm").exists()


@pytest.mark.parametrize("how", ["unreachable", "HF_HUB_OFFLINE"])
def test_offline_is_one_clear_line(hub: FakeHub, tmp_path: Path, how: str) -> None:
    env = dict(os.environ)
    if how == "unreachable":
        hub.close()  # nothing listens there any more
    else:
        env["HF_HUB_OFFLINE"] = "1"
    proc = _cli("models", "pull", "tiny-llm", env=env)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("voice: error [offline]"), err
    assert "HF_ENDPOINT" in lines[0] or "HF_HUB_OFFLINE" in lines[0]
    assert not (tmp_path / "models" / "tiny-llm").exists()


def test_rm_and_list(hub: FakeHub, tmp_path: Path) -> None:
    from voice.catalog.commands import list_lines
    from voice.catalog.pull import pull, remove

    assert "voice models pull tiny-llm" in "\n".join(list_lines())
    pull(_entry(), progress=False, log=lambda _: None)  # type: ignore[arg-type]
    row = next(line for line in list_lines() if line.startswith("tiny-llm"))
    assert row.rstrip().endswith("yes")
    assert remove("tiny-llm")
    assert not (tmp_path / "models" / "tiny-llm").exists()


def test_the_packaged_catalogue_has_what_users_ask_for() -> None:
    from voice.catalog import load_catalog

    catalog = load_catalog()
    for name in (
        "qwen2.5-0.5b-instruct", "qwen2.5-1.5b-instruct", "qwen2.5-3b-instruct",
        "llama-3.2-1b-instruct", "llama-3.2-3b-instruct", "gemma-3-1b-it",
        "smollm2-360m-instruct", "smollm2-1.7b-instruct", "whisper-tiny", "whisper-base",
        "whisper-small", "distil-whisper-small.en", "whisper-large-v3-turbo",
        "zh_CN-huayan-medium",
    ):  # fmt: skip
        assert name in catalog, name
        assert catalog[name].licence and catalog[name].revision and catalog[name].files
    voices = {lang for e in catalog.values() if e.role == "tts" for lang in e.languages}
    assert len(voices) >= 10 and "zh" in voices


def test_the_weights_are_pinned_by_content() -> None:
    """Every language model's GGUF and every Whisper's weights but one carry a sha256 in
    the catalogue (a file whose bytes differ is refused, whatever the hub says), and
    whisper-base's is the digest of the same weights the multilingual extra ships."""
    import re

    from voice.catalog import load_catalog

    hexes = re.compile(r"[0-9a-f]{64}")
    catalog = load_catalog()
    for entry in catalog.values():
        weights = next((f for f in entry.files if f.endswith((".gguf", "model.bin"))), None)
        if weights is None or entry.name == "distil-whisper-small.en":
            continue
        assert hexes.fullmatch(entry.sha256.get(weights, "")), entry.name
        assert entry.revision == "main" or re.fullmatch(r"[0-9a-f]{40}", entry.revision)
    from voice.catalog.multilingual import MODEL_SHA256

    assert catalog["whisper-base"].sha256["model.bin"] == MODEL_SHA256
