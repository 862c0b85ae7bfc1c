"""Fault drills: make a real engine fail on purpose, to rehearse what users then hear.

``VOICE_FAULTS="llm:raise@3"`` makes the third LLM step of each session raise;
``tts:hang@1`` makes the first sentence of speech hang (past the step timeout);
``asr:raise@1x2`` fails recognition of the first two utterances. Several faults
are separated by commas. The engines themselves are untouched and do all the
other work: the drill wraps the lane that runs them. Counted are the jobs a
user depends on: LLM steps, speech of replies (not the phrases rendered ahead)
and, for recognition, utterances (``asr:raise@1``: every pass over the first
utterance fails, so its words are lost).

Used by the tests (and by anyone checking a deployment's behaviour) through
``voice serve``, ``voice simulate`` and ``voice listen``, which all build their
lanes with :func:`make_lane`.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass

from voice.conversation.actions import AsrJob, Job, LlmStep, TtsJob, engine_of
from voice.errors import ConfigError
from voice.runtime.engines import DEFAULT_TIMEOUT_S, EngineLane, Engines

FAULTS_ENV = "VOICE_FAULTS"
_SPEC = re.compile(r"^(asr|llm|tts):(raise|hang)@(\d+)(?:x(\d+))?$")


class InjectedFault(RuntimeError):
    """The drill's failure (a plain exception, as an engine bug would raise)."""


@dataclass(frozen=True)
class Fault:
    engine: str  # "asr", "llm" or "tts"
    mode: str  # "raise", or "hang" (block past the step timeout, then raise)
    at: int  # the 1-based count of the first counted job that fails
    times: int = 1  # consecutive counted jobs that fail

    def hits(self, count: int) -> bool:
        return self.at <= count < self.at + self.times


def parse_faults(spec: str) -> list[Fault]:
    faults = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = _SPEC.match(part)
        if match is None:
            raise ConfigError(
                f"cannot read the fault {part!r} in {FAULTS_ENV}.",
                "Write ENGINE:MODE@N[xTIMES], e.g. llm:raise@3 or tts:hang@1x2 "
                "(engines: asr, llm, tts; modes: raise, hang).",
            )
        engine, mode, at, times = match.groups()
        faults.append(Fault(engine, mode, int(at), int(times or 1)))
    return faults


def counted(job: Job) -> bool:
    if isinstance(job, TtsJob):
        return job.gen_id > 0
    return isinstance(job, LlmStep | AsrJob)


class FaultyLane(EngineLane):
    """An :class:`EngineLane` whose counted jobs fail as the faults say."""

    def __init__(self, engines: Engines, timeout_s: float, faults: list[Fault]) -> None:
        super().__init__(engines, timeout_s)
        self.faults = faults
        self.counts = {"asr": 0, "llm": 0, "tts": 0}
        self._utterances: list[int] = []

    def _count(self, job: Job) -> int:
        """The job's 1-based number among its engine's counted jobs."""
        if isinstance(job, AsrJob):
            uid = job.request.utterance_id
            if uid not in self._utterances:
                self._utterances.append(uid)
            return self._utterances.index(uid) + 1
        engine = engine_of(job)
        self.counts[engine] += 1
        return self.counts[engine]

    def _run(self, job: Job) -> object:
        if counted(job):
            engine, count = engine_of(job), self._count(job)
            for fault in self.faults:
                if fault.engine == engine and fault.hits(count):
                    if fault.mode == "hang":
                        time.sleep(self.timeout_s + 0.5)  # past the timeout, then it ends
                    raise InjectedFault(f"injected {engine} fault ({fault.mode})")
        return super()._run(job)


def make_lane(
    engines: Engines, timeout_s: float = DEFAULT_TIMEOUT_S, faults: str | None = None
) -> EngineLane:
    """The lane for one session; a fault drill if ``VOICE_FAULTS`` (or ``faults``) says so."""
    spec = os.environ.get(FAULTS_ENV, "") if faults is None else faults
    if not spec:
        return EngineLane(engines, timeout_s)
    return FaultyLane(engines, timeout_s, parse_faults(spec))
