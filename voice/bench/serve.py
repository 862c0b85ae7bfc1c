"""``voice bench serve --clients 1,2,4``: concurrent browser-protocol clients over loopback.

A real ``voice serve`` runs in a subprocess (models loaded once); for each N,
N clients (:class:`voice.serve.client.VoiceClient`, which behaves like the web
page) hold corpus conversations at once, streaming their microphones at real
time and playing the replies at real time. Each conversation has six user
turns; during the second and the fifth turn's replies the client says "stop". Measured as
the clients feel it, p50/p95:

- voice-to-voice: the moment the last voiced sample of the user's turn was
  sent to the first reply sample played;
- barge-in: the onset of speech sent over a playing reply to the moment the
  client's playback stopped (the server's pause or clear arrived);

plus the server's own per-turn figures (``turn_metrics``), the server
process's CPU (100% = one core) and peak memory, and the largest N that
keeps voice-to-voice p95 under 1.5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.bench.children import ctrl_c_stops
from voice.bench.conversation import BENCH_REPLY_TOKENS, SKIP_AS_TURNS
from voice.bench.corpus import Clip, longest_pause_s, speech_end_s, speech_start_s
from voice.errors import VoiceError
from voice.serve.client import SentClip, VoiceClient
from voice.stats import p50_p95

Float32Array = npt.NDArray[np.float32]

TARGET_P95_MS = 1500.0
TURNS = 6
BARGE_TURNS = (1, 4)  # speak over the replies to these turns (0-based)
BARGE_DELAY_S = 0.6  # after that reply started playing
GAP_S = 0.6  # between the end of a reply and the next turn
WAIT_S = 45.0  # for a reply; a turn without one is counted as unanswered
LEAD_S = 0.3
LEAVERS = 10  # clients that hang up mid-reply, for the cancellation figure


@dataclass
class _Turn:
    audio: Float32Array
    onset_s: float
    end_s: float


@dataclass
class _ClientResult:
    v2v_ms: list[float] = field(default_factory=list)
    barge_ms: list[float] = field(default_factory=list)
    barge_attempts: int = 0  # replies a "stop" was said over (each stopped, or a miss)
    server_v2v_ms: list[float] = field(default_factory=list)
    turns: int = 0
    answered: int = 0
    errors: list[str] = field(default_factory=list)


def _turn(clip: Clip) -> _Turn:
    audio = clip.audio(lead_s=LEAD_S)
    return _Turn(audio, speech_start_s(audio), speech_end_s(audio))


def plan(clips: list[Clip]) -> tuple[list[_Turn], list[_Turn]]:
    """User turns (short, without long inner pauses: questions and commands) and
    the clips spoken over replies."""
    speech = [c for c in clips if c.kind == "speech" and c.text]
    usable = [c for c in speech if not c.name.startswith(SKIP_AS_TURNS) and c.seconds < 6]
    turns = [t for t in map(_turn, usable) if longest_pause_s(t.audio) < 0.4]
    barges = [_turn(c) for c in speech if c.name.startswith("speechcommands_stop")]
    if not turns or not barges:
        raise VoiceError(
            "the corpus has no short user turns or no 'stop' clips for the serve benchmark.",
            "Use the bundled tests/corpus, or one laid out like it.",
            code="corpus_not_found",
        )
    return turns, barges


async def _converse(
    url: str, turns: list[_Turn], barge: _Turn, seed: int, tls: ssl.SSLContext | None = None
) -> _ClientResult:
    result = _ClientResult()
    await asyncio.sleep(random.Random(seed).uniform(0.0, 1.0))  # people do not start in step
    async with VoiceClient(url, ssl_context=tls) as client:
        for index, turn in enumerate(turns):
            result.turns += 1
            sent = client.say(turn.audio, turn.onset_s, turn.end_s)
            try:
                await client.wait_for(partial(_replied, client, sent), WAIT_S, "a reply")
                result.answered += 1
                if index in BARGE_TURNS:
                    reactions, attempts = await _speak_over_reply(client, barge)
                    result.barge_ms += reactions
                    result.barge_attempts += attempts
                await client.wait_for(lambda: _all_ended(client), WAIT_S, "the replies' end")
            except (TimeoutError, ConnectionError) as exc:
                result.errors.append(str(exc))
            first = _first_played_after(client, sent)
            if first is not None and sent.speech_end_t is not None:
                result.v2v_ms.append((first - sent.speech_end_t) * 1000.0)
            await asyncio.sleep(GAP_S)
        result.server_v2v_ms = [
            float(m["voice_to_voice_ms"])
            for m in client.of_type("turn_metrics")
            if m.get("voice_to_voice_ms") is not None
        ]
        result.errors += [m["code"] for m in client.of_type("error")]
    return result


def _first_played_after(client: VoiceClient, sent: SentClip) -> float | None:
    """When the first reply sample was played after the clip's speech ended."""
    end = sent.speech_end_t
    if end is None:
        return None
    times = [
        r.first_played_t
        for r in client.replies.values()
        if r.first_played_t is not None and r.first_played_t > end
    ]
    return min(times) if times else None


