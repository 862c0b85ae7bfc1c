"""Many workers behind a load balancer, end to end on loopback: real nginx running the
shipped deploy/nginx.conf (TLS at the proxy, WebSocket upgrade, least_conn), two
real `voice serve` workers (real models) sharing a real Redis (`--store redis://`).

A conversation survives its worker: killed (SIGKILL) mid-conversation, or drained
(SIGTERM), the client reconnects through nginx with its conversation id, lands on
the other worker and its next turn is answered with the history intact (read back
from Redis, in order). Faults: an unknown id starts a new conversation with a clear
message; a store that stalls costs no reply."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from conftest import SERVER_ENV, VoiceServer, clip
from services import NginxProcess, RedisProcess, free_port
from websockets.exceptions import InvalidStatus

from voice.serve.client import VoiceClient

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TURN_ONE, TURN_TWO = "cmu_arctic_axb_a0004", "cmu_arctic_aew_a0003"  # "glad", "shook hands"
# Greedy and short replies (two sentences at most): every reply is played to its end in
# real time here, and a short one still plays long enough to be drained mid-way.
WORKER_ENV = {**SERVER_ENV, "VOICE_LLM_MAX_REPLY_TOKENS": "32", "VOICE_LLM_REPLY_SENTENCES": "2"}


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.redis = RedisProcess()
        self.ports = [free_port(), free_port()]
        self.workers: list[VoiceServer | None] = [None, None]
        starting = [threading.Thread(target=self.start, args=(i,)) for i in (0, 1)]
        for thread in starting:  # the models load in parallel
            thread.start()
        # A worker a test kills is replaced within seconds: nginx may try it again after
        # 2 s (the shipped 10 s would leave one worker for the next test).
        self.nginx = NginxProcess(folder, self.ports, fail_timeout_s=2)
        for thread in starting:
            thread.join()
        assert all(self.workers), "a worker did not start"
        self.db = redis.Redis.from_url(self.redis.url)

    def start(self, index: int) -> None:
        # A drain deadline far beyond a short reply, even on a busy CI machine: the test
        # is that the reply finishes, not how soon.
        args = ("--store", self.redis.url, "--drain-s", "90")
        self.workers[index] = VoiceServer(2, WORKER_ENV, port=self.ports[index], args=args)

    def worker(self, index: int) -> VoiceServer:
        server = self.workers[index]
        assert server is not None
        return server

    def holder(self) -> int:
        """Which worker holds the one open conversation."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            sessions = [self.worker(i).health()["sessions"] for i in (0, 1)]
            if sorted(sessions) == [0, 1]:
                return sessions.index(1)
            time.sleep(0.05)
        raise AssertionError(f"no single worker holds the conversation: {sessions}")

    def stored_turns(self, conversation_id: str) -> list[list[str]]:
        raw = self.db.get(f"voice:conversation:{conversation_id}")
        return list(json.loads(raw)["history"]["turns"]) if raw else []

    def wait_stored(self, conversation_id: str, messages: int) -> list[list[str]]:
        deadline = time.monotonic() + 10
        while len(turns := self.stored_turns(conversation_id)) < messages:
            assert time.monotonic() < deadline, f"not saved: {turns}"
            time.sleep(0.05)
        return turns

    def idle(self) -> None:
        for server in self.workers:
            if server is not None and server.proc.poll() is None:
                server.wait_idle()

    def stop(self) -> None:
        self.nginx.stop()
        for server in self.workers:
            if server is not None:
                server.stop()
        self.redis.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    running = Cluster(tmp_path_factory.mktemp("nginx"))
    yield running
    running.stop()


def _tls() -> ssl.SSLContext:
    return ssl._create_unverified_context()  # nginx's self-signed certificate, on loopback


def _client(cluster: Cluster, conversation_id: str | None = None) -> VoiceClient:
    return VoiceClient(cluster.nginx.ws_url, ssl_context=_tls(), conversation_id=conversation_id)


async def _reconnect(cluster: Cluster, conversation_id: str | None) -> VoiceClient:
    """Connect as the web client reconnects: at once, then after a short backoff if the
    balancer had no worker for it yet (nginx skips a failed one for a moment)."""
    for attempt in range(4):
        client = _client(cluster, conversation_id)
        try:
            return await client.__aenter__()
        except (OSError, InvalidStatus):
            if attempt == 3:
                raise
            await asyncio.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")


async def _turn(client: VoiceClient, name: str, replies: int) -> None:
    client.say(clip(name, lead_s=0.3), onset_s=0.3)
    await client.wait_for(lambda: client.message_count("reply_end") >= replies, 60, "a reply")


def _user_texts(turns: list[list[str]]) -> list[str]:
    return [text.lower() for role, text in turns if role == "user"]


def test_an_unknown_conversation_id_starts_a_new_one_with_a_clear_message(
    cluster: Cluster,
) -> None:
    for index in (0, 1):
        status, body = cluster.worker(index).get("/readyz")
        assert status == 200 and json.loads(body)["status"] == "ready"

    async def main(asked: str) -> VoiceClient:
        async with _client(cluster, asked) as client:
            await client.wait_for(lambda: client.message_count("error") >= 1, 10, "the notice")
            return client

    for asked in ("A" * 22, "not an id at all"):  # expired or never made; malformed
        client = asyncio.run(main(asked))
        assert client.ready["resumed"] is False and client.ready["history_messages"] == 0
        assert client.conversation_id and client.conversation_id != asked
        (error,) = client.of_type("error")
        assert error["code"] == "conversation_not_found"
        assert "new conversation" in error["message"]


