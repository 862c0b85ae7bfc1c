"""SIGTERM on a real server process: the first drains (`/readyz` 503 with the reason, new
upgrades refused with HTTP 503 so a balancer retries elsewhere, `/healthz` still 200,
open connections held), a second stops it at once.

The server here has no models (a hub that only schedules, as an embedding's may be), so
it starts in a moment: what is under test is the process's signal handling. That a
reply in progress is played to its end before the 1001, and that the conversation then
goes on on another worker, is tested with real models behind real nginx in
test_serve_scale.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voice.bench.balancer import free_port, wait_port

SERVER = """
import asyncio, sys
from voice.runtime.hub import EngineHub
from voice.serve.server import ServeConfig, serve_until_signalled
from voice.serve.store import Conversations, make_store

config = ServeConfig(port=int(sys.argv[1]), drain_s=60)
with EngineHub(None) as hub:
    asyncio.run(serve_until_signalled(hub, config, Conversations(make_store("memory"))))
print("exited", flush=True)
"""


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status), dict(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        return int(exc.code), dict(json.loads(exc.read()))


async def _upgrade_status(port: int) -> int:
    try:
        ws = await connect(f"ws://127.0.0.1:{port}/ws")
    except InvalidStatus as exc:
        return int(exc.response.status_code)
    await ws.close()
    return 101


def test_the_first_sigterm_drains_and_a_second_stops_at_once() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        wait_port(port, proc, "the server")  # type: ignore[arg-type]
        before = _get(port, "/readyz")

        async def main() -> dict[str, object]:
            seen: dict[str, object] = {"upgrade_before": await _upgrade_status(port)}
            held = await connect(f"ws://127.0.0.1:{port}/ws")  # open, saying nothing yet
            proc.terminate()  # SIGTERM
            await asyncio.sleep(0.5)
            seen["readyz"] = await asyncio.to_thread(_get, port, "/readyz")
            seen["healthz"] = (await asyncio.to_thread(_get, port, "/healthz"))[0]
            seen["upgrade"] = await _upgrade_status(port)
            seen["held"] = proc.poll() is None and held.close_code is None
            started = time.monotonic()
            proc.terminate()  # the second SIGTERM
            seen["exit"] = await asyncio.to_thread(proc.wait, 10)
            seen["second_s"] = time.monotonic() - started
            return seen

        seen = asyncio.run(main())
        output = proc.stdout.read() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert before[0] == 200 and before[1]["status"] == "ready"
    assert seen["upgrade_before"] == 101
    status, body = seen["readyz"]  # type: ignore[misc]
    assert status == 503 and body["status"] == "draining" and "shutting down" in body["reason"]
    assert seen["healthz"] == 200  # alive while draining: not a liveness failure
    assert seen["upgrade"] == 503  # a balancer sends the new conversation elsewhere
    assert seen["held"]  # the open connection keeps the drain going (up to drain_s)
    assert seen["exit"] == 0 and seen["second_s"] < 5 and "exited" in output  # type: ignore[operator]


@pytest.mark.parametrize("bad", ["-1", "soon", "nan"])
def test_a_bad_drain_deadline_is_a_clear_error(bad: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "voice.cli", "serve", "--port", "1", "--drain-s", bad],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "drain" in done.stderr.lower() and "Traceback" not in done.stderr
