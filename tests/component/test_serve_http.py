"""`voice serve` on the HTTP backend against a real llama.cpp server: a client that hangs
up mid-reply stops the server's generation (its CPU stops), within a generous bound
(the benchmark, `voice bench disconnect`, measures how soon)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import clip

from voice.bench.disconnect import leave_mid_reply, server_env
from voice.bench.llama_server import LlamaServerProcess
from voice.bench.serve import ServerProcess

pytestmark = [pytest.mark.slow, pytest.mark.alone]


def test_a_client_leaving_mid_reply_stops_the_llama_server() -> None:
    with LlamaServerProcess(threads=1) as llama:
        server = ServerProcess(1, server_env(llama.url))
        try:
            audio = clip("cmu_arctic_axb_a0004", lead_s=0.3)
            busy, stopped_ms = asyncio.run(leave_mid_reply(server, llama, audio, 0.3, 2.9))
            health = server.health()
        finally:
            server.stop()
    assert busy >= 0.3  # it was generating a long story when the client left
    assert stopped_ms is not None and stopped_ms < 500
    assert health["llm_state"] == "ok" and health["sessions"] == 0
