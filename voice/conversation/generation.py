"""One assistant reply in the making: text from the LLM, chunks for the voice,
audio for the output, and what of it the user has actually heard.

A generation starts either speculatively (the user paused; nothing of it is
shown or played until the turn really ends with the same words) or as a
committed reply. Both accumulate the same way, so committing a speculation is
just releasing what it already holds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.reply.guard import ReplyGuard, ReplyLimits
from voice.speak.chunking import SentenceChunker
from voice.speak.directions import StageDirections
from voice.think.backend import Message

Float32Array = npt.NDArray[np.float32]


@dataclass
class SpokenChunk:
    seq: int
    text: str  # "" for a filler that is not part of the reply
    samples: int


@dataclass
class Generation:
    gen_id: int
    utterance_id: int
    user_text: str
    messages: list[Message]
    speculative: bool
    chunker: SentenceChunker
    started_ms: float
    eot_pending: bool = False  # the model's end-of-turn probability is yet to be asked for
    eot_probability: float | None = None
    eot_failed: bool = False  # it was asked for and will not come
    text_parts: list[str] = field(default_factory=list)
    pending_chunks: deque[str] = field(default_factory=deque)
    next_seq: int = 0
    llm_opened: bool = False  # an LlmStep was handed out: the lane holds a generation
    llm_done: bool = False
    tts_busy: bool = False
    failed: bool = False  # an engine failed: it ends with the apology, not its text
    said: bool = False  # text the application had the assistant say (no LLM)
    held_audio: list[tuple[int, str, Float32Array]] = field(default_factory=list)
    first_token_ms: float | None = None
    first_audio_ready_ms: float | None = None
    directions: StageDirections = field(default_factory=StageDirections)
    # The reply's limits (sentences, length, loops) come with its prompt (a History's
    # Prompt); a plain list of messages has none.
    guard: ReplyGuard = field(init=False)
    # How the knowledge answered it (kind, the entry's heading, its confidence), if asked
    knowledge: tuple[str, str, float] | None = None
    asked: Any = None  # a voice.knowledge.policy.Decision("ask") this reply says
    attempt: int = 0  # 1, 2...: the reply sampled again (the guard let nothing through)
    restarted: bool = False  # ... and the lane's stream of the last attempt is to close
    _ends_space: bool = False
    # Tools (session/tooling.py): "choose" (ask the tools), "choosing", "call" (decided,
    # waits to be committed), "run" (running); "" = none, or over.
    tool_stage: str = ""
    tool_call: Any = None  # a voice.tools.choose.Call
    tool_run: Any = None  # a voice.conversation.toolcalls.ToolRun
    tool_note: str = ""  # the call and its outcome, in words, for history

    def __post_init__(self) -> None:
        self.guard = self._new_guard()

    def _new_guard(self) -> ReplyGuard:
        limits = getattr(self.messages, "limits", None) or ReplyLimits()
        return ReplyGuard(self.chunker, limits.for_attempt(self.attempt))

    def _sample_again(self) -> bool:
        """Nothing of the model's reply could be said (it only repeated an earlier
        reply, or looped): sample it again, if the prompt allows another try."""
        resampled = getattr(self.messages, "resampled", None)
        limits = getattr(self.messages, "limits", None)
        if self.said or resampled is None or limits is None or self.attempt >= limits.resamples:
            return False
        self.attempt += 1
        self.messages = resampled(self.attempt)
        self.restarted, self.llm_done = True, False
        self.directions = StageDirections()
        self._ends_space = False
        self.guard = self._new_guard()
        return True

    def take_restart(self) -> bool:
        """Whether the model's stream of an earlier attempt is to be closed (once)."""
        restarted, self.restarted = self.restarted, False
        return restarted

    @property
    def text(self) -> str:
        """What will be spoken: a model's text past where its guard stopped never is."""
        return "".join(self.text_parts)

    @property
    def stopped_early(self) -> bool:
        """The guard ended the reply (it said enough, or began to loop): the model may
        stop generating."""
        return self.guard.stopped

    def add_delta(self, delta: str, now_ms: float) -> str:
        """Take a delta from the LLM; returns the text it releases to be spoken (whole
        chunks, as the voice gets them)."""
        if self.first_token_ms is None:
            self.first_token_ms = now_ms
        if not self.said:  # the application's own words are spoken as given
            delta = self.directions.push(delta)
        if self._ends_space and delta.startswith(" "):
            delta = delta.lstrip(" ")  # "word (smiles) word": one space, not two
        if delta:
            self._ends_space = delta.endswith(" ")
        if self.said:
            return self._speak(self.chunker.push(delta))
        return self._speak(self.guard.push(delta))

    def finish_text(self) -> str:
        """The text is complete; returns the last of it to show (what the chunker and
        the direction filter held back, undecided, until the end)."""
        self.llm_done = True
        tail = self.directions.flush()
        if self.said:
            return self._speak(self.chunker.push(tail) + self.chunker.flush())
        return self._speak(self.guard.push(tail) + self.guard.flush())

    def _speak(self, chunks: list[str]) -> str:
        self.text_parts.extend(chunks)
        self.pending_chunks.extend(c for c in chunks if c.strip())
        over = self.guard.stopped or self.llm_done
        if over and not self.text.strip() and self._sample_again():
            return "".join(chunks)
        if self.guard.stopped:
            self.llm_done = True  # nothing more of it will be said
        return "".join(chunks)

    @property
    def synthesis_done(self) -> bool:
        return self.llm_done and not self.pending_chunks and not self.tts_busy


@dataclass
class Playback:
    """The output's account of one reply: what was queued and what was played."""

    chunks: list[SpokenChunk] = field(default_factory=list)
    played: int = 0  # samples, as the transport reports them
    first_played_ms: float | None = None

    @property
    def queued(self) -> int:
        return sum(c.samples for c in self.chunks)

    def heard_text(self) -> str:
        """The reply's words the user heard: whole chunks played, and the share of the
        chunk playing now in proportion to its samples played."""
        words: list[str] = []
        left = self.played
        for chunk in self.chunks:
            if left <= 0:
                break
            parts = chunk.text.split()
            if left >= chunk.samples:
                words.extend(parts)
            elif chunk.samples > 0:
                words.extend(parts[: int(len(parts) * left / chunk.samples)])
            left -= chunk.samples
        return " ".join(words)
