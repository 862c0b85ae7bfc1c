"""Build a session from settings: the one place that wires listener, history and core."""

from __future__ import annotations

import dataclasses

from voice.config import Settings
from voice.conversation.engines import Engines
from voice.conversation.session import Session
from voice.listen.listener import Listener
from voice.listen.vad import make_classifier
from voice.reply.history import History


def build_session(settings: Settings, engines: Engines) -> Session:
    """A fresh session (one per conversation) on shared engines; cheap."""
    vad = settings.vad
    # The session adapts the end-of-turn silence per utterance: give it its own copy.
    endpoint = dataclasses.replace(vad)
    classifier = make_classifier(vad.aggressiveness, vad.silero, vad.onset_threshold)
    listener = Listener(classifier, endpoint, settings.listen)
    history = History.for_backend(engines.llm, settings.llm)
    return Session(
        listener,
        history,
        config=settings.conversation,
        turn=settings.turn,
        eot_available=engines.has_end_of_turn_model,
    )