def test_a_stalled_store_costs_no_reply(cluster: Cluster) -> None:
    cluster.idle()

    async def main() -> VoiceClient:
        async with _client(cluster) as client:
            cluster.redis.freeze()  # Redis holds the connection and answers nothing
            try:
                await _turn(client, TURN_ONE, 1)
                await client.wait_for(lambda: client.message_count("error") >= 1, 10, "notice")
            finally:
                cluster.redis.thaw()
            return client

    client = asyncio.run(main())
    (end,) = client.of_type("reply_end")
    assert end["text"].strip() and not end["interrupted"]
    (error,) = client.of_type("error")
    assert error["code"] == "store_unavailable" and "memory" in error["message"]


def test_a_killed_worker_conversation_goes_on_on_the_other_with_its_history(
    cluster: Cluster,
) -> None:
    cluster.idle()

    async def main() -> tuple[VoiceClient, VoiceClient, int, list[list[str]]]:
        async with _client(cluster) as first:
            await _turn(first, TURN_ONE, 1)
            assert first.conversation_id is not None
            saved = await asyncio.to_thread(cluster.wait_stored, first.conversation_id, 2)
            killed = await asyncio.to_thread(cluster.holder)
            cluster.worker(killed).proc.kill()  # SIGKILL: no drain, no goodbye
            await asyncio.to_thread(cluster.worker(killed).proc.wait, 10)
            await first.wait_for(lambda: first.closed, 10, "the lost connection")
        second = await _reconnect(cluster, first.conversation_id)
        try:
            await _turn(second, TURN_TWO, 1)
        finally:
            await second.close()
        return first, second, killed, saved

    try:
        first, second, killed, saved = asyncio.run(main())
    finally:
        for index in (0, 1):
            if cluster.worker(index).proc.poll() is not None:
                cluster.worker(index).stop()
                cluster.start(index)  # a replacement on the same port, for the next test
    assert second.ready["resumed"] is True and second.ready["history_messages"] == len(saved)
    assert second.conversation_id == first.conversation_id
    assert second.of_type("error") == []
    (final,) = second.of_type("final")
    assert "shook hands" in final["text"].lower()
    assert second.of_type("reply_end")[0]["text"].strip()
    # The other worker answered, with the first turn in its history, in order.
    assert first.conversation_id is not None
    turns = cluster.wait_stored(first.conversation_id, 4)
    assert turns[:2] == saved
    assert "glad" in _user_texts(turns)[0] and "shook hands" in _user_texts(turns)[1]
    assert killed in (0, 1)


def test_a_drained_worker_finishes_the_reply_and_the_conversation_moves_over(
    cluster: Cluster,
) -> None:
    cluster.idle()
    seen: dict[str, Any] = {}

    async def main() -> tuple[VoiceClient, VoiceClient]:
        async with _client(cluster) as first:
            first.say(clip(TURN_ONE, lead_s=0.3), onset_s=0.3)
            await first.wait_for(
                lambda: any(r.first_played_t for r in first.replies.values()), 60, "audio"
            )
            drained = await asyncio.to_thread(cluster.holder)
            seen["drained"] = drained
            cluster.worker(drained).drain()  # SIGTERM mid-reply
            await asyncio.sleep(0.3)
            seen["readyz"] = await asyncio.to_thread(cluster.worker(drained).get, "/readyz")
            seen["healthz"] = (await asyncio.to_thread(cluster.worker(drained).get, "/healthz"))[0]
            await first.wait_for(lambda: first.closed, 120, "the drain's close")
        assert first.conversation_id is not None
        second = await _reconnect(cluster, first.conversation_id)
        try:
            await _turn(second, TURN_TWO, 1)
        finally:
            await second.close()
        seen["exit"] = await asyncio.to_thread(cluster.worker(seen["drained"]).proc.wait, 20)
        return first, second

    first, second = asyncio.run(main())
    status, body = seen["readyz"]
    assert status == 503 and json.loads(body)["status"] == "draining"
    assert seen["healthz"] == 200
    # The reply in progress was played to its end and kept, then the worker said it was
    # going away (its last word) and closed with 1001.
    said = [(m["type"], m.get("state") or m.get("code") or "") for _, m in first.messages]
    ends = first.of_type("reply_end")
    assert len(ends) == 1, (first.close_code, said[-12:])
    end = ends[0]
    assert not end["interrupted"] and end["heard_text"] == end["text"].strip()
    assert first.messages[-1][1]["type"] == "going_away" and first.close_code == 1001
    assert "reconnect" in first.messages[-1][1]["message"]
    playback = first.replies[end["reply_id"]]
    assert playback.played == playback.received > 0
    assert seen["exit"] == 0
    assert second.ready["resumed"] is True and second.ready["history_messages"] == 2
    assert first.conversation_id is not None
    turns = cluster.wait_stored(first.conversation_id, 4)
    assert "glad" in _user_texts(turns)[0] and "shook hands" in _user_texts(turns)[1]
