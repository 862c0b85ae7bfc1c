"""``voice bench soak --clients 1,2,3 --minutes 3``: leave ``voice serve`` running under
real conversations, with a misbehaving client among them, and watch its memory.

For each N, N clients talk for the given minutes (real corpus speech at real
time, "stop" over some replies, a new connection every six turns, as the serve
benchmark's clients do), while one more client misbehaves throughout: malformed
messages, oversized and odd-length frames, audio faster than real time,
hanging up mid-reply, reconnecting. The run stops itself when the time is up.

Reported per N: turns and how many were answered, voice-to-voice and barge-in
p50/p95 as the well-behaved clients felt them, the errors they saw (they must
see none of the vandal's), the server's CPU, and its resident memory over time
(sampled every 5 s) with the growth per minute after the first minute, when
caches and pools have filled. Every five minutes everyone hangs up for 20 s and
the heap is read at rest: what open sessions and work in flight use comes and
goes with them, so a leak is what rises from one rest to the next.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections import Counter
from functools import partial
from typing import Any

import numpy as np

from voice.bench.conversation import BENCH_REPLY_TOKENS
from voice.bench.corpus import Clip
from voice.bench.serve import (
    TURNS,
    WAIT_S,
    ServerProcess,
    _ClientResult,
    _converse,
    _replied,
    _Turn,
    plan,
)
from voice.serve.client import VoiceClient
from voice.stats import p50_p95

RSS_EVERY_S = 5.0
PHASE_MIN = 5.0  # the clients pause this often, so that the heap at rest can be read
REST_S = 20.0  # long enough for the last sessions to close and the freed heap to go back
HELLO = json.dumps({"type": "hello", "protocol": 1, "sample_rate": 16000, "format": "pcm16"})


class RssLog:
    """The server's resident memory every few seconds, on a thread."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.samples: list[tuple[float, float]] = []  # (seconds since start, MB)
        self.anon: list[tuple[float, float]] = []  # the heap's share (Linux), same times
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def _run(self) -> None:
        while True:
            t = round(self.elapsed(), 1)
            self.samples.append((t, round(self.server.ps.memory_info().rss / 2**20, 1)))
            anon = _anonymous_mb(self.server.ps.pid)
            if anon is not None:
                self.anon.append((t, anon))
            if self._stop.wait(RSS_EVERY_S):
                return

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        return {
            "rss_mb_start": self.samples[0][1],
            "rss_mb_end": self.samples[-1][1],
            "rss_mb_max": max(mb for _, mb in self.samples),
            "rss_growth_mb_per_min_after_1_min": _growth(self.samples),
            # Resident memory counts the memory-mapped model files as their pages are
            # touched (bounded by the files' size); anonymous memory is the heap, where
            # a leak would show.
            "anon_mb_start": self.anon[0][1] if self.anon else None,
            "anon_mb_end": self.anon[-1][1] if self.anon else None,
            "anon_growth_mb_per_min_after_1_min": _growth(self.anon),
            "rss_mb_over_time": self.samples,
            "anon_mb_over_time": self.anon,
        }


def _growth(samples: list[tuple[float, float]]) -> float | None:
    """MB per minute, a least-squares line through the samples after the first minute."""
    settled = [(t, mb) for t, mb in samples if t >= 60.0]
    if len(settled) < 3:
        return None
    t, mb = np.array(settled).T
    return round(float(np.polyfit(t / 60.0, mb, 1)[0]), 1)


def _anonymous_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _at_rest(server: ServerProcess, elapsed_s: float) -> dict[str, Any]:
    """The server's heap with no one connected, and where it lives: glibc's main heap,
    and the other anonymous mappings (thread arenas, model buffers, onnxruntime); and
    what of it is live (the server's own ``/metrics``): a leak grows the C heap in use
    or Python's blocks, while memory glibc only keeps after a free grows neither."""
    brk_kb = other_kb = mappings = 0
    with open(f"/proc/{server.ps.pid}/smaps") as smaps:
        name = ""
        for line in smaps:
            head = line.split()
            if "-" in head[0] and ":" not in head[0]:  # a mapping's first line
                name = head[5] if len(head) > 5 else ""
            elif head[0] == "Anonymous:" and int(head[1]):
                if name == "[heap]":
                    brk_kb += int(head[1])
                elif not name:
                    other_kb += int(head[1])
                    mappings += 1
    return {
        "minute": round(elapsed_s / 60.0, 1),
        "anon_mb": _anonymous_mb(server.ps.pid),
        "main_heap_mb": round(brk_kb / 1024, 1),
        "other_anon_mb": round(other_kb / 1024, 1),
        "other_anon_mappings": mappings,
        "llm_contexts": server.health().get("llm_contexts"),
        **_live_heap(server),
    }


def _live_heap(server: ServerProcess) -> dict[str, float]:
    status, body = server.get("/metrics")
    gauges = {}
    for line in body.decode().splitlines() if status == 200 else []:
        name, _, value = line.partition(" ")
        if name in ("voice_heap_in_use_bytes", "voice_heap_free_bytes"):
            gauges[name.removeprefix("voice_").replace("_bytes", "_mb")] = round(
                float(value) / 2**20, 1
            )
        elif name == "voice_python_allocated_blocks":
            gauges["python_blocks"] = int(float(value))
    return gauges


