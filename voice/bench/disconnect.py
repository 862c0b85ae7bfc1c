"""``voice bench disconnect``: a client hangs up mid-reply; how soon does a real llama.cpp
server stop generating for it?

``voice serve`` runs with the HTTP backend against ``llama_cpp.server`` (the
bundled GGUF, one thread), with a system prompt that makes every reply a long
story, so the server is always mid-generation when the client leaves. The
server's CPU time is the witness: after the client closes its socket, it is
sampled every 10 ms, and generation stopped when the server had no more than
an idle server's 30 ms of CPU left to spend in the rest of the 1.5 s watch.
Reported as p50/p95 over the leavers, with the server's CPU use in the 300 ms
before each hang-up (it must have been generating for the figure to count).
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

from voice.bench.corpus import Clip
from voice.bench.llama_server import LlamaServerProcess
from voice.bench.serve import WAIT_S, ServerProcess, _replied, plan
from voice.serve.client import VoiceClient
from voice.stats import p50_p95

STORY = (
    "You are a storyteller. Whatever the user says, answer with a very long story "
    "about it, at least ten sentences."
)
WATCH_S = 1.5  # after the hang-up
BUSY_CORE = 0.3  # CPU share (of one core) that counts as generating
IDLE_CPU_S = 0.03  # CPU an idle server may spend in the rest of the watch


def server_env(llm_url: str, tokens: int = 400) -> dict[str, str]:
    return {
        "VOICE_LLM_BACKEND": "http",
        "VOICE_LLM_URL": llm_url,
        "VOICE_LLM_MAX_REPLY_TOKENS": str(tokens),
        "VOICE_LLM_SYSTEM_PROMPT": STORY,
        "VOICE_LLM_TEMPERATURE": "0",
        # A long story, not a spoken reply's two sentences: the hang-up must find the
        # model generating.
        "VOICE_LLM_REPLY_SENTENCES": "1000",
        "VOICE_LLM_REPLY_MAX_CHARS": "100000",
        "VOICE_LLM_REPLY_MAX_AUDIO_S": "0",  # no audio cap either
    }


async def leave_mid_reply(
    server: ServerProcess, llama: LlamaServerProcess, audio: Any, onset_s: float, end_s: float
) -> tuple[float, float | None]:
    """(the llama server's CPU share just before the hang-up, ms until it stopped)."""
    async with VoiceClient(server.ws_url) as client:
        sent = client.say(audio, onset_s, end_s)
        await client.wait_for(partial(_replied, client, sent), WAIT_S, "a reply")
        await asyncio.sleep(0.7)  # a story is being told: tokens are being generated
        before = llama.cpu_s()
        await asyncio.sleep(0.3)
        busy = (llama.cpu_s() - before) / 0.3
    left = time.monotonic()  # the socket is closed
    samples = [(0.0, llama.cpu_s())]
    while samples[-1][0] < WATCH_S:
        time.sleep(0.01)
        samples.append((time.monotonic() - left, llama.cpu_s()))
    if busy < BUSY_CORE:
        return busy, None
    # Stopped: from then on, the server spent at most what an idle one does (its HTTP
    # loop wakes now and then), not a token's worth of CPU per 50-100 ms.
    total = samples[-1][1]
    stopped_s = next(t for t, cpu in samples if total - cpu <= IDLE_CPU_S)
    return busy, stopped_s * 1000.0


def bench_disconnect(clips: list[Clip], leavers: int = 10) -> dict[str, Any]:
    turns, _ = plan(clips)
    busy: list[float] = []
    stopped: list[float] = []
    with LlamaServerProcess(threads=1) as llama:
        server = ServerProcess(1, server_env(llama.url))
        try:
            for turn in (turns * leavers)[:leavers]:
                share, ms = asyncio.run(
                    leave_mid_reply(server, llama, turn.audio, turn.onset_s, turn.end_s)
                )
                busy.append(round(share, 2))
                if ms is not None:
                    stopped.append(ms)
                server.wait_idle()
        finally:
            server.stop()
    return {
        "llm_server": "llama_cpp.server, bundled GGUF, 1 thread",
        "leavers": leavers,
        "generating_at_hang_up": len(stopped),
        "server_cpu_share_before": busy,
        "hang_up_to_generation_stopped_ms": p50_p95(stopped),
        "stopped_ms": [round(ms) for ms in stopped],
    }
