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
    no_speech_prob: float = 0.0  # Whisper's "nobody spoke" probability for the pass


@dataclass(frozen=True, kw_only=True)
class Final(Event):
    """The utterance's transcript; it starts with every word ever committed for it."""

    type: ClassVar[str] = "final"
    utterance_id: int
    text: str
    start_ms: float
    end_ms: float
    compute_ms: float
    no_speech_prob: float = 0.0
    # The language it was heard in (ISO 639-1; with asr.languages, the one Whisper
    # picked among them); "" where the recogniser does not say.
    language: str = ""


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """Something failed; ``code`` is stable, ``message`` says what to do."""

    type: ClassVar[str] = "error"
    code: str
    message: str


# -- the conversation ------------------------------------------------------------------
#
# Assistant utterances are numbered by ``reply_id``; every event about one carries
# it, so a front end can drop anything that belongs to a reply it was told is over.


@dataclass(frozen=True, kw_only=True)
class StateChanged(Event):
    """The session's state: listening, user_speaking, speculating, thinking, speaking,
    paused (the user may be barging in) or interrupted."""

    type: ClassVar[str] = "state"
    state: str
    previous: str


@dataclass(frozen=True, kw_only=True)
class SpeculationStarted(Event):
    """The user paused: a reply to ``text`` is being prepared, not yet shown or spoken."""

    type: ClassVar[str] = "speculation_start"
    utterance_id: int
    gen_id: int
    text: str


@dataclass(frozen=True, kw_only=True)
class SpeculationCancelled(Event):
    """The prepared reply was thrown away (the user went on, or the transcript changed)."""

    type: ClassVar[str] = "speculation_cancel"
    gen_id: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class ReplyStarted(Event):
    """The assistant answers ``text`` (the user's turn); ``speculative`` if prepared early."""

    type: ClassVar[str] = "reply_start"
    reply_id: int
    utterance_id: int
    text: str
    speculative: bool


@dataclass(frozen=True, kw_only=True)
class ReplyText(Event):
    """A delta of the reply's text, as generated (it is spoken a little later)."""

    type: ClassVar[str] = "reply_text"
    reply_id: int
    text: str


@dataclass(frozen=True, kw_only=True)
class AudioChunk(Event):
    """Audio of chunk ``seq`` of a reply was handed to the output (the samples travel
    beside the event); ``text`` is what it says."""

    type: ClassVar[str] = "audio_chunk"
    reply_id: int
    seq: int
    text: str
    duration_ms: float


@dataclass(frozen=True, kw_only=True)
class PlaybackStarted(Event):
    """The first sample of a reply was played (as the output reports it)."""

    type: ClassVar[str] = "playback_start"
    reply_id: int


@dataclass(frozen=True, kw_only=True)
class ReplyEnded(Event):
    """A reply is over: all played, or interrupted; ``heard_text`` is what was played."""

    type: ClassVar[str] = "reply_end"
    reply_id: int
    text: str
    heard_text: str
    interrupted: bool


@dataclass(frozen=True, kw_only=True)
class Paused(Event):
    """User speech over the reply: output paused until we know whether it is a turn."""

    type: ClassVar[str] = "paused"
    reply_id: int


@dataclass(frozen=True, kw_only=True)
class Resumed(Event):
    """It was not a turn (noise, a cough, a backchannel): output resumes where it paused."""

    type: ClassVar[str] = "resumed"
    reply_id: int


@dataclass(frozen=True, kw_only=True)
class Interrupted(Event):
    """The user barged in: the reply's queued audio is dropped and its generation stopped."""

    type: ClassVar[str] = "interrupted"
    reply_id: int
    heard_text: str
    played_ms: float


@dataclass(frozen=True, kw_only=True)
class TurnContinued(Event):
    """The user went on after a pause that had ended their turn: utterance
    ``utterance_id`` joins ``continues`` as one turn, heard again as a whole. The reply
    to the first part (``reply_id``, -1 if none had started) stops, and leaves no trace
    in the history: it answered half a sentence, and the next reply answers all of it.
    A reply that had already played to its end leaves it too, when it was short enough
    to be barely heard (``turn.continue_max_heard_ms``). ``heard_ms``: how much of that
    reply had played."""

    type: ClassVar[str] = "turn_continued"
    utterance_id: int
    continues: int
    reply_id: int
    heard_ms: float


