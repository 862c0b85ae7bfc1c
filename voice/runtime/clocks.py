"""Clocks for a session: honest virtual time, or the wall clock.

Both give the session the same inputs in the same order; only time differs.

- :class:`VirtualClock` runs as fast as the CPU allows but never lies about
  latency: each job's real compute time is charged to the audio clock, so its
  result reaches the session only after that much input audio has gone by,
  exactly as a live microphone would have kept talking. Jobs run one at a
  time, as they do live.
  With a :class:`ModelledCost` it charges each job a cost worked out from its size
  instead (``voice simulate --repeatable``): every run then gives the session the
  same inputs at the same moments, so it says the same words, and the latencies it
  reports are the model's, not measured.
- :class:`WallClock` runs the jobs on an engine thread while the caller feeds
  audio at the pace it arrives (a device, a socket, or a file paced in real
  time). One lock guards the session; the lock is never held during a job.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from voice.audio import SAMPLE_RATE
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
from voice.conversation.session import Session
from voice.runtime.engines import EngineLane


@dataclass
class _Done:
    job: Job
    result: object
    error: BaseException | None
    compute_ms: float
    ready_ms: float


def run_job(lane: EngineLane, job: Job) -> tuple[object, BaseException | None, float]:
    started = time.perf_counter()
    try:
        result, error = lane.run(job), None
    except Exception as exc:  # reported to the session, which goes on
        result, error = None, exc
    return result, error, (time.perf_counter() - started) * 1000.0


def deliver(session: Session, job: Job, result: object, error: BaseException | None) -> None:
    if error is not None:
        session.on_job_failed(job, error)
    else:
        session.on_result(job, result)


@dataclass
class ModelledCost:
    """What a job costs on the 2-core development machine, from its size, about as
    the benchmarks measure it (docs/performance.md): a recognition pass 30 ms plus 25
    ms a second of audio (tiny.en on a window the length of the audio), a token 15 ms
    (SmolLM2-135M, 68 tokens/s) and 60 ms for the step that opens a reply (its
    prompt's pre-fill), synthesis 0.17 of the audio it makes (Piper's real-time
    factor), a pre-fill or an end-of-turn probability 60 ms, choosing a tool 10 ms
    from its words and 600 ms more when the model wrote the call under its grammar
    (docs/tools.md). The real compute time of a job varies from run to run (other
    programs, caches, the CPU's clock), and where a recognition pass falls changes
    the words Whisper writes; these do not."""

    asr_ms: float = 30.0
    asr_ms_per_s: float = 25.0
    token_ms: float = 15.0
    open_ms: float = 60.0
    tts_share: float = 0.17
    prefill_ms: float = 60.0
    choice_ms: float = 10.0
    written_call_ms: float = 600.0
    _opened: set[int] = field(default_factory=set)

    def __call__(self, job: Job, result: object) -> float:
        if isinstance(job, AsrJob):
            return self.asr_ms + self.asr_ms_per_s * len(job.request.audio) / SAMPLE_RATE
        if isinstance(job, LlmStep):
            first = job.gen_id not in self._opened
            self._opened.add(job.gen_id)
            return self.token_ms + (self.open_ms if first else 0.0)
        if isinstance(job, TtsJob):
            samples = getattr(result, "size", 0)
            return 1.0 + self.tts_share * 1000.0 * samples / SAMPLE_RATE
        if isinstance(job, EotJob | PrefillJob):
            return self.prefill_ms
        if isinstance(job, ToolChoice):
            written = bool(getattr(result, "raw", ""))  # a Call the model wrote
            return self.choice_ms + (self.written_call_ms if written else 0.0)
        assert isinstance(job, LlmClose)
        return 1.0


class VirtualClock:
    """Call ``advance(until_ms)`` before feeding the frame that ends at ``until_ms``;
    ``cost``: charge jobs a modelled cost rather than their compute time."""

    def __init__(
        self, session: Session, lane: EngineLane, cost: ModelledCost | None = None
    ) -> None:
        self.session = session
        self.lane = lane
        self.cost = cost
        self.free_at_ms = 0.0
        self._pending: _Done | None = None
        self.compute_ms = 0.0

    def advance(self, until_ms: float) -> None:
        session = self.session
        while True:
            done = self._pending
            if done is not None:
                if done.ready_ms > until_ms:
                    return
                self._pending = None
                self.free_at_ms = done.ready_ms
                deliver(session, done.job, done.result, done.error)
            start = max(self.free_at_ms, session.now_ms)
            if start >= until_ms:
                return
            job = session.next_job()
            if job is None:
                return
            result, error, ms = run_job(self.lane, job)
            self.compute_ms += ms
            if self.cost is not None:
                ms = self.cost(job, result)
            self._pending = _Done(job, result, error, ms, start + ms)

    @property
    def idle(self) -> bool:
        return self._pending is None


class WallClock:
    """An engine thread that runs the session's jobs as they come; use as a context."""

    def __init__(self, session: Session, lane: EngineLane) -> None:
        self.session = session
        self.lane = lane
        self.lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._busy = False
        self.compute_ms = 0.0
        self._thread = threading.Thread(target=self._work, name="engine-lane", daemon=True)

    def __enter__(self) -> WallClock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def poke(self) -> None:
        """New input may have made work: look for it now."""
        self._wake.set()

    @property
    def idle(self) -> bool:
        return not self._busy

    def _work(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                job = self.session.next_job()
                self._busy = job is not None
            if job is None:
                self._wake.wait(0.02)
                self._wake.clear()
                continue
            result, error, ms = run_job(self.lane, job)
            with self.lock:
                self.compute_ms += ms
                deliver(self.session, job, result, error)
                self._busy = False
