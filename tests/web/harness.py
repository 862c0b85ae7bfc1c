"""Runs one of the web client's scripts in Node under a harness of this folder that
stubs what the browser gives it; the harness prints what came out as JSON."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_in_node(harness: str, script: str, steps: list[Any]) -> Any:
    """``tests/web/<harness>`` run on ``web/<script>`` with ``steps`` (JSON on argv)."""
    node = shutil.which("node")
    assert node, "these tests need Node.js (Debian: apt-get install nodejs)"
    done = subprocess.run(
        [node, str(ROOT / "tests/web" / harness), str(ROOT / "web" / script), json.dumps(steps)],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(done.stdout)
