"""Embedding voice: :class:`Assistant`, :class:`Persona` and the shared :class:`ModelPool`."""

from voice.assistant.assistant import Assistant
from voice.assistant.persona import Persona, load_persona
from voice.assistant.pool import ModelPool, default_pool

__all__ = ["Assistant", "ModelPool", "Persona", "default_pool", "load_persona"]