async def _talk_until(
    url: str, turns: list[_Turn], barge: _Turn, deadline: float, seed: int
) -> _ClientResult:
    """One well-behaved user: conversations of six turns, back to back, until the time
    is up (each conversation is a new connection)."""
    total = _ClientResult()
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        mine = [turns[rng.randrange(len(turns))] for _ in range(TURNS)]
        try:
            _add(total, await _converse(url, mine, barge, seed=rng.randrange(1 << 30)))
        except ConnectionError as exc:  # "server full": try again later, as told
            total.errors.append(f"refused: {exc}"[:120])
            await asyncio.sleep(1.0)
    return total


def _add(total: _ClientResult, result: _ClientResult) -> None:
    for name in ("v2v_ms", "barge_ms", "server_v2v_ms", "errors"):
        getattr(total, name).extend(getattr(result, name))
    total.turns += result.turns
    total.answered += result.answered


async def _vandal(url: str, turns: list[_Turn], deadline: float) -> dict[str, int]:
    """A client with every fault a client can have, over and over until the time is up."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    done = {"bad_messages": 0, "floods": 0, "hang_ups_mid_reply": 0, "refused": 0}
    rng = random.Random(7)
    while time.monotonic() < deadline:
        try:
            async with connect(url, max_size=2**20) as ws:
                await ws.send(HELLO)
                for bad in ('{"type": "dance"}', "{oops", b"\x00" * 641, b"\x00" * 20000,
                            '{"type": "played", "reply_id": -1, "samples": 5}'):  # fmt: skip
                    await ws.send(bad)
                    done["bad_messages"] += 1
                frame = np.zeros(320, dtype="<i2").tobytes()
                for _ in range(800):  # 16 s of audio at once: dropped, then cut off
                    await ws.send(frame)
                done["floods"] += 1
                await asyncio.sleep(1.0)
        except ConnectionClosed:
            pass
        except OSError:
            done["refused"] += 1
        try:
            async with VoiceClient(url) as client:
                turn = turns[rng.randrange(len(turns))]
                sent = client.say(turn.audio, turn.onset_s, turn.end_s)
                await client.wait_for(partial(_replied, client, sent), WAIT_S, "a reply")
                await asyncio.sleep(0.2)
            done["hang_ups_mid_reply"] += 1  # closed while the reply plays
        except (TimeoutError, ConnectionError, OSError):
            done["refused"] += 1
        await asyncio.sleep(1.0)
    return done


async def _phase(
    url: str, turns: list[_Turn], barges: list[_Turn], n: int, deadline: float
) -> tuple[list[_ClientResult], dict[str, int]]:
    """N users and the vandal until ``deadline``."""
    users = [_talk_until(url, turns, barges[k % len(barges)], deadline, k) for k in range(n)]
    done, mischief = await asyncio.gather(asyncio.gather(*users), _vandal(url, turns, deadline))
    return list(done), mischief


def bench_soak(clips: list[Clip], clients: list[int], minutes: float) -> dict[str, Any]:
    turns, barges = plan(clips)
    env = {"VOICE_LLM_MAX_REPLY_TOKENS": str(BENCH_REPLY_TOKENS)}
    server = ServerProcess(max(clients) + 1, env)
    per_n: dict[str, Any] = {}
    try:
        for n in clients:
            server.wait_idle(30)
            rss = RssLog(server)
            cpu0, wall0 = server.cpu_s(), time.perf_counter()
            results = [_ClientResult() for _ in range(n)]
            vandal: Counter[str] = Counter()
            at_rest: list[dict[str, Any]] = []

            end = time.monotonic() + minutes * 60.0
            while time.monotonic() < end - 1.0:
                deadline = min(end, time.monotonic() + PHASE_MIN * 60.0)
                done, mischief = asyncio.run(_phase(server.ws_url, turns, barges, n, deadline))
                for total, result in zip(results, done, strict=True):
                    _add(total, result)
                vandal.update(mischief)
                time.sleep(REST_S)  # every session closed: the server settles
                at_rest.append(_at_rest(server, rss.elapsed()))
            wall = time.perf_counter() - wall0
            health = server.health()
            per_n[str(n)] = {
                "clients": n,
                "minutes": round(wall / 60.0, 1),
                "turns": sum(r.turns for r in results),
                "answered": sum(r.answered for r in results),
                "voice_to_voice_ms": p50_p95([ms for r in results for ms in r.v2v_ms]),
                "server_voice_to_voice_ms": p50_p95(
                    [ms for r in results for ms in r.server_v2v_ms]
                ),
                "barge_in_ms": p50_p95([ms for r in results for ms in r.barge_ms]),
                "errors_seen_by_users": sorted({e for r in results for e in r.errors}),
                "vandal": dict(vandal),
                # The heap with no one connected, after each phase: a leak shows here
                # as a rise from phase to phase; what busy sessions use does not.
                "anon_mb_at_rest": at_rest,
                "server_cpu_percent": round(100.0 * (server.cpu_s() - cpu0) / wall, 1),
                "server_alive": server.proc.poll() is None and health["status"] == "ok",
                **rss.stop(),
            }
    finally:
        server.stop()
    return {"per_clients": per_n, "reply_tokens": BENCH_REPLY_TOKENS}
