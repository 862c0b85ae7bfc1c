"""A child a bench or test starts stops on Ctrl-C even when the run itself was started
in the background (SIGINT ignored, and inherited)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

from voice.bench.children import ctrl_c_stops

SLEEPER = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"]


def _interrupted(preexec: Callable[[], object] | None, wait_s: float) -> int | None:
    """The child's exit status after a SIGINT, None if it still ran ``wait_s`` later."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `pytest &` starts
    try:
        child = subprocess.Popen(SLEEPER, stdout=subprocess.PIPE, preexec_fn=preexec)
    finally:
        signal.signal(signal.SIGINT, before)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        child.send_signal(signal.SIGINT)
        try:
            return child.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None
    finally:
        child.kill()
        child.wait()


def test_a_child_stops_on_ctrl_c_though_its_parent_ignores_it() -> None:
    assert _interrupted(None, 1.0) is None  # what the tests' servers did: killed 10 s later
    assert _interrupted(ctrl_c_stops, 20.0) not in (None, 0)