@dataclass(frozen=True, kw_only=True)
class TurnRestored(Event):
    """The speech that joined turn ``continues`` (utterance ``utterance_id``, after a
    :class:`TurnContinued`) added only a stop phrase, ``stop_text``: its first partial
    was misheard ("Start." for "stop") and joined it. It was a stop: nothing more is
    said, and the exchange goes back into the history as far as it was heard, as a stop
    over the reply leaves it: ``user_text`` and the reply's ``heard_text`` (if nothing
    of it was heard, "", and neither is kept). A client that took the exchange off the
    screen on ``turn_continued`` shows it again, then the stop, in place of the whole
    turn's ``final``."""

    type: ClassVar[str] = "turn_restored"
    utterance_id: int
    continues: int
    reply_id: int
    user_text: str
    heard_text: str
    stop_text: str


@dataclass(frozen=True, kw_only=True)
class TurnMetrics(Event):
    """Latency figures of one user turn and its reply (ms; None where it did not happen).

    ``voice_to_voice_ms``: end of the user's speech to the first reply sample played.
    ``barge_in_ms``: onset of speech over this reply to its audio stopping.
    """

    type: ClassVar[str] = "turn_metrics"
    turn_id: int
    reply_id: int
    user_text: str
    user_start_ms: float
    user_end_ms: float
    end_silence_ms: float
    eot_probability: float | None
    speculative: bool
    asr_final_ms: float | None
    llm_first_token_ms: float | None
    first_audio_ready_ms: float | None
    voice_to_voice_ms: float | None
    barge_in_ms: float | None
    interrupted: bool


# -- the wake word ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Wake(Event):
    """The assistant woke (behind a wake word, ``[wake] wake_word``): ``reason`` is
    "wake_word" (``phrase`` was heard; the user's turn begins at ``start_ms``, after the
    phrase), "talk" (push-to-talk), "text" (a typed turn) or "reply" (it speaks: a
    greeting, ``say``). From now on it hears speech without the word, until ``idle``."""

    type: ClassVar[str] = "wake"
    reason: str
    phrase: str
    start_ms: float


@dataclass(frozen=True, kw_only=True)
class Idle(Event):
    """Asleep behind the wake word: speech is not recognised until the word (or
    push-to-talk, a typed turn) wakes it. ``reason``: "start" (a conversation starts
    idle), "quiet" (the follow-up window passed with nothing said), "stop" (a stop
    phrase: the window is skipped) or "reset" (the conversation was forgotten)."""

    type: ClassVar[str] = "idle"
    reason: str


# -- grounded answers -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class KnowledgeAnswer(Event):
    """How the knowledge file (``[knowledge] path``) answered reply ``reply_id``, sent
    right after its ``reply_start``: ``kind`` "say" (``entry``'s answer, said as
    written), "unknown" (the unknown reply: a factual question the file does not
    cover), "context" (the model answers with the best entries in its prompt) or
    "chat" (small talk: the model answers as it would without knowledge) or "ask" (a
    weaker match, asked back: "Do you mean: where is the cafe?"; the visitor's "yes"
    gets ``entry``'s answer, "no" the unknown reply) or "repeat" (the last reply said
    again: "pardon?").
    ``confidence``: the best entry's, 0 where none matched."""

    type: ClassVar[str] = "knowledge"
    reply_id: int
    kind: str
    entry: str
    confidence: float


# -- tools ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ToolCall(Event):
    """The assistant calls a tool (docs/tools.md) for the reply ``reply_id``:
    ``arguments`` are checked against the tool's parameters; ``choose_ms`` is how long
    deciding the call took (shortlist and grammar-held model)."""

    type: ClassVar[str] = "tool_call"
    reply_id: int
    call_id: int
    name: str
    arguments: dict[str, Any]
    choose_ms: float


@dataclass(frozen=True, kw_only=True)
class ToolResult(Event):
    """A tool call is over: ``status`` is "ok" (``result`` is what it returned, as
    text), "error" (it raised), "timeout" (it ran past its limit and was abandoned) or
    "cancelled" (a barge-in: an async tool is cancelled, a sync one's result dropped).
    Every ``tool_call`` gets exactly one ``tool_result``."""

    type: ClassVar[str] = "tool_result"
    reply_id: int
    call_id: int
    name: str
    status: str
    result: str
    run_ms: float
