"""The engines behind a session, and the one lane that runs its jobs.

Models are loaded once (:class:`Engines`) and shared. :class:`EngineLane` runs
one session's jobs, one at a time, on whichever thread calls it: two cores
hold one heavy engine pass at a time well, and several at once badly (thread
pools oversubscribe and llama.cpp's spin-waits collapse). So the schedule is
simply the order of ``Session.next_job``, and every pass has both cores.
Steps are short (one recognition pass, one token, one sentence of speech), so
nothing urgent waits long behind anything else.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import numpy as np

from voice.config import Settings
from voice.conversation.actions import (
    AsrJob,
    EotJob,
    Job,
    LlmClose,
    LlmStep,
    PrefillJob,
    TtsJob,
)
from voice.listen.runner import Recognizer, run_pass
from voice.listen.setup import build_engine
from voice.speak.reply import Synthesizer
from voice.speak.tts import PiperTts
from voice.think.backend import (
    LlmBackend,
    TokenSteps,
    end_of_turn_probability,
    make_backend,
    open_steps,
    prefill,
)

log = logging.getLogger(__name__)


@dataclass
class Engines:
    asr: Recognizer
    llm: LlmBackend
    tts: Synthesizer

    @classmethod
    def load(cls, settings: Settings) -> Engines:
        """Load the three models named by ``settings`` (seconds; do it once per process)."""
        # Engines never overlap in the lane, so the LLM and the voice may use all of it
        # (``voice chat`` overlaps them instead, one thread each). Whisper keeps
        # ``asr.threads``: tiny.en decodes faster on one thread than on two here.
        threads = settings.conversation.lane_threads
        llm = dataclasses.replace(settings.llm, threads=threads, threads_batch=threads)
        tts = dataclasses.replace(settings.tts, output_rate=16000, threads=threads)
        return cls(asr=build_engine(settings), llm=make_backend(llm), tts=PiperTts(tts))

    @property
    def has_end_of_turn_model(self) -> bool:
        return hasattr(self.llm, "end_of_turn_probability")


class EngineLane:
    """Runs one session's jobs; keeps its open generations between steps.

    At most one generation is open on the model at a time: the session never
    interleaves two (a cancelled one is closed before anything else runs).
    """

    def __init__(self, engines: Engines) -> None:
        self.engines = engines
        self._open: dict[int, TokenSteps] = {}

    def run(self, job: Job) -> object:
        """Do the job on the calling thread; return what ``Session.on_result`` takes."""
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
            parts = list(engines.tts.synthesize(job.text))
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
        if isinstance(job, PrefillJob):
            prefill(engines.llm, job.history, job.user_prefix)
            return None
        raise TypeError(f"unknown job {job!r}")

    def _close_all(self) -> None:
        for steps in self._open.values():
            steps.close()
        self._open.clear()

    def close(self) -> None:
        self._close_all()
