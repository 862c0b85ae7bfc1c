"""``voice serve``: the static web client and the WebSocket endpoint on one port.

Each connection gets its own session on the shared :class:`EngineHub`. The
connection is a thin shell: it turns binary frames into 16 kHz audio for the
session, the session's events into JSON, its ``Play`` actions into paced
downlink frames, and the client's ``played`` reports into playback positions
(so history keeps only what the user heard). A bad message gets an ``error``
and the session goes on; only a protocol violation closes the connection.

Behind a load balancer (:mod:`voice.serve.lifecycle`): ``/readyz`` says whether
this worker takes new conversations, and SIGTERM drains it (each open
conversation ends after its current reply, with close code 1001 and a
``going_away`` message) before it stops.

Conversations outlive their connection (:mod:`voice.serve.store`): ``ready``
gives each an id, a client that reconnects with it goes on where it was (on
any worker sharing the store), and its history as heard, persona and chosen
settings are saved after every reply.

Guards for a server left running: the token and origin check at the HTTP
upgrade (:mod:`voice.serve.access`), per-connection limits on audio rate, idle
time and session length (:mod:`voice.serve.limits`), ``/metrics`` for
Prometheus (:mod:`voice.serve.metrics`) and opt-in JSONL transcripts.

A page may declare tools in its hello (:mod:`voice.serve.pagetools`): they join
that session's tools, and their calls go to the page, which answers them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import signal
import ssl
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from voice.audio.checks import ByteOrderWatch
from voice.audio.format import SAMPLE_RATE
from voice.audio.resample import Resampler, resample
from voice.conversation.actions import Clear, Pause, Play, Resume
from voice.conversation.transcript import TranscriptWriter
from voice.errors import VoiceError
from voice.events import Event
from voice.runtime.hub import EngineHub, HubSession, ServerFull
from voice.runtime.memory import heap_usage
from voice.serve.access import Access
from voice.serve.lifecycle import DRAIN_POLL_S, DRAIN_S, GOING_AWAY_TEXT, Lifecycle
from voice.serve.limits import Limits, LoopLag, RateGuard
from voice.serve.metrics import CONTENT_TYPE, ServerMetrics
from voice.serve.pacing import Pacer
from voice.serve.pagetools import PageTools
from voice.serve.phases import TurnTimeline, TurnTracker
from voice.serve.protocol import (
    CLOSE_GOING_AWAY,
    CLOSE_POLICY,
    CLOSE_TRY_AGAIN,
    FORMAT,
    FRAME_MS,
    MAX_MESSAGE_BYTES,
    PROTOCOL_VERSION,
    Hello,
    Played,
    ProtocolError,
    ProtocolViolation,
    Talk,
    ToolAnswer,
    downlink_frame,
    error_message,
    message,
    parse_audio,
    parse_text,
)
from voice.serve.store import (
    STORE_TTL_S,
    Conversations,
    ConversationState,
    StoreUnavailable,
    make_store,
    new_conversation_id,
    valid_conversation_id,
)
from voice.serve.tracing import TraceConfig, TurnTracer, make_tracer
from voice.tools.choose import Chooser
from voice.tools.declared import declared_tools
from voice.tools.schema import Tool, ToolError
from voice.transports.playback import PlayedLedger

log = logging.getLogger(__name__)

WEB_DIR = Path(__file__).resolve().parents[2] / "web"
WS_PATH = "/ws"
HELLO_TIMEOUT_S = 10.0
MAX_ERRORS_IN_A_ROW = 50  # then the client is broken, not unlucky: close it
# Events that change the history: the conversation is saved after each.
SAVE_AFTER = frozenset({"reply_end", "turn_continued", "turn_restored"})


@dataclass
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8765
    max_sessions: int = 4
    lead_ms: float = 200.0
    web_dir: Path = WEB_DIR
    access: Access = field(default_factory=Access)
    limits: Limits = field(default_factory=Limits)
    certfile: str = ""  # TLS: serve https/wss directly (else use a reverse proxy)
    keyfile: str = ""
    transcripts: Path | None = None  # a JSONL transcript per session goes here
    record_audio: bool = False  # and, only if asked, each session's microphone audio
    drain_s: float = DRAIN_S  # on SIGTERM: how long open conversations may go on
    store: str = "memory"  # where conversations are kept: memory, or redis://HOST:PORT/DB
    store_ttl_s: float = STORE_TTL_S  # a conversation is forgotten this long after its last save
    traces: TraceConfig = field(default_factory=TraceConfig)  # OpenTelemetry, per turn
    # How a session chooses among tools a page declared in its hello (the composition
    # layer makes it: the [tools] settings and the sentence encoder); None: pages may
    # declare none. A session that has tools already uses its own chooser's.
    tool_chooser: Callable[[Sequence[Tool]], Chooser] | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.certfile:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.certfile, self.keyfile or None)
        except (OSError, ssl.SSLError) as exc:
            raise VoiceError(
                f"cannot load the TLS certificate {self.certfile}: {exc}.",
                "Pass a PEM certificate with --certfile and its key with --keyfile.",
                code="config",
            ) from exc
        return context


# -- static files ----------------------------------------------------------------------

_TYPES = {".js": "text/javascript", ".mjs": "text/javascript", ".html": "text/html"}


def static_response(web_dir: Path, path: str) -> Response:
    """The file under ``web_dir`` for a GET of ``path`` (``/`` is index.html), or 404."""
    relative = path.split("?", 1)[0].lstrip("/") or "index.html"
    root = web_dir.resolve()
    target = (root / relative).resolve()
    if root not in target.parents or not target.is_file():
        return _response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
    kind = _TYPES.get(target.suffix) or mimetypes.guess_type(target.name)[0] or "text/plain"
    return _response(HTTPStatus.OK, target.read_bytes(), kind)


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers()
    headers["Content-Type"] = (
        f"{content_type}; charset=utf-8" if content_type.startswith("text/") else content_type
    )
    headers["Content-Length"] = str(len(body))
    headers["Cache-Control"] = "no-cache"
    return Response(status.value, status.phrase, headers, body)


# -- one connection ---------------------------------------------------------------------


class Connection:
    def __init__(
        self,
        ws: ServerConnection,
        hub: EngineHub,
        config: ServeConfig,
        metrics: ServerMetrics | None = None,
        on_event: Callable[[Event], None] | None = None,
        loop_lag: LoopLag | None = None,
        lifecycle: Lifecycle | None = None,
        conversations: Conversations | None = None,
        tracer: TurnTracer | None = None,
    ) -> None:
        self.ws = ws
        self.tracer = tracer
        self.turns = TurnTracker()  # the timings metrics and traces derive from events
        self.lifecycle = lifecycle or Lifecycle(config.drain_s)
        self.went_away = False  # closed by a drain (1001), not by the client
        self.conversations = conversations or Conversations(make_store("memory"))
        self.conversation_id = ""
        self._unsaved = False
        self._saver: asyncio.Task[None] | None = None
        self._store_down = False  # the client was told; told again only after a recovery
        self.on_event = on_event
        self.hub = hub
        self.config = config
        self.metrics = metrics or ServerMetrics()
        self.rate_guard = RateGuard(config.limits.burst_s, config.limits.flood_s, loop_lag)
        self.transcript: TranscriptWriter | None = None
        self._too_fast_reported = -1.0
        self._byte_order = ByteOrderWatch()
        self.loop = asyncio.get_running_loop()
        self.wake = asyncio.Event()
        self._send_rounds = 0  # rounds the sender has finished: each took and sent all output
        self.rate = SAMPLE_RATE
        self.errors_in_a_row = 0
        self.hub_session: HubSession | None = None
        self.pacer: Pacer | None = None
        self.uplink: Resampler | None = None
        self._ledger = PlayedLedger()  # client samples played -> the session's 16 kHz count
        self._sending: set[int] = set()  # replies between audio_start and audio_end
        self.page_tools: PageTools | None = None  # the tools the page declared, if any

    async def run(self) -> None:
        try:
            hello = await asyncio.wait_for(self._await_hello(), HELLO_TIMEOUT_S)
        except TimeoutError:
            await self._close(CLOSE_POLICY, "no hello", "hello_timeout", "Send hello first.")
            return
        except ProtocolViolation as exc:
            await self._close(exc.close_code, exc.code, exc.code, str(exc))
            return
        if hello is None:
            return  # gone before the handshake
        if self.lifecycle.draining:  # it began while this client said hello
            await self._go_away()
            return
        self.conversation_id, state, notices = await self._conversation(hello.conversation_id)
        try:
            self.hub_session = await self._open_session()
        except ServerFull as exc:
            self.metrics.refuse(exc.code)
            await self._close(CLOSE_TRY_AGAIN, "server full", exc.code, str(exc))
            return
        self.metrics.sessions_opened += 1
        sender: asyncio.Task[None] | None = None
        drainer: asyncio.Task[None] | None = None
        ending = "client closed"
        try:  # from here on, whatever happens, the session is closed
            if state is not None:
                state, restore_notice = self._restore(state)
                notices += restore_notice
            greeting = self.hub.greeting
            if greeting and state is None:  # a conversation that goes on is not greeted again
                with self.hub_session.lock:
                    self.hub_session.session.say(greeting)
            if self.config.transcripts is not None:
                self.transcript = TranscriptWriter(
                    self.config.transcripts,
                    f"{self.metrics.sessions_opened:05d}",
                    self.config.record_audio,
                )
            self.rate = hello.sample_rate
            self.pacer = Pacer(self.rate, self.config.lead_ms)
            self.uplink = Resampler(self.rate, SAMPLE_RATE)
            declared: dict[str, Any] = {}
            if hello.tools is not None:  # only a page that declares tools sees the field
                names, tool_notices = await self._declare_tools(hello.tools)
                declared["tools"] = names
                notices += tool_notices
            await self.ws.send(
                message(
                    "ready",
                    protocol=PROTOCOL_VERSION,
                    sample_rate=self.rate,
                    format=FORMAT,
                    frame_ms=FRAME_MS,
                    conversation_id=self.conversation_id,
                    resumed=state is not None,
                    history_messages=len(state.history["turns"]) if state is not None else 0,
                    **declared,
                )
            )
            for notice in notices:
                await self.ws.send(notice)
            sender = asyncio.create_task(self._send_loop())
            sender.add_done_callback(self._sender_done)
            drainer = asyncio.create_task(self._drain_after_reply())
            await self._receive_loop()
            if self.went_away:
                ending = "going_away"
        except ProtocolViolation as exc:
            ending = exc.code
            await self._close(exc.close_code, exc.code, exc.code, str(exc))
        finally:
            if drainer is not None:
                drainer.cancel()
            if self.page_tools is not None:
                self.page_tools.close()  # calls still waiting on the page end now
            final = self._snapshot()  # before the engine thread closes the session
            self.hub.close(self.hub_session)  # cancels its generation at once
            await self._save_last(final)
            try:
                if sender is not None:
                    sender.cancel()
                    with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
                        await sender
            except Exception:  # already logged by _sender_done
                pass
            finally:
                if self.transcript is not None:
                    self.transcript.close(ending)

    # -- the conversation's state ----------------------------------------------------

    async def _conversation(
        self, asked: str | None
    ) -> tuple[str, ConversationState | None, list[str]]:
        """The id and saved state to go on with (a new id and None for a new conversation),
        and the messages that tell the client why it did not go on as it asked."""
        if asked is None:
            return new_conversation_id(), None, []
        state: ConversationState | None = None
        notices: list[str] = []
        if valid_conversation_id(asked):
            state, failure = await self.conversations.load(asked)
            if failure is not None:
                self._store_down = True
                notices.append(self._error(failure))
        if state is not None:
            return asked, state, notices
        if notices:
            why = "could not be looked up (the conversation store is unavailable)"
        else:
            hours = self.conversations.ttl_s / 3600.0
            why = (f"was not found: it expired ({hours:g} h after its last turn), belongs to "
                   "another service, or never existed")  # fmt: skip
        notices.append(
            self._error(
                VoiceError(
                    f"the conversation you asked to go on with {why}; a new conversation "
                    "has started.",
                    "Keep the conversation_id that 'ready' gives and send it in hello.",
                    code="conversation_not_found",
                )
            )
        )
        return new_conversation_id(), None, notices

    def _restore(self, state: ConversationState) -> tuple[ConversationState | None, list[str]]:
        """Put a saved conversation into the new session (None: it could not be read, and
        the session starts afresh with a message saying so)."""
        assert self.hub_session is not None
        session = self.hub_session.session
        try:
            with self.hub_session.lock:
                session.history.restore(state.history)
                session.push_to_talk = bool(state.settings.get("push_to_talk", False))
        except ValueError as exc:
            log.warning("a stored conversation could not be restored: %s", exc)
            self.conversation_id = new_conversation_id()
            error = VoiceError(
                "the saved conversation could not be read; a new conversation has started.",
                code="conversation_not_found",
            )
            return None, [self._error(error)]
        return state, []

    async def _declare_tools(self, declared: Any) -> tuple[list[str], list[str]]:
        """Register the tools the page declared for this session only, next to any it
        has; the names registered, and an error message per declaration refused."""
        assert self.hub_session is not None
        session = self.hub_session.session
        with self.hub_session.lock:
            current = session.tools
        if current is None and self.config.tool_chooser is None:
            error = ToolError(
                "this server takes no tools from pages; the tools declared are ignored.",
                code="tools_unavailable",
            )
            return [], [self._error(error)]
        mine = list(current.tools) if current is not None else []
        bridge = PageTools()
        tools, errors = declared_tools(declared, bridge.dispatch, [t.name for t in mine])
        notices = [self._error(e) for e in errors]
        if not tools:
            return [], notices

        def choose() -> Chooser:  # embeds the tools' descriptions: off the event loop
            if current is not None:
                return Chooser([*mine, *tools], current.embedder, current.config)
            assert self.config.tool_chooser is not None
            return self.config.tool_chooser([*mine, *tools])

        try:
            chooser = await asyncio.to_thread(choose)
        except Exception as exc:  # the encoder failed: the conversation goes on without them
            log.exception("the page's tools could not be registered")
            error = ToolError(
                f"the page's tools could not be registered: {exc}.", code="tools_unavailable"
            )
            return [], [*notices, self._error(error)]
        bridge.time_limit_s = chooser.config.time_limit_s
        bridge.limits = {t.name: t.time_limit_s for t in tools if t.time_limit_s is not None}
        with self.hub_session.lock:
            session.tools = chooser
        self.page_tools = bridge
        return [t.name for t in tools], notices

    def _on_tool_answer(self, answer: ToolAnswer) -> None:
        """The page answered a call of its tool: the session takes it on its next poll
        (the next frame, or the engine thread, poked now)."""
        if self.page_tools is None:
            raise ProtocolError(
                f"tool_result for call {answer.call_id}, but this page declared no tools.",
                "Declare tools in hello (see web/PROTOCOL.md).",
                code="unknown_call",
            )
        if self.page_tools.answer(answer):
            self.hub.poke()
            self.wake.set()

    def _error(self, error: VoiceError) -> str:
        self.metrics.error(error.code)
        return error_message(error)

    def _snapshot(self) -> ConversationState | None:
        if self.hub_session is None:
            return None
        with self.hub_session.lock:
            session = self.hub_session.session
            return ConversationState(
                session.history.snapshot(), {"push_to_talk": session.push_to_talk}, time.time()
            )

    def _save_soon(self) -> None:
        """Save the conversation as it is now, off this loop; saves never queue up (the
        latest state wins) and never hold up the conversation."""
        self._unsaved = True
        if self._saver is None or self._saver.done():
            self._saver = asyncio.create_task(self._save_loop())

    async def _save_loop(self) -> None:
        while self._unsaved:
            self._unsaved = False
            state = self._snapshot()
            if state is not None:
                await self._saved(await self.conversations.save(self.conversation_id, state))

    async def _saves_done(self) -> None:
        """Until the save in flight (if any) is done: each is bounded by the store's
        timeout, and it is not cancelled (a later save must not be overtaken by it)."""
        saver = self._saver
        if saver is not None and not saver.done():
            await asyncio.wait({saver}, timeout=2 * self.conversations.timeout_s + 1.0)

    async def _save_last(self, state: ConversationState | None) -> None:
        """The state at the close (the connection is gone: waiting costs no one), after
        the save in flight, so that the last word is the latest state."""
        self._unsaved = False
        await self._saves_done()
        if state is not None and self.conversation_id:
            await self.conversations.save(self.conversation_id, state)

    async def _saved(self, failure: StoreUnavailable | None) -> None:
        """Tell the client once that its conversation lives only in this server now."""
        if failure is None:
            self._store_down = False
            return
        if self._store_down:
            return
        self._store_down = True
        log.warning("conversation store: %s", failure)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(self._error(failure))

    async def _drain_after_reply(self) -> None:
        """Once the worker drains: wait until nothing is being heard, thought, said or
        played (the reply in progress was heard to its end and is in the history), or
        until the drain's deadline, then send the client away to reconnect elsewhere."""
        assert self.hub_session is not None
        await self.lifecycle.wait_drain_started()
        while self.lifecycle.time_left() > 0:
            with self.hub_session.lock:
                if not self.hub_session.session.busy:
                    break
            await asyncio.sleep(DRAIN_POLL_S)
        # The reply's last events (its reply_end) may still wait for the sender: let a
        # whole round of it begin after this one (it takes and sends them) and end
        # before the going-away, which would otherwise overtake them.
        under_way = self._send_rounds + 1
        while self._send_rounds <= under_way and self.lifecycle.time_left() > 0:
            self.wake.set()
            await asyncio.sleep(DRAIN_POLL_S)
        await self._saves_done()  # the reply just heard is in the store before the client moves
        await self._go_away()

    async def _go_away(self) -> None:
        self.went_away = True
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(message("going_away", code="draining", message=GOING_AWAY_TEXT))
            await self.ws.close(CLOSE_GOING_AWAY, "server going away")

    def _sender_done(self, task: asyncio.Task[None]) -> None:
        """A sender that died of a bug must not leave a session that hears but never
        answers: log it and close the connection (the client reconnects)."""
        if task.cancelled() or isinstance(task.exception(), ConnectionClosed):
            return
        log.error("sending to a client failed", exc_info=task.exception())
        task.get_loop().create_task(self.ws.close(1011, "internal error"))

    async def _open_session(self) -> HubSession:
        """Open a session on a worker thread: building one may wait for an LLM context
        (made, or coming back from a session that just closed), and the event loop
        carries every other user's audio meanwhile. If this connection's task is
        cancelled while it opens, the session is closed as soon as it exists."""
        opening = asyncio.ensure_future(asyncio.to_thread(self.hub.open, self._wake_threadsafe))
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(self._close_orphan)
            raise

    def _close_orphan(self, opening: asyncio.Future[HubSession]) -> None:
        if not opening.cancelled() and opening.exception() is None:
            self.hub.close(opening.result())

    def _wake_threadsafe(self) -> None:
        self.loop.call_soon_threadsafe(self.wake.set)

    async def _close(self, code: int, reason: str, error_code: str, text: str) -> None:
        self.metrics.error(error_code)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(message("error", code=error_code, message=text))
            await self.ws.close(code, reason)

    async def _await_hello(self) -> Hello | None:
        async for raw in self.ws:
            try:
                if isinstance(raw, bytes):
                    raise ProtocolError(
                        "audio arrived before hello.",
                        f'Send {{"type": "hello", "protocol": {PROTOCOL_VERSION}, '
                        f'"sample_rate": 16000, "format": "{FORMAT}"}} first.',
                        code="not_ready",
                    )
                parsed = parse_text(raw)
                if isinstance(parsed, Hello):
                    return parsed
                raise ProtocolError("send hello first.", code="not_ready")
            except ProtocolError as exc:
                await self._report(exc)
        return None

    async def _report(self, error: VoiceError) -> None:
        self.errors_in_a_row += 1
        if self.errors_in_a_row > MAX_ERRORS_IN_A_ROW:
            raise ProtocolViolation(
                f"more than {MAX_ERRORS_IN_A_ROW} bad messages in a row.",
                "Fix the client; see web/PROTOCOL.md.",
                code="too_many_errors",
                close_code=CLOSE_POLICY,
            )
        self.metrics.error(error.code)
        with contextlib.suppress(ConnectionClosed):
            await self.ws.send(error_message(error))

    async def _next_message(self, session_end: float) -> str | bytes | None:
        """The next message, or None when the client closed; raises ProtocolViolation
        when the client went quiet or the session reached its maximum length."""
        limits = self.config.limits
        left = session_end - time.monotonic()
        try:
            return await asyncio.wait_for(self.ws.recv(), min(limits.idle_timeout_s, left))
        except ConnectionClosed:
            return None
        except TimeoutError:
            if time.monotonic() >= session_end:
                raise ProtocolViolation(
                    f"this session reached its maximum length of {limits.max_session_s:.0f} s.",
                    "Reconnect to go on talking (the server's --max-session-s sets the limit).",
                    code="session_too_long",
                    close_code=CLOSE_POLICY,
                ) from None
            raise ProtocolViolation(
                f"nothing arrived for {limits.idle_timeout_s:.0f} s.",
                "A client sends audio continuously while it listens; reconnect to go on "
                "(the server's --idle-timeout-s sets the limit).",
                code="idle_timeout",
                close_code=CLOSE_POLICY,
            ) from None

    def _admit(self, audio: np.ndarray) -> bool:
        """Audio at most real time (plus a burst); a flood closes the connection."""
        now = time.monotonic()
        if self.rate_guard.admit(len(audio) / self.rate, now):
            return True
        if self.rate_guard.flooding(now):
            raise ProtocolViolation(
                f"audio arrived more than {self.config.limits.flood_s:.0f} s ahead of real time.",
                "Send the microphone's audio as it is captured, 20 ms at a time.",
                code="too_fast",
                close_code=CLOSE_POLICY,
            )
        if now - self._too_fast_reported < 1.0:
            return False  # dropped; the client was told less than a second ago
        self._too_fast_reported = now
        speed = self.rate_guard.speed(now)
        raise ProtocolError(
            f"audio is arriving at {speed:.1f}x real time; the excess was dropped.",
            "Send the microphone's audio as it is captured, 20 ms at a time"
            + (
                f", and check that hello's sample_rate ({self.rate}) is the audio's rate."
                if speed > 1.3
                else "."
            ),
            code="too_fast",
        )

    async def _receive_loop(self) -> None:
        assert self.hub_session is not None and self.uplink is not None
        session_end = time.monotonic() + self.config.limits.max_session_s
        while (raw := await self._next_message(session_end)) is not None:
            try:
                if isinstance(raw, bytes):
                    audio = parse_audio(raw, self.rate)
                    if not self._admit(audio):
                        continue
                    if self._byte_order.add(audio):
                        await self._report(
                            ProtocolError(
                                "the audio looks byte-swapped: big-endian PCM16 sounds like "
                                "loud hiss, and is heard as words nobody said.",
                                "Send PCM16 little-endian (see web/PROTOCOL.md).",
                                code="byte_order",
                            )
                        )
                    frame = self.uplink.process(audio)
                    self.hub_session.feed(frame)
                    if self.transcript is not None:
                        self.transcript.audio(frame)
                    self.hub.poke()
                    self.wake.set()
                else:
                    parsed = parse_text(raw)
                    if isinstance(parsed, Played):
                        self._on_played(parsed)
                    elif isinstance(parsed, Talk):
                        with self.hub_session.lock:
                            self.hub_session.session.push_to_talk = True
                            self.hub_session.session.talk(parsed.down)
                        self.hub.poke()
                        self.wake.set()
                        self._save_soon()  # a setting the user chose
                    elif isinstance(parsed, ToolAnswer):
                        self._on_tool_answer(parsed)
                    else:
                        raise ProtocolError("hello was already received.", code="unexpected")
                self.errors_in_a_row = 0
            except ProtocolError as exc:
                await self._report(exc)

    def _on_played(self, played: Played) -> None:
        """Client samples (at its rate) -> the session's 16 kHz count of that reply."""
        assert self.hub_session is not None
        samples = self._ledger.to16(played.reply_id, played.samples)
        if samples:
            self.hub_session.on_played(played.reply_id, samples)
            self.wake.set()

    async def _send_loop(self) -> None:
        assert self.hub_session is not None and self.pacer is not None
        pacer = self.pacer
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), pacer.next_due_in(time.monotonic()))
            self.wake.clear()
            now = time.monotonic()
            for item in self.hub_session.take():
                if isinstance(item, Event):
                    self._observe(item)
                    if self.on_event is not None:
                        self.on_event(item)
                    if self.transcript is not None:
                        self.transcript.observe(item)
                    data = item.to_dict()
                    if self.page_tools is not None and item.type == "tool_call":
                        data = self.page_tools.request(data)  # the page's own: it answers
                    await self.ws.send(json.dumps(data))
                    if item.type in SAVE_AFTER:
                        self._save_soon()
                elif isinstance(item, Play):
                    audio = resample(item.audio, SAMPLE_RATE, self.rate)
                    self._ledger.queued(item.reply_id, len(item.audio), len(audio))
                    pacer.add(item.reply_id, np.asarray(audio, dtype=np.float32))
                elif isinstance(item, Pause):
                    pacer.pause(item.reply_id, now)
                    await self.ws.send(message("pause", reply_id=item.reply_id))
                elif isinstance(item, Resume):
                    pacer.resume(item.reply_id, now)
                    await self.ws.send(message("resume", reply_id=item.reply_id))
                elif isinstance(item, Clear):
                    pacer.clear(item.reply_id, now)
                    self._sending.discard(item.reply_id)
                    await self.ws.send(message("clear", reply_id=item.reply_id))
            for reply_id, offset, frame in pacer.due(time.monotonic()):
                if offset == 0:
                    self._sending.add(reply_id)
                    await self.ws.send(message("audio_start", reply_id=reply_id))
                await self.ws.send(downlink_frame(reply_id, offset, frame))
            await self._announce_ends()
            self._send_rounds += 1

    def _observe(self, event: Event) -> None:
        self.metrics.observe(event)
        seen = self.turns.observe(event)
        if seen is not None:
            self.metrics.derived(seen)
            if self.tracer is not None and isinstance(seen, TurnTimeline):
                self.tracer.record(seen, self.conversation_id)

    async def _announce_ends(self) -> None:
        """``audio_end`` once a reply's last sample is sent: the client may stop waiting
        for more (its jitter buffer plays out what it holds)."""
        assert self.hub_session is not None and self.pacer is not None
        for reply_id in list(self._sending):
            with self.hub_session.lock:
                complete = self.hub_session.session.all_audio_queued(reply_id)
            if complete and not self.pacer.unsent(reply_id):
                self._sending.discard(reply_id)
                samples = self.pacer.queued_samples(reply_id)
                await self.ws.send(message("audio_end", reply_id=reply_id, samples=samples))


