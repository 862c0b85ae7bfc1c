"""A Python client of the browser protocol that behaves like the web page.

It streams a "microphone" at real time (queued clips, silence in between),
plays the downlink at real time, obeys pause/resume/clear at once and reports
what it played, exactly as ``web/app.js`` does. Tests and ``voice bench
serve`` drive the server through it, and it measures latency the way a user
would: from the end of the user's speech (the moment its last voiced sample
was sent) to the first reply sample played, and from the onset of a
barge-in to the moment playback stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from websockets.asyncio.client import ClientConnection, connect

from voice.audio.format import to_pcm16
from voice.serve.protocol import FORMAT, FRAME_MS, PROTOCOL_VERSION, parse_downlink
from voice.transports.playback import PlaybackQueue

Float32Array = npt.NDArray[np.float32]
REPORT_EVERY_S = 0.1
# A client this far behind its microphone clock (its process was starved of CPU)
# lets the clock slip instead of sending the backlog in one clump: a clump over the
# server's burst allowance (a second) is dropped as audio faster than real time.
MAX_CATCH_UP_S = 0.3


@dataclass
class SentClip:
    """A clip on the microphone; times are ``time.monotonic()`` when those samples left."""

    onset_sample: int
    end_sample: int
    onset_t: float | None = None
    speech_end_t: float | None = None
    done_t: float | None = None


@dataclass
class ReplyPlayback:
    first_played_t: float | None = None
    stopped_t: float | None = None  # a pause or clear stopped it
    played: int = 0
    received: int = 0
    reported: int = 0  # the last count sent to the server


@dataclass
class VoiceClient:
    url: str
    rate: int = 16000
    ssl_context: ssl.SSLContext | None = None  # wss:// with a certificate of one's own
    # The conversation to go on with (a reconnect); set from ``ready`` once connected.
    conversation_id: str | None = None
    # Tools this client declares in its hello (web/PROTOCOL.md); it answers their
    # tool_call messages itself, with :meth:`send_json`.
    tools: list[dict[str, Any]] | None = None
    ready: dict[str, Any] = field(default_factory=dict)  # the server's ready message
    ws: ClientConnection | None = None
    messages: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    replies: dict[int, ReplyPlayback] = field(default_factory=dict)
    played_audio: list[Float32Array] = field(default_factory=list)
    _mic: deque[tuple[SentClip, Float32Array]] = field(default_factory=deque)
    _playback: PlaybackQueue = field(default_factory=PlaybackQueue)
    _cleared: set[int] = field(default_factory=set)
    _sent_samples: int = 0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    close_code: int | None = None

    async def __aenter__(self) -> VoiceClient:
        if self.ssl_context is not None:
            self.ws = await connect(
                self.url, max_size=2**20, compression=None, ssl=self.ssl_context
            )
        else:
            self.ws = await connect(self.url, max_size=2**20, compression=None)
        hello = {"type": "hello", "protocol": PROTOCOL_VERSION, "sample_rate": self.rate}
        if self.conversation_id:
            hello["conversation_id"] = self.conversation_id
        if self.tools is not None:
            hello["tools"] = self.tools
        await self.ws.send(json.dumps({**hello, "format": FORMAT}))
        ready = json.loads(await self.ws.recv())
        if ready.get("type") != "ready":
            raise ConnectionError(f"server refused: {ready}")
        self.ready = ready
        self.conversation_id = ready.get("conversation_id") or None
        self._tasks = [asyncio.create_task(self._receive()), asyncio.create_task(self._tick())]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.ws is not None:
            await self.ws.close()

    async def send_json(self, message: dict[str, Any]) -> None:
        """Send a text message (a ``tool_result``, say)."""
        assert self.ws is not None
        await self.ws.send(json.dumps(message))

    # -- the microphone ------------------------------------------------------------------

    def say(
        self, audio: Float32Array, onset_s: float = 0.0, end_s: float | None = None
    ) -> SentClip:
        """Queue ``audio`` (at the client's rate) on the microphone; ``onset_s`` and
        ``end_s`` mark where its speech starts and ends, for the latency figures."""
        end = len(audio) if end_s is None else int(end_s * self.rate)
        start = self._sent_samples + sum(len(a) for _, a in self._mic)
        clip = SentClip(start + int(onset_s * self.rate), start + end)
        self._mic.append((clip, np.asarray(audio, dtype=np.float32)))
        return clip

    def _next_mic_frame(self, now: float) -> Float32Array:
        n = self.rate * FRAME_MS // 1000
        frame = np.zeros(n, dtype=np.float32)
        filled = 0
        while filled < n and self._mic:
            clip, audio = self._mic[0]
            take = min(n - filled, len(audio))
            frame[filled : filled + take] = audio[:take]
            filled += take
            if take == len(audio):
                self._mic.popleft()
                clip.done_t = now
            else:
                self._mic[0] = (clip, audio[take:])
        return frame

    def _mark_sent(self, first: int, count: int, now: float) -> None:
        """Call before the frame [first, first + count) is taken off the queue."""
        for clip, _ in self._mic:
            if clip.onset_t is None and first <= clip.onset_sample < first + count:
                clip.onset_t = now
            if clip.speech_end_t is None and first < clip.end_sample <= first + count:
                clip.speech_end_t = now

    # -- the loop: one microphone frame out, one frame of playback, every 20 ms ------------

    async def _tick(self) -> None:
        assert self.ws is not None
        period = FRAME_MS / 1000.0
        n = self.rate * FRAME_MS // 1000
        next_t = time.monotonic()
        last_report = 0.0
        while True:
            now = time.monotonic()
            self._mark_sent(self._sent_samples, n, now)
            frame = self._next_mic_frame(now)
            await self.ws.send(to_pcm16(frame))
            self._sent_samples += n
            self.played_audio.append(self._play_frame(n, now))
            if now - last_report >= REPORT_EVERY_S:
                last_report = now
                await self._report()
            next_t = max(next_t + period, time.monotonic() - MAX_CATCH_UP_S)
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))

    def _play_frame(self, n: int, now: float) -> Float32Array:
        out, moved = self._playback.take(n)
        for reply_id, samples in moved.items():
            state = self.replies.setdefault(reply_id, ReplyPlayback())
            if state.first_played_t is None:
                state.first_played_t = now
                self._changed.set()
            state.played += samples
        return out

    async def _report(self) -> None:
        """Tell the server what was played of each reply that played since the last report."""
        assert self.ws is not None
        for reply_id, state in self.replies.items():
            if reply_id in self._cleared or state.played == state.reported:
                continue
            state.reported = state.played
            report = {"type": "played", "reply_id": reply_id, "samples": state.played}
            await self.ws.send(json.dumps(report))

    # -- the downlink ----------------------------------------------------------------------

    async def _receive(self) -> None:
        assert self.ws is not None
        try:
            async for raw in self.ws:
                now = time.monotonic()
                if isinstance(raw, bytes):
                    reply_id, _offset, audio = parse_downlink(raw)
                    if self._playback.add(reply_id, audio):
                        self.replies.setdefault(reply_id, ReplyPlayback()).received += len(audio)
                    continue
                msg = json.loads(raw)
                self.messages.append((now, msg))
                kind, reply_id = msg.get("type"), msg.get("reply_id")
                if kind in ("pause", "clear") and isinstance(reply_id, int):
                    state = self.replies.setdefault(reply_id, ReplyPlayback())
                    if state.stopped_t is None:
                        state.stopped_t = now
                    if kind == "pause":
                        self._playback.pause(reply_id)
                    else:
                        self._cleared.add(reply_id)
                        self._playback.clear(reply_id)
                elif kind == "resume" and isinstance(reply_id, int):
                    self._playback.resume(reply_id)
                    self.replies.setdefault(reply_id, ReplyPlayback()).stopped_t = None
                self._changed.set()
        finally:
            self.closed = True
            self.close_code = self.ws.close_code
            self._changed.set()

    # -- waiting -------------------------------------------------------------------------

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [msg for _, msg in self.messages if msg.get("type") == kind]

    async def wait_for(
        self, predicate: Callable[[], bool], timeout_s: float, what: str = "condition"
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if self.closed:
                raise ConnectionError(f"connection closed ({self.close_code}) waiting for {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {what} within {timeout_s} s")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.1))

    def message_count(self, kind: str) -> int:
        return len(self.of_type(kind))
