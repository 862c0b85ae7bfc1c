"""voice: a fully local, real-time voice assistant pipeline.

The package is organised by concern: ``audio`` (frames, resampling, WAV),
``listen`` (VAD, endpointing, incremental ASR), ``speak``, ``think``,
``conversation`` and ``transports``. Events in :mod:`voice.events` are the
public vocabulary shared by every front end.
"""

__version__ = "0.1.0"
