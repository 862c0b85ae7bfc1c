"""The engines behind a session, and the one lane that runs its jobs.

Models are loaded once (:class:`Engines`, by :func:`voice.app.build.load_engines`)
and shared. :class:`EngineLane` runs one session's jobs, one at a time, on
whichever thread calls it: two cores hold one heavy engine pass at a time well,
and several at once badly (thread pools oversubscribe and llama.cpp's
spin-waits collapse). So the schedule is
simply the order of ``Session.next_job``, and every pass has both cores.
Steps are short (one recognition pass, one token, one sentence of speech), so
nothing urgent waits long behind anything else.

A step that does not come back in ``timeout_s`` has failed (a hung LLM server,
a stuck model): the lane runs every step on a worker thread it can walk away
from, raises :class:`EngineTimeout` to the session (which apologises and goes
on) and starts a fresh worker. The abandoned step cannot be killed from
Python; speech synthesis is aborted, an HTTP stream ends at its socket
timeout, and a stuck llama.cpp call keeps the model thread: until it returns, this
lane fails LLM work at once (no second wait) while recognition and speech go
on. Other lanes on the same model each wait out one timeout first.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from voice.audio.format import SAMPLE_RATE
from voice.conversation.actions import (
    AsrJob,
    EotJob,
    Job,
    LlmClose,
    LlmStep,
    PrefillJob,
    ToolChoice,
    TtsJob,
    engine_of,
)
from voice.errors import VoiceError
from voice.listen.runner import Recognizer, run_pass
from voice.runtime.memory import release_freed_memory
from voice.speak.tts import Synthesizer
from voice.think.backend import (
    LlmBackend,
    Message,
    TokenSteps,
    end_of_turn_probability,
    open_steps,
    prefill,
)

log = logging.getLogger(__name__)


class EngineTimeout(VoiceError):
    """An engine step did not finish in time."""


DEFAULT_TIMEOUT_S = 8.0


@dataclass
class Engines:
    asr: Recognizer
    llm: LlmBackend
    tts: Synthesizer
    # Short phrases every session renders ahead (the apology, the filler): once per
    # process. ``dataclasses.replace`` keeps the same dict, so per-session copies share it.
    phrases: dict[str, object] = field(default_factory=dict)

    @property
    def has_end_of_turn_model(self) -> bool:
        return hasattr(self.llm, "end_of_turn_probability")

    def warm(self) -> dict[str, float]:
        """Run each engine once on something small before the first user is heard, so
        the first turn is as fast as the rest: the model files are paged in from disk
        (llama.cpp maps its weights; a first run after install read them cold and
        answered in 2.1 s instead of 0.5), and each engine's one-time set-up (buffers
        for the window sizes a turn uses, espeak-ng's start) is paid now. Returns the
        milliseconds each took. A failure is logged, not raised: the engine will
        report it again, as an error event, when a turn needs it."""
        took: dict[str, float] = {}
        quiet = np.random.default_rng(0).normal(0, 1e-3, SAMPLE_RATE).astype(np.float32)
        steps: list[tuple[str, Callable[[], object]]] = [
            ("asr", lambda: (self.asr.transcribe(quiet), self.asr.transcribe(quiet, final=True))),
            ("llm", self._warm_llm),
            ("tts", lambda: list(self.tts.synthesize("Hello."))),
        ]
        for name, step in steps:
            started = time.perf_counter()
            try:
                step()
            except Exception as exc:
                log.warning("warming the %s engine failed: %s", name, exc)
            took[name] = round((time.perf_counter() - started) * 1000.0, 1)
        log.info("engines warmed (ms): %s", took)
        return took

    def _warm_llm(self) -> None:
        """One token of a short chat: every layer's weights are read once."""
        steps = open_steps(self.llm, [Message("user", "Hello.")], max_tokens=1)
        try:
            steps.step()
        finally:
            steps.close()


