"""The event vocabulary: the public API shared by the CLI, the browser, embedders and tests.

Every event has a stable ``type`` name and ``audio_ms``: the position in the
input audio stream at which the event became known (audio time, not wall
clock). Events that come from a model pass also carry ``compute_ms``, the time
that pass took. ``to_dict()`` gives the JSON form that front ends print and
send. Names are only ever added, never renamed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, kw_only=True)
class Event:
    type: ClassVar[str] = "event"
    audio_ms: float

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, float):
                data[key] = round(value, 1)
        return {"type": self.type, **data}


@dataclass(frozen=True, kw_only=True)
class SpeechStart(Event):
    """The user started speaking; ``start_ms`` is the onset (detected a little later)."""

    type: ClassVar[str] = "speech_start"
    utterance_id: int
    start_ms: float
    text: str = ""
    compute_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SpeechEnd(Event):
    """The endpointer decided the utterance is over; ``end_ms`` is the end of the last speech."""

    type: ClassVar[str] = "speech_end"
    utterance_id: int
    start_ms: float
    end_ms: float
    text: str = ""
    compute_ms: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Partial(Event):
    """A live hypothesis: ``committed`` words never change again, ``unstable`` may."""

    type: ClassVar[str] = "partial"
    utterance_id: int
    text: str
    committed: str
    unstable: str
    compute_ms: float


@dataclass(frozen=True, kw_only=True)
class Final(Event):
    """The utterance's transcript; it starts with every word ever committed for it."""

    type: ClassVar[str] = "final"
    utterance_id: int
    text: str
    start_ms: float
    end_ms: float
    compute_ms: float


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """Something failed; ``code`` is stable, ``message`` says what to do."""

    type: ClassVar[str] = "error"
    code: str
    message: str
