"""The embedding API: one assistant, its models, its conversation, and its audio loop.

```python
from voice import Assistant

with Assistant(persona="examples/personas/guide.toml") as bot:
    bot.on("reply_text", lambda e: print(e.text, end=""))

    @bot.before_reply
    def commands(text):            # between the final transcript and the LLM
        if "louder" in text.lower():
            bot.say("Okay, louder.")
            return None            # handled: no LLM reply
        return text                # answer this (the same, or changed)

    bot.greet()                    # the greeting, spoken like a reply: interruptible
    bot.send_text("Where is the exit?")   # a typed turn
    out = bot.process(mic_block)   # frames in (16 kHz mono float), frames out
```

The conversation core (:class:`voice.conversation.session.Session`) runs on
audio time: the assistant's clock is the microphone audio it is fed. Its jobs
run on the model pool's one engine thread, shared with the pool's other
assistants (:class:`voice.runtime.hub.EngineHub`); every public method may be
called from any thread. Events go to callbacks (on
the thread that calls ``process``/``feed``, which is where a conversation's
output is taken) and to ``async for`` iterators (on their event loop). Keep
callbacks and hooks short, and do not call another assistant synchronously and
wait on it from a hook: hooks run with this assistant's lock held.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, overload

import numpy as np
import numpy.typing as npt

from voice.app.build import build_session, make_hub, tool_chooser
from voice.assistant.persona import Persona, load_persona
from voice.assistant.pool import ModelPool, default_pool
from voice.audio.format import SAMPLE_RATE
from voice.config import Settings, check_wake, load_settings, prepared
from voice.conversation.actions import Action, Play
from voice.conversation.session import BeforeReply, Output, Session
from voice.errors import AudioFormatError
from voice.events import Error, Event, ReplyEnded
from voice.runtime.engines import Engines
from voice.runtime.faults import make_lane
from voice.runtime.hub import HubSession
from voice.tools.choose import Chooser
from voice.tools.schema import Tool, Toolbox
from voice.transports.playback import PlaybackQueue

log = logging.getLogger(__name__)
# How long close() waits for the engine thread to stop an open generation: one LLM or
# recognition step (tens of ms); a sentence being synthesised is aborted. The ceiling is
# for a machine whose cores other programs also want: there a step took over 2 s (two
# busy loops beside `voice listen` on 2 cores), and a process that exits before the
# engine thread is done prints a traceback from the interpreter's shutdown.
CLOSE_WAIT_S = 10.0

Float32Array = npt.NDArray[np.float32]
Callback = Callable[[Event], None]
_F = TypeVar("_F", bound=Callable[..., Any])


class _ToolDecorator(Protocol):
    def __call__(self, fn: _F, /) -> _F: ...


def mono_float(block: Any) -> Float32Array:
    """A microphone block as the session takes it, or a clear error: a stereo block
    flattened would be read as twice the samples (and the output would not fit the
    host's buffer), and int16 samples would be read as floats of up to 32767."""
    array = np.asarray(block)
    if array.ndim > 1 and max(array.shape) != array.size:
        raise AudioFormatError(
            f"the microphone block has shape {array.shape}; the assistant takes mono audio.",
            "Downmix first, e.g. block.mean(axis=1) for (frames, channels).",
        )
    if array.dtype.kind in "iu":
        raise AudioFormatError(
            f"the microphone block is {array.dtype}; the assistant takes float samples in "
            "[-1, 1] at 16 kHz.",
            "Convert it, e.g. block.astype(np.float32) / 32768 for int16.",
        )
    return np.asarray(array, dtype=np.float32).reshape(-1)


class Assistant:
    def __init__(
        self,
        settings: Settings | None = None,
        persona: Persona | str | Path | None = None,
        pool: ModelPool | None = None,
        engines: Engines | None = None,
        wake_word: str | None = None,
        knowledge: str | Path | None = None,
        tools: Sequence[Callable[..., Any] | Tool] = (),
        language: str | None = None,
    ) -> None:
        """``settings``: defaults, then the TOML file in ``$VOICE_CONFIG`` and the
        ``VOICE_*`` variables, if not given. ``persona``: a :class:`Persona` or the
        path of its TOML file. ``pool``: where models are shared (the process-wide pool by default);
        ``engines``: engines of one's own instead (tests, custom backends). ``wake_word``:
        hands-free behind a wake word ("hey_jarvis", a model's .json; "" always
        listens), over what the settings and persona say (docs/wake.md).
        ``knowledge``: a Markdown file (or folder) of what it knows, answered as
        written (docs/knowledge.md); it replaces the persona's. ``tools``: functions
        the assistant may call (docs/tools.md; more with ``@bot.tool``); a function that
        cannot be a tool is refused here with a ToolError. ``language``: ISO 639-1 ("zh",
        "de"): what it listens for, how it is asked to reply and the voice, over what
        the settings and persona say (docs/languages.md); a catalogue language model
        brings its own sampling where the settings leave the defaults."""
        if isinstance(persona, str | Path):
            persona = load_persona(persona)
        self.persona = persona or Persona(name="Assistant")
        base = settings if settings is not None else load_settings()
        base = self.persona.apply(base) if persona is not None else copy.deepcopy(base)
        if language is not None:
            base.conversation.language = language
        self.settings = prepared(base)  # the persona's language, too, spread to its parts
        if wake_word is not None:  # self.settings is this assistant's own copy
            self.settings.wake.wake_word = wake_word
            check_wake(self.settings.wake)  # a bad model: one clear error, now
        if knowledge is not None:
            self.settings = dataclasses.replace(
                self.settings,
                knowledge=dataclasses.replace(self.settings.knowledge, path=str(knowledge)),
            )
        self.pool = pool or default_pool()
        self.engines = engines or self.pool.engines_for(self.settings)
        self.session: Session = build_session(self.settings, self.engines)
        lane = make_lane(self.engines, self.settings.conversation.job_timeout_s)
        self._hub_session = HubSession(self.session, lane, None, lambda: None)
        self.lock = self._hub_session.lock
        self._callbacks: dict[str, list[Callback]] = {}
        self._streams: list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Event]]] = []
        self._speaker = PlaybackQueue()  # for process(): what plays, block by block
        self._starts = 0  # start()/close() pairs may nest (run_audio inside `with bot:`)
        self.toolbox = Toolbox(tools)
        self._chooser: Chooser | None = None
        self._apply_tools()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> Assistant:
        """Put the conversation on the engine thread (``with assistant:`` does this)."""
        if self._starts == 0:
            if self._hub_session.closed:
                # Started before: the jobs that were out when it stopped never came back,
                # so the conversation starts afresh (same persona, models and history).
                self.session = self._fresh_session()
                lane = make_lane(self.engines, self.settings.conversation.job_timeout_s)
                self._hub_session = HubSession(self.session, lane, None, lambda: None)
                self.lock = self._hub_session.lock
            self.pool.scheduler.attach(self._hub_session)
        self._starts += 1
        return self

    def close(self) -> None:
        """Stop its work (a step running now is the last) and leave the engine thread.

        Waits (up to ``CLOSE_WAIT_S``) for the engine thread to have stopped the open
        generation: a program that exits straight after would otherwise have the
        interpreter shut the model thread down under that close (a traceback on exit
        of ``voice listen``, one run in three)."""
        if self._starts == 0:
            return
        self._starts -= 1
        if self._starts == 0:
            self.pool.scheduler.close(self._hub_session)
            if not self._hub_session.finished.wait(CLOSE_WAIT_S):
                log.warning("the engine thread did not finish closing the conversation")

    def _fresh_session(self) -> Session:
        old = self.session
        session = build_session(self.settings, self.engines)
        session.history = old.history
        session.before_reply, session.push_to_talk, session.echo = (
            old.before_reply, old.push_to_talk, old.echo,
        )  # fmt: skip
        session.tools = old.tools
        return session

    def __enter__(self) -> Assistant:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what it hears and says ------------------------------------------------------------

    def process(self, mic: Float32Array) -> Float32Array:
        """One block of a duplex audio loop (a game engine's audio callback, a sound
        card): the microphone's samples in, 16 kHz mono float of any length; the same
        number of samples out, to play now. Reply audio, pauses, resumes and barge-in
        clears are all handled here."""
        mic = mono_float(mic)
        out, moved = self._speaker.take(len(mic))
        played = {reply_id: self._speaker.played[reply_id] for reply_id in moved}
        for action in self.feed(mic, reference=out, played=played):
            self._speaker.act(action)
        return out

    def feed(
        self,
        mic: Float32Array,
        reference: Float32Array | None = None,
        played: dict[int, int] | None = None,
    ) -> list[Action]:
        """The low-level loop for a player of one's own: microphone audio (and what
        played meanwhile, for echo cancellation), the total samples played so far per
        reply id; returns the output actions to carry out (``Play``, ``Pause``,
        ``Resume``, ``Clear``, see :mod:`voice.conversation.actions`)."""
        mic = mono_float(mic)
        with self.lock:
            self.session.feed(mic, reference)
            for reply_id, samples in (played or {}).items():
                self.session.on_played(reply_id, samples)
            outputs = self.session.take()
        self.pool.scheduler.poke()
        return self._dispatch(outputs)

    def say(self, text: str) -> int:
        """Have the assistant say ``text`` (a greeting, a bark): spoken like a reply,
        interruptible, remembered as heard. Returns its reply id."""
        reply_id: int = self._act(lambda: self.session.say(text))
        return reply_id

    def send_text(self, text: str) -> None:
        """A typed user turn, answered like a spoken one."""
        self._act(lambda: self.session.submit_text(text))

    def greet(self) -> int | None:
        """Say the persona's greeting, if it has one."""
        greeting = self.settings.conversation.greeting
        return self.say(greeting) if greeting else None

    def talk(self, down: bool) -> None:
        """Push-to-talk: the button went down or up (set ``push_to_talk`` first)."""
        self._act(lambda: self.session.talk(down))

    @property
    def push_to_talk(self) -> bool:
        return self.session.push_to_talk

    @push_to_talk.setter
    def push_to_talk(self, on: bool) -> None:
        self.session.push_to_talk = on

    def reset(self) -> None:
        """Forget the conversation (a kiosk's next visitor): history is cleared, the
        reply in progress is stopped; persona and models stay."""

        self._act(lambda: self.session.reset())

    @property
    def state(self) -> str:
        return self.session.state

    def _act(self, change: Callable[[], Any]) -> Any:
        """Change the conversation; what it says comes out of the next feed/process."""
        with self.lock:
            result = change()
        self.pool.scheduler.poke()
        return result

    # -- transports --------------------------------------------------------------------------

    def serve(self, config: Any = None, stop: threading.Event | None = None) -> None:
        """The WebSocket transport: ``voice serve`` for this assistant (the web client
        and ``/ws``; ``config`` a :class:`voice.serve.server.ServeConfig`). Every browser
        gets its own conversation with this persona, the ``before_reply`` hook, and
        its events to this assistant's callbacks (on the server's thread). Blocks until
        ``stop`` is set or Ctrl-C."""
        from voice.serve.server import ServeConfig, serve_forever

        config = config or ServeConfig()
        if config.tool_chooser is None:  # pages may declare tools (web/PROTOCOL.md)
            config.tool_chooser = tool_chooser(self.settings)
        stop = stop or threading.Event()

        def configure(session: Session) -> None:
            session.before_reply = self.session.before_reply

        def on_event(event: Event) -> None:
            self._dispatch([event])

        engines = self.pool.engines_for(self.settings)  # the first browser's context
        hub = make_hub(self.settings, engines, config.max_sessions, configure=configure)

        async def until_stopped() -> None:
            server = asyncio.create_task(serve_forever(hub, config, on_event=on_event))
            while not stop.is_set() and not server.done():
                await asyncio.sleep(0.1)
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

        with hub:
            asyncio.run(until_stopped())

    def run_audio(
        self, mic: Float32Array, block_s: float = 0.02, stop: threading.Event | None = None
    ) -> Float32Array:
        """The file transport: play ``mic`` (16 kHz mono float, e.g. a recording) in
        as the microphone, at real time, and return what the assistant played over the
        same span. Silence after it gives replies time to finish."""
        block = int(block_s * SAMPLE_RATE)
        out = []
        started = time.monotonic()
        with self:
            for k, i in enumerate(range(0, len(mic), block)):
                if stop is not None and stop.is_set():
                    break
                out.append(self.process(mic[i : i + block]))
                time.sleep(max(0.0, started + (k + 1) * block_s - time.monotonic()))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def run_silent(self, stop: threading.Event, block_s: float = 0.02) -> None:
        """No microphone and no speaker (text only, or a game without audio yet): the
        clock runs on silence at real time and replies play into nothing, so they end
        when they would have been heard. Returns when ``stop`` is set."""
        silence = np.zeros(int(block_s * SAMPLE_RATE), dtype=np.float32)
        started = time.monotonic()
        k = 0
        with self:
            while not stop.is_set():
                self.process(silence)
                k += 1
                time.sleep(max(0.0, started + k * block_s - time.monotonic()))

    def run_desk(
        self,
        input_device: int | None = None,
        output_device: int | None = None,
        view: Any = None,
        stop: threading.Event | None = None,
        ready: Callable[[str], None] | None = None,
        closed: Callable[[str], None] | None = None,
    ) -> None:
        """Talk through the sound card (PortAudio via sounddevice) until ``stop`` is set
        or Ctrl-C; ``view`` (optional) is told what the user has heard
        (``view.played(reply_id, samples)``, see :class:`TerminalView`); ``ready`` is
        called with the devices' rates once they are open, ``closed`` with a line on
        the devices (their clocks' drift, overflows, underflows) when the session ends."""
        from voice.transports.desk import DeskAudio, pick_device
        from voice.transports.playback import PlayedLedger

        if input_device is None:
            input_device = pick_device(None, "input")
        if output_device is None:
            output_device = pick_device(None, "output")
        stop = stop or threading.Event()
        ledger = PlayedLedger()  # the device's rate -> the session's 16 kHz count
        desk = self.settings.desk
        # Without a canceller (headset, half-duplex) there is no echo whose drift to follow.
        with self, DeskAudio(input_device, output_device, correct_drift=desk.drift,
                             measure_drift=desk.echo == "cancel") as audio:  # fmt: skip
            if ready is not None:
                ready(f"{audio.in_rate} Hz in, {audio.out_rate} Hz out")
            speaker = audio.speaker
            try:
                for mic, reference in audio.frames(lambda: not stop.is_set()):
                    played = {r: ledger.to16(r, n) for r, n in speaker.moved().items()}
                    for action in self.feed(mic, reference, played):
                        queued = speaker.act(action)
                        if isinstance(action, Play):
                            ledger.queued(action.reply_id, len(action.audio), queued)
                    if view is not None:
                        for reply_id, samples in played.items():
                            view.played(reply_id, samples)
            finally:
                if closed is not None:
                    closed(audio.devices_summary())

    # -- events ------------------------------------------------------------------------------

    def on(self, kind: str, callback: Callback | None = None) -> Any:
        """Call ``callback(event)`` for every event of ``kind`` (``"final"``,
        ``"reply_text"``, ... see :mod:`voice.events`; ``"*"`` for all). Usable as a
        decorator: ``@assistant.on("final")``."""

        def register(fn: Callback) -> Callback:
            self._callbacks.setdefault(kind, []).append(fn)
            return fn

        return register if callback is None else register(callback)

    def before_reply(self, hook: BeforeReply) -> BeforeReply:
        """Decorator: ``hook(text)`` runs between the user's final words and the LLM;
        it returns the text to answer, or None if it handled the turn itself."""
        self.session.before_reply = hook
        return hook

    @overload
    def tool(self, fn: _F) -> _F: ...

    @overload
    def tool(self, fn: None = None, *, examples: Sequence[str] = ()) -> _ToolDecorator: ...

    def tool(self, fn: _F | None = None, *, examples: Sequence[str] = ()) -> Any:
        """Decorator: make ``fn`` a tool the assistant may call (its name, docstring and
        type hints say what it does and takes; docs/tools.md). ``examples``: a few
        things a user says that need it. ``@bot.tool`` or ``@bot.tool(examples=[...])``."""

        def register(f: _F) -> _F:
            self.toolbox.add(f, examples)
            self._apply_tools()
            return f

        return register if fn is None else register(fn)

    def _apply_tools(self) -> None:
        """The session's chooser for the tools as they are now (descriptions embedded)."""
        if not self.toolbox:
            return
        from voice.embed import Embedder

        chooser = Chooser(list(self.toolbox), Embedder.default(), self.settings.tools)
        with self.lock:
            self._chooser = self.session.tools = chooser

    def on_reply(self, callback: Callable[[ReplyEnded], None]) -> Callable[[ReplyEnded], None]:
        """Decorator: ``callback(reply_end_event)`` after each reply, with what was
        heard of it and whether it was interrupted."""
        self.on("reply_end", lambda event: callback(event))  # type: ignore[arg-type]
        return callback

    async def events(self) -> AsyncIterator[Event]:
        """Every event from now on, as an async iterator (on the caller's loop)."""
        queue: asyncio.Queue[Event] = asyncio.Queue()
        entry = (asyncio.get_running_loop(), queue)
        self._streams.append(entry)
        try:
            while True:
                yield await queue.get()
        finally:
            self._streams.remove(entry)

    def _call(self, callback: Callable[[Any], None], event: Event) -> None:
        """One application callback. If it raises, the rest of the outputs (the reply's
        audio, its end) still go out: the error is logged and reported to the "error"
        callbacks, never raised into the audio loop."""
        try:
            callback(event)
        except Exception as exc:
            log.exception("an application callback for %r raised", event.type)
            if event.type == "error":
                return  # an error callback that fails is only logged: no loop
            report = Error(
                audio_ms=event.audio_ms,
                code="callback_failed",
                message=f"a callback for {event.type!r} raised {exc!r}; the conversation "
                "went on. Fix the callback (the log has the traceback).",
            )
            for handler in self._callbacks_for("error"):
                self._call(handler, report)

    def _callbacks_for(self, kind: str) -> list[Callback]:
        """The callbacks for events of ``kind``, then those for every event ("*")."""
        return self._callbacks.get(kind, []) + self._callbacks.get("*", [])

    def _dispatch(self, outputs: list[Output]) -> list[Action]:
        actions: list[Action] = []
        for item in outputs:
            if not isinstance(item, Event):
                actions.append(item)
                continue
            for callback in self._callbacks_for(item.type):
                self._call(callback, item)
            for loop, queue in list(self._streams):
                loop.call_soon_threadsafe(queue.put_nowait, item)
        return actions
