"""Many sessions on one set of engines: one engine thread, a fair schedule.

The runtime every transport shares: the WebSocket server opens a session
per browser, the embedding API's model pool attaches its assistants, and the desk
runs one. Two cores run one heavy pass at a time well and several badly (see
:mod:`voice.runtime.engines`), so every session's jobs go through one
engine thread. Each session offers its most urgent job; the hub runs the job
a user would miss most (see :func:`job_rank`: a final transcript, then the
first sound of a reply someone waits for, then replies running low, then live
partial transcripts, then replies with plenty queued), and among jobs of the
same rank the session served least recently. So one session's long reply
advances a token at a time between other sessions' passes and starves none.

Whisper and Piper are shared outright. The LLM keeps per-conversation state
(its KV cache), so each session borrows its own llama.cpp context from a
pool; the weights are memory-mapped from one file, so the contexts share
them (the model is in memory once) and each adds only its cache.

The hub knows no settings: how a session is built, how a context is made, the
step timeout and the greeting come from whoever composes it
(:func:`voice.app.build.make_hub`).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from voice.conversation.actions import (
    AsrJob,
    EotJob,
    Job,
    LlmClose,
    LlmStep,
    PrefillJob,
    ToolChoice,
    TtsJob,
)
from voice.conversation.session import PHRASE_GENS, Output, Session
from voice.errors import VoiceError
from voice.runtime.clocks import deliver, run_job
from voice.runtime.contexts import ContextPool
from voice.runtime.engines import DEFAULT_TIMEOUT_S, EngineLane, Engines
from voice.runtime.faults import make_lane
from voice.runtime.memory import release_freed_memory
from voice.think.backend import LlmBackend

log = logging.getLogger(__name__)


class ServerFull(VoiceError):
    code = "server_full"


COVERED_MS = 1500.0  # reply audio ahead of playback that makes a session's reply work wait


def job_rank(job: Job, audio_ahead_ms: float = 0.0, awaiting_first_audio: bool = False) -> int:
    """Lower runs first, across sessions, by what a user would notice:

    0. closing a cancelled generation (cheap; frees the model);
    1. recognition in a pause or after the turn (the final transcript and the
       speculation hang on it);
    2. reply work for a user waiting in silence for the first sound;
    3. reply work (speech, tokens, speculation) with little audio queued ahead;
    4. partial transcripts while the user speaks (live captions);
    5. reply work with plenty of audio already queued ahead of playback;
    6. spare-time pre-fill, and phrases rendered ahead (the apology).
    """
    if isinstance(job, LlmClose):
        return 0
    if isinstance(job, AsrJob):
        return 4 if job.request.live else 1
    if isinstance(job, PrefillJob) or (isinstance(job, TtsJob) and job.gen_id in PHRASE_GENS):
        return 6  # spare time: pre-fill, and phrases rendered ahead (apology, filler)
    if not isinstance(job, TtsJob | LlmStep | EotJob | ToolChoice):
        raise TypeError(f"unknown job {job!r}")
    if awaiting_first_audio:
        return 2
    return 5 if audio_ahead_ms >= COVERED_MS else 3


def _no_context() -> LlmBackend:
    raise TypeError("this hub was given no way to make LLM contexts")


def job_kind(job: Job) -> str:
    if isinstance(job, AsrJob):
        return "asr_live" if job.request.live else "asr_pause"
    return {LlmClose: "llm_close", TtsJob: "tts", EotJob: "eot", LlmStep: "llm_step",
            PrefillJob: "prefill", ToolChoice: "tool_choice"}[type(job)]  # fmt: skip


@dataclass
class HubSession:
    """One conversation on the hub. Call its methods from any thread."""

    session: Session
    lane: EngineLane
    context: LlmBackend | None
    wake: Callable[[], None]  # called (from the engine thread) when there is output
    lock: threading.RLock = field(default_factory=threading.RLock)
    pending: Job | None = None
    served: int = 0
    closed_at: float | None = None
    last_job_end: float = 0.0
    # Set once the engine thread has closed it (its generation stopped, its context
    # back): a process about to exit waits for this, or the close races the
    # interpreter's shutdown of the model thread.
    finished: threading.Event = field(default_factory=threading.Event)

    def feed(self, frame: object) -> None:
        with self.lock:
            self.session.feed(frame)  # type: ignore[arg-type]

    def on_played(self, reply_id: int, samples: int) -> None:
        with self.lock:
            self.session.on_played(reply_id, samples)

    def take(self) -> list[Output]:
        with self.lock:
            return self.session.take()

    @property
    def closed(self) -> bool:
        return self.closed_at is not None


class EngineHub:
    """Owns the engine thread; ``open()`` a session per conversation, ``close()`` it after."""

    def __init__(
        self,
        engines: Engines | None,
        max_sessions: int = 4,
        *,
        build: Callable[[Engines], Session] | None = None,
        new_context: Callable[[], LlmBackend] | None = None,
        job_timeout_s: float = DEFAULT_TIMEOUT_S,
        greeting: str = "",
        configure: Callable[[Session], None] | None = None,
        full_hint: str = "Try again later, or start the server with a larger --max-sessions.",
    ) -> None:
        """``engines`` None: a scheduler only, for sessions built elsewhere (``attach``).
        ``build`` makes the session ``open`` puts on ``engines`` (or on a copy of them
        with a context of its own); ``new_context`` makes such a context (an embedded
        LLM's KV cache; None: the LLM is shared as it is, e.g. an HTTP server).
        ``greeting`` is what a transport has each new session say first.
        ``configure`` is called with each session ``open`` builds (an application's hooks).
        ``full_hint``: what to do when :class:`ServerFull` is raised (the setting that
        raises the limit differs between the server and an embedding's model pool)."""
        self.engines = engines
        self.build = build
        self.job_timeout_s = job_timeout_s
        self.greeting = greeting
        self.configure = configure
        self.max_sessions = max_sessions
        self.full_hint = full_hint
        self._lock = threading.Lock()
        self._sessions: list[HubSession] = []
        self._closing: list[HubSession] = []
        self._opening = 0  # places held by sessions being built (open() on other threads)
        self._worked_since_trim = False
        self._own_contexts = engines is not None and new_context is not None
        # The loaded engines' own LLM is the first context; each holds its KV cache.
        self._contexts: ContextPool[LlmBackend] = ContextPool(
            new_context or _no_context,
            max_sessions,
            engines.llm if self._own_contexts and engines else None,
        )
        self._served = itertools.count(1)
        self._running: HubSession | None = None  # whose job the engine thread runs now
        self._running_job: Job | None = None
        self._running_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, name="engine-hub", daemon=True)
        # Per closed session: close to its last job's end (the recent ones; stats() shows them).
        self.cancel_ms: deque[float] = deque(maxlen=200)
        self._unfinished = 0  # sessions closed whose engine work is not finished yet
        self.compute_ms = 0.0
        self.queue_depth = 0  # sessions whose next job waited at the last pick
        self.compute_by_kind: dict[str, list[float]] = {}  # kind -> [count, seconds]
        self.started_at = time.perf_counter()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> EngineHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()
        for hub_session in self._sessions + self._closing:
            hub_session.lane.close()
            hub_session.finished.set()

    def __enter__(self) -> EngineHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def stats(self) -> dict[str, object]:
        """Live figures for health checks and benchmarks."""
        with self._lock:
            return {
                "sessions": len(self._sessions),
                "sessions_opening": self._opening,
                # Closed, and the step running at the close not yet done: not idle.
                "sessions_closing": self._unfinished,
                "llm_contexts": self._contexts.made,
                "max_sessions": self.max_sessions,
                "jobs_run": int(sum(n for n, _ in self.compute_by_kind.values())),
                "llm_steps": int(self.compute_by_kind.get("llm_step", [0, 0])[0]),
                "compute_s": round(self.compute_ms / 1000.0, 2),
                "engine_busy": round(
                    self.compute_ms / 1000.0 / max(1e-9, time.perf_counter() - self.started_at), 3
                ),
                "by_kind": {
                    kind: {"jobs": int(n), "seconds": round(sec, 2)}
                    for kind, (n, sec) in sorted(self.compute_by_kind.items())
                },
                # list() copies atomically; iterating would race the engine thread's appends.
                "cancel_ms": [round(ms, 1) for ms in list(self.cancel_ms)[-20:]],
                # The HTTP backend's connection state ("ok", "retrying", "unreachable").
                "llm_state": str(getattr(getattr(self.engines, "llm", None), "state", "embedded")),
            }

    def preload_contexts(self, count: int) -> None:
        """Create LLM contexts ahead of the first sessions (each takes a fraction of a second)."""
        if self._own_contexts:
            self._contexts.preload(count)

    def open(self, wake: Callable[[], None]) -> HubSession:
        """A new session, or :class:`ServerFull`. May load an LLM context (blocking).

        The place is held from the check on: opens that overlap (a crowd reconnecting at
        once) are refused at once rather than each borrowing, or making, a context first."""
        if self.engines is None or self.build is None:
            raise TypeError("this hub only schedules sessions built elsewhere: use attach()")
        with self._lock:
            self._check_room()
            self._opening += 1
        try:
            hub_session = self._build(self.engines, wake)
        except BaseException:
            with self._lock:
                self._opening -= 1
            raise
        with self._lock:  # one step: the place is never counted twice, nor free
            self._opening -= 1
            self._sessions.append(hub_session)
        self._wake.set()
        return hub_session

    def _build(self, loaded: Engines, wake: Callable[[], None]) -> HubSession:
        """A session on its own LLM context (given back, with the session closed, if any
        step fails)."""
        assert self.build is not None
        context = self._contexts.borrow() if self._own_contexts else None
        engines = loaded if context is None else dataclasses.replace(loaded, llm=context)
        session = None
        try:
            session = self.build(engines)
            if self.configure is not None:
                self.configure(session)  # the application's hook: it may raise too
            lane = make_lane(engines, self.job_timeout_s)
            return HubSession(session, lane, context, wake)
        except BaseException:
            if session is not None:  # its VAD model and buffers are freed now, not at GC
                session.close()
            if context is not None:  # lost, the pool would wait for it in vain
                self._contexts.give_back(context)
            raise

    def attach(self, hub_session: HubSession) -> HubSession:
        """Schedule a session built elsewhere (tests, embedders with their own sessions)."""
        with self._lock:
            self._check_room()
            self._sessions.append(hub_session)
        self._wake.set()
        return hub_session

    def _check_room(self) -> None:
        if len(self._sessions) + self._opening >= self.max_sessions:
            raise ServerFull(
                f"the server already has its maximum of {self.max_sessions} sessions.",
                self.full_hint,
            )

    def close(self, hub_session: HubSession) -> None:
        """Stop everything the session was doing; its running job (one step) is the last."""
        with self._lock:
            if hub_session.closed or hub_session not in self._sessions:
                if hub_session not in self._closing:
                    hub_session.finished.set()  # nothing is left for the engine thread
                return
            hub_session.closed_at = time.perf_counter()
            self._sessions.remove(hub_session)
            self._closing.append(hub_session)
            self._unfinished += 1
        with self._running_lock:
            # Speech being rendered for it is cut short (an LLM step or a recognition
            # pass is a few tens of ms; a sentence of speech can be 300).
            if self._running is hub_session and isinstance(self._running_job, TtsJob):
                abort = getattr(hub_session.lane.engines.tts, "abort", None)
                if abort is not None:
                    abort()
        self._wake.set()

    def poke(self) -> None:
        """New input may have made work."""
        self._wake.set()

    # -- the engine thread ---------------------------------------------------------------

    def _finish_closed(self) -> None:
        with self._lock:
            closing, self._closing = self._closing, []
        if not closing:
            return
        for hub_session in closing:
            try:
                with hub_session.lock:
                    hub_session.lane.close()  # stops an open generation; frees the context
                    hub_session.session.close()
                    end = max(hub_session.last_job_end, hub_session.closed_at or 0.0)
                    self.cancel_ms.append((end - (hub_session.closed_at or end)) * 1000.0)
                if hub_session.context is not None:
                    self._contexts.give_back(hub_session.context)
            finally:
                hub_session.finished.set()
                with self._lock:
                    self._unfinished -= 1
        self._worked_since_trim = True  # what they used goes back to the system once idle

    def _pick(self) -> HubSession | None:
        with self._lock:
            sessions = list(self._sessions)
        offers: list[tuple[tuple[int, int], HubSession]] = []
        for hub_session in sessions:
            with hub_session.lock:
                if hub_session.closed:
                    continue
                if hub_session.pending is None:
                    hub_session.pending = hub_session.session.next_job()
                job = hub_session.pending
                if job is None:
                    continue
                session = hub_session.session
                rank = job_rank(job, session.audio_ahead_ms, session.awaiting_first_audio)
            offers.append(((rank, hub_session.served), hub_session))
        self.queue_depth = max(0, len(offers) - 1)  # waiting behind the one picked (/metrics)
        if not offers:
            return None
        offers.sort(key=lambda offer: offer[0])
        for _, other in offers[1:]:
            # A job that can wait is handed back, so that the session can offer its
            # urgent work next time (a reply due, say) instead of waiting behind it.
            with other.lock:
                job = other.pending
                if job is not None and not other.closed and other.session.take_back(job):
                    other.pending = None
        return offers[0][1]

    def _work(self) -> None:
        while not self._stop.is_set():
            self._finish_closed()
            hub_session = self._pick()
            if hub_session is None:
                # Idle: once the work is over, what it freed goes back to the system
                # (the trims during work are rate-limited and may have missed the end).
                if self._worked_since_trim and release_freed_memory():
                    self._worked_since_trim = False
                self._wake.wait(0.02)
                self._wake.clear()
                continue
            self._worked_since_trim = True
            job = hub_session.pending
            assert job is not None
            with self._running_lock:
                self._running, self._running_job = hub_session, job
            result, error, ms = run_job(hub_session.lane, job)
            with self._running_lock:
                self._running = self._running_job = None
            with self._lock:  # stats() reads these from other threads
                self.compute_ms += ms
                tally = self.compute_by_kind.setdefault(job_kind(job), [0.0, 0.0])
                tally[0] += 1
                tally[1] += ms / 1000.0
            broken = False
            with hub_session.lock:
                hub_session.pending = None
                hub_session.served = next(self._served)
                hub_session.last_job_end = time.perf_counter()
                if not hub_session.closed:
                    try:
                        deliver(hub_session.session, job, result, error)
                    except Exception:  # a bug in one session (or its hooks) ends only it
                        log.exception("a session failed on a job result; closing it")
                        broken = True
            if broken:
                self.close(hub_session)
            elif not hub_session.closed:
                hub_session.wake()
