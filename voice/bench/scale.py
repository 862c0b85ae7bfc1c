"""``voice bench scale``: the same client load as ``voice bench serve``, through real nginx
(the shipped deploy/nginx.conf, TLS included) in front of 1, 2, 3... workers.

For each LLM mode and each worker count W, W real ``voice serve`` workers start on
loopback, nginx balances them (least connections), and for each N, N clients hold
the benchmark's conversations at once through nginx (:func:`voice.bench.serve.client_load`):
voice-to-voice and barge-in p50/p95 as the clients feel them, and the CPU of
everything serving them (workers, nginx, the shared model server; 100% = one core).

LLM modes:

- ``embedded``: each worker has its own llama.cpp (the default set-up);
- ``shared``: every worker uses one llama.cpp server over the OpenAI-compatible HTTP
  backend (``python -m llama_cpp.server`` on the bundled model, one thread), the set-up
  for a model server on a GPU machine. Barge-in and hang-up cancellation reach it by
  closing the streaming request (``voice bench disconnect`` measures how soon).

On a machine with two cores more workers add no compute: the figures show what the
set-up costs there, not what it would gain on more cores or machines.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from voice.bench.balancer import NginxProcess
from voice.bench.conversation import BENCH_REPLY_TOKENS
from voice.bench.corpus import Clip
from voice.bench.serve import ServerProcess, client_load, client_tls, largest_n, plan
from voice.errors import VoiceError

MODES = ("embedded", "shared")


def bench_scale(
    clips: list[Clip],
    workers: list[int],
    clients: list[int],
    modes: list[str] | None = None,
    config: str | None = None,
) -> dict[str, Any]:
    modes = modes or ["embedded"]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or not workers or min(workers) < 1 or not clients or min(clients) < 1:
        raise VoiceError(
            f"voice bench scale needs worker and client counts of 1 or more and LLM modes "
            f"from {', '.join(MODES)} (got workers {workers}, clients {clients}, "
            f"modes {modes}).",
            "E.g. voice bench scale --workers 1,2,3 --clients 2,4 --llm embedded,shared",
            code="config",
        )
    turns, barges = plan(clips)
    runs: dict[str, Any] = {}
    for mode in modes:
        for count in workers:
            rows = _one_setup(mode, count, clients, turns, barges, config)
            for n, row in rows.items():
                runs[f"{mode} llm, {count} worker{'s' if count > 1 else ''}, {n} clients"] = row
            runs[f"{mode} llm, {count} workers: largest N with p95 under 1.5 s"] = largest_n(rows)
    return {
        "runs": runs,
        "reply_tokens": BENCH_REPLY_TOKENS,
        "cpu_cores": os.cpu_count(),
        "note": "100% CPU = one core; workers, nginx and the shared LLM server together",
    }


def _one_setup(
    mode: str,
    count: int,
    clients: list[int],
    turns: Any,
    barges: Any,
    config: str | None,
) -> dict[str, Any]:
    from voice.bench.llama_server import LlamaServerProcess

    env = {"VOICE_LLM_MAX_REPLY_TOKENS": str(BENCH_REPLY_TOKENS)}
    if config:
        env["VOICE_CONFIG"] = str(Path(config).resolve())
    llama = None
    servers: list[ServerProcess] = []
    nginx = None
    folder = Path(tempfile.mkdtemp(prefix="voice-bench-nginx-"))
    rows: dict[str, Any] = {}
    try:
        if mode == "shared":
            # One decode thread, as an embedded worker's (the other core synthesizes speech).
            llama = LlamaServerProcess(threads=1)
            env.update({"VOICE_LLM_BACKEND": "http", "VOICE_LLM_URL": llama.url})
        for _ in range(count):
            servers.append(ServerProcess(max(clients), env))
        nginx = NginxProcess(folder, [s.port for s in servers])

        def cpu_s() -> float:
            total = sum(s.cpu_s() for s in servers) + (nginx.cpu_s() if nginx else 0.0)
            return total + (llama.cpu_s() if llama else 0.0)

        for n in clients:
            for server in servers:
                server.wait_idle()
                server.peak_rss = 0
            cpu0, wall0 = cpu_s(), time.perf_counter()
            row = client_load(nginx.ws_url, turns, barges, n, client_tls(nginx.ws_url))
            wall = time.perf_counter() - wall0
            row["workers"] = count
            row["llm"] = mode
            row["cpu_percent"] = round(100.0 * (cpu_s() - cpu0) / wall, 1)
            row["workers_peak_rss_mb"] = round(sum(s.peak_rss for s in servers) / 2**20, 1)
            rows[str(n)] = row
    finally:
        if nginx is not None:
            nginx.stop()
        for server in servers:
            server.stop()
        if llama is not None:
            llama.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return rows