def _all_ended(client: VoiceClient) -> bool:
    started = {m["reply_id"] for m in client.of_type("reply_start")}
    return started <= {m["reply_id"] for m in client.of_type("reply_end")}


def _replied(client: VoiceClient, sent: SentClip) -> bool:
    return sent.done_t is not None and _first_played_after(client, sent) is not None


async def _speak_over_reply(client: VoiceClient, barge: _Turn) -> tuple[list[float], int]:
    """Say ``barge`` (a "stop") a moment into the reply now playing; the reaction time
    to each reply it stopped, and how many replies it was said over (one that never
    stopped is a miss, not left out). Nothing if the reply was over before the moment."""
    await asyncio.sleep(BARGE_DELAY_S)
    playing = [
        rid for rid, r in client.replies.items()
        if r.first_played_t and r.stopped_t is None and r.played < r.received
    ]  # fmt: skip
    if not playing or _all_ended(client):
        return [], 0
    over = client.say(barge.audio, barge.onset_s, barge.end_s)
    await client.wait_for(lambda: over.done_t is not None, WAIT_S, "the barge-in clip")
    with contextlib.suppress(TimeoutError):  # a slow stop still counts, a miss is a miss
        await client.wait_for(partial(_stopped_or_over, client, playing), WAIT_S, "a stop")
    reactions = []
    for rid in playing:
        stop = client.replies[rid].stopped_t
        if stop is not None and over.onset_t is not None and stop > over.onset_t:
            reactions.append((stop - over.onset_t) * 1000.0)
    return reactions, len(playing)


def _stopped_or_over(client: VoiceClient, reply_ids: list[int]) -> bool:
    ended = {m["reply_id"] for m in client.of_type("reply_end")}
    return all(client.replies[r].stopped_t is not None or r in ended for r in reply_ids)


async def _leave_mid_reply(server: ServerProcess, turns: list[_Turn]) -> list[float]:
    """Clients that hang up while a reply plays: how long the server's engine went on
    working for each of them (its running step finishing) after it saw them go."""
    for turn in turns[:LEAVERS]:
        async with VoiceClient(server.ws_url) as client:
            sent = client.say(turn.audio, turn.onset_s, turn.end_s)
            try:
                await client.wait_for(partial(_replied, client, sent), WAIT_S, "a reply")
            except TimeoutError:
                continue
            await asyncio.sleep(0.3)  # mid-reply: generation and synthesis are running
    await asyncio.sleep(0.5)
    cancel_ms: list[float] = server.health()["cancel_ms"]
    return [float(ms) for ms in cancel_ms[-LEAVERS:]]


