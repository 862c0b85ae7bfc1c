"""`voice serve` behind a load balancer: `/readyz`, and a SIGTERM drain against a real
server with real models. The reply in progress is played to its end, then the
connection closes with 1001 and a `going_away` message; meanwhile `/readyz` is 503,
new upgrades are refused with 503 and `/healthz` stays 200. A client that never lets
its reply end is held until a second SIGTERM, which stops the server at once."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
import pytest
from conftest import SERVER_ENV, VoiceServer, clip
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from voice.serve.client import VoiceClient
from voice.serve.protocol import to_pcm16

pytestmark = pytest.mark.slow

HELLO = json.dumps({"type": "hello", "protocol": 1, "sample_rate": 16000, "format": "pcm16"})


async def _deaf_client(url: str, got_audio: asyncio.Event) -> Any:
    """A client that speaks one turn and never reports playing the reply: its reply
    never ends, so a drain can only close it at the deadline (or a second SIGTERM)."""
    ws = await connect(url, max_size=2**20)
    await ws.send(HELLO)
    audio = np.concatenate([clip("cmu_arctic_aew_a0003", lead_s=0.3), np.zeros(16000 * 30)])

    async def speak() -> None:
        for i in range(0, len(audio), 320):  # silence after the words: the clock runs on
            await ws.send(to_pcm16(audio[i : i + 320].astype(np.float32)))
            await asyncio.sleep(0.02)

    async def listen() -> None:
        async for raw in ws:
            if isinstance(raw, bytes):
                got_audio.set()

    tasks = [asyncio.create_task(speak()), asyncio.create_task(listen())]
    return ws, tasks


def test_sigterm_drains_the_reply_in_progress_then_goes_away() -> None:
    server = VoiceServer(2, SERVER_ENV, args=("--drain-s", "120"))
    try:
        status, body = server.get("/readyz")
        assert status == 200 and json.loads(body)["status"] == "ready"

        async def main() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            deaf_audio = asyncio.Event()
            deaf, deaf_tasks = await _deaf_client(server.ws_url, deaf_audio)
            async with VoiceClient(server.ws_url) as client:
                client.say(clip("cmu_arctic_axb_a0004", lead_s=0.3), onset_s=0.3)
                await client.wait_for(
                    lambda: any(r.first_played_t for r in client.replies.values()), 60, "audio"
                )
                await asyncio.wait_for(deaf_audio.wait(), 60)
                server.drain()  # mid-reply for both
                await asyncio.sleep(0.5)
                seen["readyz"] = await asyncio.to_thread(server.get, "/readyz")
                seen["healthz"] = (await asyncio.to_thread(server.get, "/healthz"))[0]
                try:
                    await connect(server.ws_url)
                    seen["upgrade"] = 101
                except InvalidStatus as exc:
                    seen["upgrade"] = exc.response.status_code
                await client.wait_for(lambda: client.closed, 60, "the close")
                seen["client"] = client
            # The deaf client's reply never ends: the drain holds it (deadline 120 s)...
            await asyncio.sleep(1.0)
            seen["held"] = server.proc.poll() is None and deaf.close_code is None
            # ... until a second SIGTERM stops the server at once.
            started = time.monotonic()
            server.drain()
            await asyncio.to_thread(server.proc.wait, 20)
            seen["second_sigterm_s"] = time.monotonic() - started
            for task in deaf_tasks:
                task.cancel()
            await asyncio.gather(*deaf_tasks, return_exceptions=True)
            return seen

        seen = asyncio.run(main())
    finally:
        server.stop()
    status, body = seen["readyz"]
    assert status == 503 and json.loads(body)["status"] == "draining"
    assert seen["healthz"] == 200  # alive while draining
    assert seen["upgrade"] == 503  # a new conversation goes elsewhere
    client: VoiceClient = seen["client"]
    # The reply in progress was played to its end and closed normally, then the server
    # said it was going away and closed with 1001.
    (start,) = client.of_type("reply_start")
    (end,) = client.of_type("reply_end")
    assert not end["interrupted"] and end["heard_text"] == end["text"].strip()
    playback = client.replies[start["reply_id"]]
    assert playback.played == playback.received > 0
    (going,) = client.of_type("going_away")
    assert going["code"] == "draining" and "reconnect" in going["message"]
    assert client.messages[-1][1]["type"] == "going_away"  # the last word before 1001
    assert client.close_code == 1001
    assert seen["held"]
    assert seen["second_sigterm_s"] < 15
