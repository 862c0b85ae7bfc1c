"""voice: a fully local, real-time voice assistant pipeline.

The package is organised by concern: ``audio`` (frames, resampling, WAV),
``listen`` (VAD, endpointing, incremental ASR), ``speak``, ``think``,
``conversation`` and ``transports``. Events in :mod:`voice.events` are the
public vocabulary shared by every front end. To embed it: ``from voice import
Assistant`` (see :mod:`voice.assistant`).
"""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``voice.Assistant`` and friends, imported on first use (the CLI stays light)."""
    if name in ("Assistant", "Persona", "ModelPool", "load_persona"):
        import voice.assistant

        return getattr(voice.assistant, name)
    raise AttributeError(f"module 'voice' has no attribute {name!r}")