class ServerProcess:
    """A real ``voice serve`` in a subprocess on a loopback port (a free one unless
    ``port`` is given), ready when constructed; for benchmarks and tests. Its peak
    memory is sampled while it runs."""

    def __init__(
        self,
        max_sessions: int,
        env: dict[str, str] | None = None,
        port: int = 0,
        args: tuple[str, ...] = (),
    ) -> None:
        import psutil

        self.port = port
        if not port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
        cmd = [sys.executable, "-m", "voice.cli", "serve", "--port", str(self.port),
               "--max-sessions", str(max_sessions), *args]  # fmt: skip
        self.tls = "--certfile" in args
        self.token = args[args.index("--token") + 1] if "--token" in args else ""
        # Its banner goes to stderr: the caller's stdout may be a JSON report.
        self.proc = subprocess.Popen(
            cmd, env={**os.environ, **(env or {})}, stdout=sys.stderr, preexec_fn=ctrl_c_stops
        )
        self.ps = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + 180
        while True:
            try:
                self.health()
                break
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise VoiceError("voice serve did not start.", code="server_failed") from exc
                time.sleep(0.2)
        self.peak_rss = 0
        self._stop = threading.Event()
        threading.Thread(target=self._sample, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        query = f"?token={self.token}" if self.token else ""
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/ws{query}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """GET ``path`` (a self-signed certificate is accepted: this is loopback)."""
        request = urllib.request.Request(self.url + path, headers=headers or {})
        context = ssl._create_unverified_context() if self.tls else None
        try:
            with urllib.request.urlopen(request, timeout=5, context=context) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            return int(exc.code), bytes(exc.read())

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.peak_rss = max(self.peak_rss, self.ps.memory_info().rss)
            except Exception:
                return

    def health(self) -> dict[str, Any]:
        status, body = self.get("/healthz")
        if status != 200:
            raise OSError(f"/healthz answered {status}")
        return dict(json.loads(body))

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Until every earlier connection's session is closed and its engine work done
        (and none is still being opened for a client that already left: it holds a place
        until it is)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            health = self.health()
            busy = ("sessions", "sessions_opening", "sessions_closing")
            if not any(health.get(key) for key in busy):
                return
            time.sleep(0.05)

    def drain(self) -> None:
        """SIGTERM: stop taking conversations, finish the open ones, then exit."""
        self.proc.send_signal(signal.SIGTERM)

    def cpu_s(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        """Stop at once, as Ctrl-C does (SIGTERM would drain: see :meth:`drain`)."""
        self._stop.set()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def client_load(
    url: str, turns: list[_Turn], barges: list[_Turn], n: int, tls: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """N clients holding conversations at once against ``url``: the clients' figures."""

    async def everyone() -> list[_ClientResult]:
        jobs = []
        for k in range(n):
            mine = [turns[(k * TURNS + j) % len(turns)] for j in range(TURNS)]
            jobs.append(_converse(url, mine, barges[k % len(barges)], seed=k, tls=tls))
        return list(await asyncio.gather(*jobs))

    wall0 = time.perf_counter()
    results = asyncio.run(everyone())
    wall = time.perf_counter() - wall0
    return {
        "clients": n,
        "turns": sum(r.turns for r in results),
        "answered": sum(r.answered for r in results),
        "voice_to_voice_ms": p50_p95([ms for r in results for ms in r.v2v_ms]),
        "barge_in_ms": p50_p95([ms for r in results for ms in r.barge_ms]),
        "barge_ins_measured": sum(len(r.barge_ms) for r in results),
        "barge_in_attempts": sum(r.barge_attempts for r in results),
        "server_voice_to_voice_ms": p50_p95([ms for r in results for ms in r.server_v2v_ms]),
        "wall_s": round(wall, 1),
        "errors": sorted({e for r in results for e in r.errors}),
    }


def largest_n(per_n: dict[str, Any]) -> int:
    """The largest N such that it and every smaller N kept voice-to-voice p95 under target
    with every turn answered."""
    largest = 0
    for row in sorted(per_n.values(), key=lambda r: int(r["clients"])):
        p95 = row["voice_to_voice_ms"]["p95"]
        if p95 is None or p95 > TARGET_P95_MS or row["answered"] < row["turns"]:
            break
        largest = int(row["clients"])
    return largest


def client_tls(url: str) -> ssl.SSLContext | None:
    """wss:// is verified, except on loopback (a balancer's self-signed certificate)."""
    if not url.startswith("wss://"):
        return None
    host = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "::1", "localhost"):
        return ssl._create_unverified_context()
    return ssl.create_default_context()


def _bench_url(
    url: str, turns: list[_Turn], barges: list[_Turn], clients: list[int]
) -> dict[str, Any]:
    """Against a server already running, or a load balancer in front of several: what
    the clients feel (the servers' CPU and memory are not this process's to see)."""
    if not url.startswith(("ws://", "wss://")):
        raise VoiceError(
            f"voice bench serve --url wants the WebSocket URL, not {url!r}.",
            "Give e.g. wss://voice.example.com/ws or ws://127.0.0.1:8765/ws "
            "(with ?token=... if the server has one).",
            code="config",
        )
    tls = client_tls(url)
    per_n = {str(n): client_load(url, turns, barges, n, tls) for n in clients}
    return {
        "url": url.split("?", 1)[0],
        "per_clients": per_n,
        "largest_n_with_p95_under_1500_ms": largest_n(per_n),
        "reply_tokens": "as the server is configured",
        "cpu_cores": os.cpu_count(),
    }


def bench_serve(
    clips: list[Clip], clients: list[int], config: str | None = None, url: str | None = None
) -> dict[str, Any]:
    """``url``: measure a server (or balancer) already running instead of starting one."""
    turns, barges = plan(clips)
    if url:
        return _bench_url(url, turns, barges, clients)
    env = {"VOICE_LLM_MAX_REPLY_TOKENS": str(BENCH_REPLY_TOKENS)}
    if config:
        env["VOICE_CONFIG"] = str(Path(config).resolve())
    server = ServerProcess(max(clients), env)
    per_n: dict[str, Any] = {}
    try:
        for n in clients:
            cpu0, wall0 = server.cpu_s(), time.perf_counter()
            server.peak_rss = 0
            row = client_load(server.ws_url, turns, barges, n)
            wall = time.perf_counter() - wall0
            row["server_cpu_percent"] = round(100.0 * (server.cpu_s() - cpu0) / wall, 1)
            row["server_peak_rss_mb"] = round(server.peak_rss / 2**20, 1)
            per_n[str(n)] = row
        cancel_ms = asyncio.run(_leave_mid_reply(server, turns))
    finally:
        server.stop()
    largest = largest_n(per_n)
    return {
        "per_clients": per_n,
        "disconnect_to_generation_stopped_ms": p50_p95(cancel_ms),
        "largest_n_with_p95_under_1500_ms": largest,
        "reply_tokens": BENCH_REPLY_TOKENS,
        "cpu_cores": os.cpu_count(),
    }
