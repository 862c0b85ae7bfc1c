"""Settings in, parts out: the one place that turns :class:`Settings` into engines,
listeners, sessions and engine hubs.

Below this module nothing imports :mod:`voice.config`: each part takes its own
section (a dataclass of its package), and what needs several sections at once
(the lane's thread budget, a session's listener and history) is decided here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from voice.audio.wav import read_wav
from voice.config import Settings
from voice.conversation.session import Session
from voice.conversation.wake import WakeConfig, WakeGate, earcon_tone
from voice.embed import Embedder
from voice.errors import ConfigError, VoiceError
from voice.knowledge.policy import Grounding, KnowledgeConfig, load_index, shared_grounding
from voice.listen.listener import Listener
from voice.listen.vad import make_classifier
from voice.listen.whisper import WhisperEngine
from voice.reply.history import History
from voice.runtime.engines import Engines
from voice.runtime.hub import EngineHub
from voice.speak.tts import PiperTts, TtsConfig
from voice.think.backend import LlmBackend, LlmConfig, make_backend
from voice.tools.choose import Chooser
from voice.tools.schema import Tool


def lane_configs(settings: Settings) -> tuple[LlmConfig, TtsConfig]:
    """The LLM's and the voice's settings for a lane: all of its threads each (they
    never run at once there), and the voice at the pipeline's 16 kHz."""
    threads = settings.conversation.lane_threads
    llm = dataclasses.replace(settings.llm, threads=threads, threads_batch=threads)
    tts = dataclasses.replace(settings.tts, output_rate=16000, threads=threads)
    return llm, tts


def load_recognizer(settings: Settings) -> WhisperEngine:
    """Load the ASR model once; share it between streams on one worker."""
    return WhisperEngine(settings.asr)


def load_engines(settings: Settings, warm: bool = True) -> Engines:
    """Load the three models named by ``settings`` (seconds; do it once per process),
    and ``warm`` them, so every transport that loads them answers its first turn
    as fast as the rest."""
    # Engines never overlap in the lane, so the LLM and the voice may use all of it
    # (``voice chat`` overlaps them instead, one thread each); Whisper has its own
    # ``asr.threads`` (two by default, the lane's).
    llm, tts = lane_configs(settings)
    engines = Engines(asr=load_recognizer(settings), llm=make_backend(llm), tts=PiperTts(tts))
    if warm:
        engines.warm()
    return engines


def build_listener(settings: Settings) -> Listener:
    """A fresh Listener (per stream); cheap, unlike the engine. It gets its own copy of
    the endpoint settings: a session adapts the end-of-turn silence per utterance."""
    vad = settings.vad
    classifier = make_classifier(vad.aggressiveness, vad.silero, vad.onset_threshold)
    return Listener(classifier, dataclasses.replace(vad), settings.listen)


def build_session(settings: Settings, engines: Engines) -> Session:
    """A fresh session (one per conversation) on shared engines; cheap."""
    history = History.for_backend(engines.llm, settings.llm, settings.tts.speaking_rate)
    session = Session(
        build_listener(settings),
        history,
        config=settings.conversation,
        turn=settings.turn,
        eot_available=engines.has_end_of_turn_model,
        wake=build_wake_gate(settings.wake),
    )
    session.grounding = load_grounding(settings.knowledge)
    return session


def load_grounding(config: KnowledgeConfig) -> Grounding | None:
    """The knowledge ``config`` names, loaded once per file and process (a server's
    sessions share it); None without one. A bad file fails here, at start."""
    if not config.path:
        return None
    index = load_index(config.path, Embedder.default(), config.cache_dir)
    return shared_grounding(index, config)


def build_wake_gate(wake: WakeConfig) -> WakeGate | None:
    """The wake gate of one conversation (its own detector: the model keeps state per
    stream; loading one takes milliseconds), or None when no wake word is set."""
    if not wake.enabled:
        return None
    from voice.listen.wake import load_wake_detector

    return WakeGate(load_wake_detector(wake.wake_word, wake.threshold), wake, load_earcon(wake))


def load_earcon(wake: WakeConfig) -> npt.NDArray[np.float32] | None:
    """The sound played on waking: the generated tone, none, or a WAV file."""
    choice = wake.earcon.strip()
    if choice == "tone":
        return earcon_tone()
    if choice in ("", "none"):
        return None
    try:
        return read_wav(choice)
    except VoiceError as exc:
        raise ConfigError(f"wake.earcon: {exc}", "Give a WAV file, 'tone' or 'none'.") from None


def tool_chooser(settings: Settings) -> Callable[[Sequence[Tool]], Chooser]:
    """How a server's session chooses among the tools a page declared: the ``[tools]``
    settings, and the sentence encoder of the knowledge (loaded at the first page that
    declares tools, then shared)."""

    def chooser(tools: Sequence[Tool]) -> Chooser:
        return Chooser(tools, Embedder.default(), settings.tools)

    return chooser


def make_hub(
    settings: Settings,
    engines: Engines,
    max_sessions: int = 4,
    configure: Callable[[Session], None] | None = None,
) -> EngineHub:
    """An engine hub that opens sessions with ``settings`` on ``engines``; with the
    embedded LLM, each session borrows its own llama.cpp context (its KV cache) over
    the same weights, and ``engines.llm`` is the first of them."""
    new_context: Callable[[], LlmBackend] | None = None
    if settings.llm.backend == "embedded":
        context_config = lane_configs(settings)[0]

        def new_context() -> LlmBackend:
            return make_backend(context_config)

    return EngineHub(
        engines,
        max_sessions,
        build=lambda loaded: build_session(settings, loaded),
        new_context=new_context,
        job_timeout_s=settings.conversation.job_timeout_s,
        greeting=settings.conversation.greeting,
        configure=configure,
    )
