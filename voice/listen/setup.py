"""Build the ears from settings: the one place that wires VAD, endpointer and engine."""

from __future__ import annotations

from voice.config import Settings
from voice.listen.listener import Listener
from voice.listen.vad import make_classifier
from voice.listen.whisper import WhisperEngine


def build_listener(settings: Settings) -> Listener:
    """A fresh Listener (per stream); cheap, unlike the engine."""
    classifier = make_classifier(
        settings.vad.aggressiveness, settings.vad.silero, settings.vad.onset_threshold
    )
    return Listener(classifier, settings.vad, settings.listen)


def build_engine(settings: Settings) -> WhisperEngine:
    """Load the ASR model once; share it between streams on one worker."""
    return WhisperEngine(settings.asr)
