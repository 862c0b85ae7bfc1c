"""Clocks for a session: honest virtual time, or the wall clock.

Both give the session the same inputs in the same order; only time differs.

- :class:`VirtualClock` runs as fast as the CPU allows but never lies about
  latency: each job's real compute time is charged to the audio clock, so its
  result reaches the session only after that much input audio has gone by,
  exactly as a live microphone would have kept talking. Jobs run one at a
  time, as they do live.
- :class:`WallClock` runs the jobs on an engine thread while the caller feeds
  audio at the pace it arrives (a device, a socket, or a file paced in real
  time). One lock guards the session; the lock is never held during a job.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from voice.conversation.actions import Job
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


class VirtualClock:
    """Call ``advance(until_ms)`` before feeding the frame that ends at ``until_ms``."""

    def __init__(self, session: Session, lane: EngineLane) -> None:
        self.session = session
        self.lane = lane
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
