"""`voice models list | pull | rm | verify`: the catalogue as a user sees it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from voice.catalog.entries import Entry, installed_dir, load_catalog, models_dir, read_manifest
from voice.catalog.pull import pull, remove, verify
from voice.errors import ModelNotFoundError


def _entry(catalog: dict[str, Entry], name: str) -> Entry:
    if name not in catalog:
        raise ModelNotFoundError(
            f"{name!r} is not in the model catalogue.",
            "`voice models list` shows the names; any local file or folder can also be "
            "given as a path instead.",
        )
    return catalog[name]


def _disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 1e6


def list_lines(role: str | None = None, language: str | None = None) -> list[str]:
    """The catalogue as a table: what each model is, what it needs, whether it is here."""
    rows = [("name", "role", "languages", "size", "RAM~", "licence", "on 2 cores", "installed")]
    for entry in load_catalog().values():
        if role and entry.role != role:
            continue
        if language and not entry.speaks(language):
            continue
        folder = installed_dir(entry.name)
        size = f"{_disk_mb(folder):.0f} MB" if folder else f"~{entry.size_mb} MB"
        rows.append(
            (
                entry.name,
                entry.role,
                ",".join(entry.languages)[:20],
                size,
                f"{entry.ram_mb} MB",
                entry.licence[:34],
                entry.cost or "not measured",
                "yes" if folder else f"voice models pull {entry.name}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append(
        f"(pulled models live in {models_dir()}; RAM is an estimate; on 2 cores: "
        "voice bench shapes / mandarin, see docs/performance.md)"
    )
    return lines


def cmd_list(role: str | None, language: str | None) -> int:
    print("\n".join(list_lines(role, language)))
    return 0


def cmd_pull(names: Sequence[str], *, progress: bool = True) -> int:
    catalog = load_catalog()
    entries = [_entry(catalog, n) for n in names]  # every name checked before any fetch
    for entry in entries:
        done = pull(entry, progress=progress, log=lambda line: print(line, file=sys.stderr))
        print(f"pulled {entry.name} ({entry.repo} @ {done.commit[:12]}) into {done.folder}")
        print(f"  licence: {entry.licence}")
    return 0


def cmd_rm(names: Sequence[str]) -> int:
    catalog = load_catalog()
    for name in names:
        _entry(catalog, name)
        print(f"removed {name}" if remove(name) else f"{name} was not pulled")
    return 0


def cmd_verify(names: Sequence[str]) -> int:
    catalog = load_catalog()
    targets = list(names) or [n for n in catalog if installed_dir(n)]
    bad = 0
    for name in targets:
        _entry(catalog, name)
        folder = installed_dir(name)
        if folder is None:
            print(f"{name}: not pulled")
            bad += 1
            continue
        problems = verify(folder)
        commit = str(read_manifest(folder).get("commit", "?"))[:12]
        if problems:
            bad += 1
            print(f"{name}: BAD: {'; '.join(problems)} (pull it again)")
        else:
            print(f"{name}: ok (@ {commit})")
    if not targets:
        print("no pulled models to verify")
    return 1 if bad else 0
