"""Loaded models, shared by every assistant in the process.

Two NPCs and a narrator must not load Whisper three times. The pool hands each
assistant an :class:`Engines` whose recogniser is shared outright (it keeps no
per-conversation state), whose voice is shared by every persona with the same
voice, pace and pitch, and whose language model is its own llama.cpp context
(the KV cache is per conversation) over the same memory-mapped weights, so the
weights are in memory once.

The pool also owns the one engine thread that runs every assistant's jobs
(:attr:`scheduler`, an :class:`voice.runtime.hub.EngineHub`): two cores run one
heavy pass well and several badly, so two NPCs share the CPU by urgency (a
final transcript before another's pre-fill) instead of fighting over it.
"""

from __future__ import annotations

import threading

from voice.app.build import lane_configs, load_recognizer
from voice.config import Settings
from voice.listen.runner import Recognizer
from voice.runtime.engines import Engines
from voice.runtime.hub import EngineHub
from voice.speak.tts import PiperTts, Synthesizer
from voice.think.backend import make_backend


class ModelPool:
    def __init__(self, max_assistants: int = 16) -> None:
        # Loading a model takes seconds; the scheduler is asked on every audio block.
        # Two locks, so that a new NPC's voice loading never stalls another's audio.
        self._lock = threading.Lock()  # the loaded models
        self._scheduler_lock = threading.Lock()
        self._asr: dict[str, Recognizer] = {}
        self._tts: dict[str, tuple[Synthesizer, dict[str, object]]] = {}
        self.max_assistants = max_assistants
        self._scheduler: EngineHub | None = None

    @property
    def scheduler(self) -> EngineHub:
        """The engine thread shared by this pool's assistants (started on first use)."""
        with self._scheduler_lock:
            if self._scheduler is None:
                self._scheduler = EngineHub(
                    None, self.max_assistants,
                    full_hint="Close an assistant first, or give them a "
                    "ModelPool(max_assistants=...) of their own size.",
                ).start()  # fmt: skip
            return self._scheduler

    def engines_for(self, settings: Settings) -> Engines:
        """Engines for one conversation with these settings (loads what is missing)."""
        llm_config, tts_config = lane_configs(settings)
        with self._lock:
            asr_key = repr(settings.asr)
            fresh = asr_key not in self._asr or repr(tts_config) not in self._tts
            if asr_key not in self._asr:
                self._asr[asr_key] = load_recognizer(settings)
            tts_key = repr(tts_config)
            if tts_key not in self._tts:
                self._tts[tts_key] = (PiperTts(tts_config), {})
            tts, phrases = self._tts[tts_key]
            asr = self._asr[asr_key]
        llm = make_backend(llm_config)  # its own context; the weights are shared (mmap)
        engines = Engines(asr=asr, llm=llm, tts=tts, phrases=phrases)
        # Before the first audio, so its first turn is as fast as the rest; models the
        # pool already held (and warmed) are not run again for each new assistant.
        if fresh:
            engines.warm()
        return engines

    @property
    def loaded(self) -> dict[str, int]:
        """How many recognisers and voices are loaded (each once, however many users)."""
        with self._lock:
            return {"asr": len(self._asr), "tts": len(self._tts)}


_default: ModelPool | None = None
_default_lock = threading.Lock()


def default_pool() -> ModelPool:
    """The process-wide pool that assistants use unless given another (one, even when
    two threads start their first assistants at once)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ModelPool()
        return _default
