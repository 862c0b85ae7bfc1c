"""What the session asks of the world: engine jobs for its one CPU lane, and
instructions for the audio output.

The session never runs a model or touches a device. It hands out jobs one at a
time (``Session.next_job``) in the order the CPU should do them, and output
actions that a transport carries out. Every job and action names the
generation or reply it belongs to, so a result that arrives after a cancel is
recognised as stale and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.listen.listener import TranscribeRequest
from voice.think.backend import Message

Float32Array = npt.NDArray[np.float32]


# -- engine jobs (run one at a time, in the order given) ---------------------------------


@dataclass(frozen=True)
class AsrJob:
    request: TranscribeRequest


@dataclass(frozen=True)
class EotJob:
    """The LLM's end-of-turn probability after ``text`` (also pre-fills the reply's prompt)."""

    gen_id: int
    history: list[Message]
    text: str


@dataclass(frozen=True)
class LlmStep:
    """Advance generation ``gen_id`` by one step; the first step opens it on ``messages``."""

    gen_id: int
    messages: list[Message]


@dataclass(frozen=True)
class LlmClose:
    """Generation ``gen_id`` was cancelled: stop it and free the model (cheap)."""

    gen_id: int


@dataclass(frozen=True)
class TtsJob:
    gen_id: int
    seq: int
    text: str


@dataclass(frozen=True)
class PrefillJob:
    """Spare time: pre-fill the conversation so far, and the words the user has said
    so far (``user_prefix``), so the reply's prompt is mostly evaluated before it is due."""

    history: list[Message]
    user_prefix: str = ""


@dataclass(frozen=True)
class ToolChoice:
    """Decide which tool (if any) the reply ``gen_id`` calls for ``text``: ``chooser``
    (a voice.tools.choose.Chooser) shortlists and the LLM fills the call under a grammar.
    The result is a voice.tools.choose.Call or None."""

    gen_id: int
    text: str
    chooser: Any


Job = AsrJob | EotJob | LlmStep | LlmClose | TtsJob | PrefillJob | ToolChoice


def engine_of(job: Job) -> str:
    """Which engine runs ``job``: "asr", "tts" or "llm" (for error codes)."""
    if isinstance(job, AsrJob):
        return "asr"
    return "tts" if isinstance(job, TtsJob) else "llm"


# -- output actions (for the transport) --------------------------------------------------


@dataclass(frozen=True)
class Play:
    """Queue ``audio`` (16 kHz mono float) of reply ``reply_id`` after what is queued."""

    reply_id: int
    seq: int
    audio: Float32Array


@dataclass(frozen=True)
class Pause:
    reply_id: int


@dataclass(frozen=True)
class Resume:
    reply_id: int


@dataclass(frozen=True)
class Clear:
    """Drop every queued sample of ``reply_id`` now (barge-in)."""

    reply_id: int


Action = Play | Pause | Resume | Clear