class EngineLane:
    """Runs one session's jobs; keeps its open generations between steps.

    At most one generation is open on the model at a time: the session never
    interleaves two (a cancelled one is closed before anything else runs).
    """

    def __init__(self, engines: Engines, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.engines = engines
        self.timeout_s = timeout_s
        self._open: dict[int, TokenSteps] = {}
        self._stuck: Future[object] | None = None  # an LLM call that timed out, still out

    def run(self, job: Job) -> object:
        """Do the job (the caller waits); return what ``Session.on_result`` takes, or
        raise :class:`EngineTimeout` after ``timeout_s``."""
        if engine_of(job) == "llm" and self._stuck is not None:
            if not self._stuck.done():
                # The model is still inside the call that hung: waiting out another
                # timeout would stall everyone behind this lane. Fail (or drop) at once.
                if isinstance(job, LlmClose):
                    self._open.pop(job.gen_id, None)
                    return None
                raise EngineTimeout(
                    "the language model is still stuck in an earlier call.",
                    code="llm_timeout",
                )
            self._stuck = None
        future = _worker().submit(partial(self._run, job))
        try:
            return future.result(self.timeout_s)
        except FutureTimeout:
            if engine_of(job) == "llm" and getattr(self.engines.llm, "serial", False):
                self._stuck = future  # later calls would queue behind it on its thread
            self._abandon(job)
            raise EngineTimeout(
                f"{_describe(job)} took longer than {self.timeout_s:g} s.",
                code=f"{engine_of(job)}_timeout",
            ) from None

    def _abandon(self, job: Job) -> None:
        """Walk away from a hung step: a fresh worker for the next one, and whatever
        can be stopped is stopped."""
        _replace_worker()
        if isinstance(job, TtsJob):
            abort = getattr(self.engines.tts, "abort", None)
            if abort is not None:
                abort()
        elif isinstance(job, LlmStep):
            # Not closed here: closing waits for the hung call. Its cancel is set, so
            # an HTTP stream stops reading when the server unblocks.
            steps = self._open.pop(job.gen_id, None)
            if steps is not None:
                cancel = getattr(steps, "cancel", None)
                if cancel is not None:
                    cancel()

    def _run(self, job: Job) -> object:
        engines = self.engines
        if isinstance(job, AsrJob):
            return run_pass(engines.asr, job.request)
        if isinstance(job, EotJob):
            return end_of_turn_probability(engines.llm, job.history, job.text)
        if isinstance(job, LlmStep):
            steps = self._open.get(job.gen_id)
            if steps is None:
                self._close_all()
                steps = self._open[job.gen_id] = open_steps(engines.llm, job.messages)
            delta = steps.step()
            if delta is None:
                self._open.pop(job.gen_id, None)
            return delta
        if isinstance(job, LlmClose):
            steps = self._open.pop(job.gen_id, None)
            if steps is not None:
                steps.close()
            return None
        if isinstance(job, TtsJob):
            if job.gen_id <= 0:  # a phrase rendered ahead (see Session.next_job)
                cached = engines.phrases.get(job.text)
                if cached is None:
                    cached = engines.phrases[job.text] = self._speak(job.text)
                return cached
            return self._speak(job.text)
        if isinstance(job, PrefillJob):
            prefill(engines.llm, job.history, job.user_prefix)
            return None
        if isinstance(job, ToolChoice):
            self._close_all()  # one generation on the model at a time (its KV is used)
            return job.chooser.choose(job.text, engines.llm)
        raise TypeError(f"unknown job {job!r}")

    def _speak(self, text: str) -> object:
        parts = list(self.engines.tts.synthesize(text))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    def _close_all(self) -> None:
        opened, self._open = list(self._open.values()), {}
        if self._stuck is not None and not self._stuck.done():
            return  # closing would wait on the stuck model; the generations are dropped
        for steps in opened:
            steps.close()

    def close(self) -> None:
        self._close_all()


class _Worker:
    """One daemon thread that runs steps in order. A daemon, unlike a pool's thread,
    so that a step hung for good never holds up the process's exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[object], Callable[[], object]] | None]
        self._jobs = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="engine-step", daemon=True).start()

    def submit(self, fn: Callable[[], object]) -> Future[object]:
        future: Future[object] = Future()
        self._jobs.put((future, fn))
        return future

    def shutdown(self) -> None:
        self._jobs.put(None)  # after what is queued; a hung step keeps its thread

    def _loop(self) -> None:
        while (item := self._jobs.get()) is not None:
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)
            if self._jobs.empty():
                release_freed_memory()  # idle: hand back what the last jobs freed


_shared: _Worker | None = None
_shared_lock = threading.Lock()


def _worker() -> _Worker:
    """The process's one step thread. One, not one per lane: jobs run one at a time
    anyway, and every new thread that allocates gets a malloc arena of its own, so a
    server whose sessions come and go grew by megabytes a session (measured: 170 MB
    over the first 50 sessions with a thread per lane)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = _Worker()
        return _shared


def _replace_worker() -> None:
    """Walk away from a hung step: the next job gets a fresh thread."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.shutdown()
        _shared = _Worker()


def _describe(job: Job) -> str:
    return {"asr": "a recognition pass", "tts": "speaking a sentence",
            "llm": "the language model"}[engine_of(job)]  # fmt: skip