# -- the server -------------------------------------------------------------------------


async def serve_forever(
    hub: EngineHub,
    config: ServeConfig,
    ready: asyncio.Event | None = None,
    metrics: ServerMetrics | None = None,
    on_event: Callable[[Event], None] | None = None,
    lifecycle: Lifecycle | None = None,
    conversations: Conversations | None = None,
) -> None:
    """Serve until cancelled, or until ``lifecycle`` has drained. ``ready`` is set once
    the port is open; ``on_event`` sees every session's events (on the event loop's
    thread) as they go to the clients."""
    metrics = metrics or ServerMetrics()
    lifecycle = lifecycle or Lifecycle(config.drain_s)
    if conversations is None:
        conversations = Conversations(make_store(config.store, config.store_ttl_s))
    access = config.access
    tracer = make_tracer(config.traces, config.port)  # None unless asked for
    loop_lag = LoopLag()  # audio that piled up while the server stalled is not "too fast"

    def process_request(connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path == WS_PATH:
            metrics.connections += 1
            refusal = access.check(request)
            if refusal is None and lifecycle.draining:  # a balancer retries another worker
                metrics.refuse("draining")
                gone = b"this server is shutting down; connect again (to another server).\n"
                return _response(HTTPStatus.SERVICE_UNAVAILABLE, gone, "text/plain")
            if refusal is None:
                return None  # the WebSocket handshake goes on
            metrics.refuse(refusal.reason)
            return _response(refusal.status, refusal.text.encode() + b"\n", "text/plain")
        if path == "/healthz":
            body = json.dumps({"status": "ok", **hub.stats()}).encode()
            return _response(HTTPStatus.OK, body, "application/json")
        if path == "/readyz":
            status, fields = lifecycle.readiness(hub.stats())
            return _response(status, json.dumps(fields).encode(), "application/json")
        if path == "/metrics":
            refusal = access.check(request, need_origin_check=False)
            if refusal is not None:
                return _response(refusal.status, refusal.text.encode() + b"\n", "text/plain")
            text = metrics.prometheus(hub.stats(), _rss_bytes(), heap_usage(), hub.queue_depth)
            return _response(HTTPStatus.OK, text, CONTENT_TYPE)
        return static_response(config.web_dir, path)

    async def handler(ws: ServerConnection) -> None:
        lifecycle.opened()
        try:
            await Connection(
                ws, hub, config, metrics, on_event, loop_lag, lifecycle, conversations, tracer
            ).run()
        except ConnectionClosed:
            pass
        except Exception:  # one connection's bug must not take the server down
            log.exception("connection failed")
            metrics.error("internal")
            with contextlib.suppress(ConnectionClosed):
                await ws.send(message("error", code="internal", message="internal server error"))
        finally:
            lifecycle.closed()

    async with serve(
        handler,
        config.host,
        config.port,
        process_request=process_request,
        max_size=MAX_MESSAGE_BYTES,
        compression=None,  # PCM does not compress; deflate would only cost CPU
        ssl=config.ssl_context(),
    ):
        heartbeat = asyncio.create_task(loop_lag.watch())
        if ready is not None:
            ready.set()
        try:
            await lifecycle.drained()  # until drained (SIGTERM), or cancelled
        finally:
            heartbeat.cancel()
            conversations.close()
            if tracer is not None:
                await asyncio.to_thread(tracer.shutdown)  # the last turns' spans go out


async def serve_until_signalled(
    hub: EngineHub, config: ServeConfig, conversations: Conversations
) -> None:
    """Serve; the first SIGTERM drains (see :mod:`voice.serve.lifecycle`), a second one
    stops at once (an operator who will not wait; Ctrl-C does the same)."""
    lifecycle = Lifecycle(config.drain_s)
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    stopped_at_once = False

    def on_sigterm() -> None:
        nonlocal stopped_at_once
        if lifecycle.begin_drain():
            print(
                f"voice serve: draining ({lifecycle.connections} connections, at most "
                f"{config.drain_s:g} s; SIGTERM again stops at once)",
                file=sys.stderr,
                flush=True,
            )
        elif main is not None:
            stopped_at_once = True
            main.cancel()

    with contextlib.suppress(NotImplementedError):  # no signal handlers on this platform
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        await serve_forever(hub, config, lifecycle=lifecycle, conversations=conversations)
    except asyncio.CancelledError:
        if not stopped_at_once:
            raise


def _rss_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:
        return None
