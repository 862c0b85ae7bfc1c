"""What every part of the session shares: its settings, its state, its output.

The session is split by what it decides (see :mod:`voice.conversation.session`);
the parts work on one conversation, so its state is declared once, here, each
field grouped with the part that owns it. Also here: the ``[conversation]``
settings, the echo canceller a transport may plug in, and the helpers every part
uses (emitting output, making and cancelling generations, reading the user's words,
the state shown to the user).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from voice.conversation.actions import Action
from voice.conversation.bargein import BargeIn
from voice.conversation.continuation import Answered, Continuation, Joined
from voice.conversation.generation import Generation, Playback
from voice.conversation.metrics import TurnRecord
from voice.conversation.turns import EndOfTurn, TurnConfig, split_words
from voice.conversation.wake import WakeGate
from voice.errors import VoiceError
from voice.events import Error, Event, Idle, StateChanged
from voice.knowledge.policy import Decision, context_prompt, turn_decision
from voice.listen.listener import Listener
from voice.reply.history import History, Prompt
from voice.speak.chunking import SentenceChunker
from voice.think.backend import Message

Float32Array = npt.NDArray[np.float32]
Output = Event | Action

FILLER_GEN = 0  # the gen id of the pre-synthesised filler phrase
APOLOGY_GEN = -1  # ... and of the apology said when an engine fails mid-turn
PHRASE_GENS = (FILLER_GEN, APOLOGY_GEN)  # phrases rendered ahead, in spare time


@dataclass
class ConversationConfig:
    """The ``[conversation]`` settings."""

    speculate: bool = True  # start the reply when the user pauses, before the turn ends
    # Speculations per utterance at most: a long turn's pauses after whole sentences
    # spend them, and its real end then has no reply prepared (200-300 ms later).
    speculation_retries: int = 8
    # Prepare the reply this long before the pause's end-of-turn silence runs out, not
    # as soon as the pause's words are known: after unfinished words (2 s) a reply
    # prepared at once is thrown away most of the time, and spends one of the turn's
    # speculations. 0: prepare at once. Not used with turn.use_model (its opinion
    # comes with the speculation).
    speculation_lead_ms: int = 400
    presynthesize: bool = True  # also synthesise the first chunk while speculating
    barge_in: bool = True  # False: half-duplex, the user cannot interrupt
    barge_in_pause_ms: int = 80  # voiced run over a reply that pauses the output
    resume_after_ms: int = 1500  # paused this long without words: resume
    blip_resume_ms: int = 300  # a voiced run that never became speech: resume after this
    barge_in_max_no_speech: float = 0.5  # words over a reply count only below this
    backchannels: str = (
        "uh-huh mm-hmm mhm uh huh um hm hmm mm mmm ah aha oh wow yeah yes yep yup okay ok "
        "right sure"
    )
    stop_phrases: str = "stop|cancel|quiet|be quiet|shut up|never mind|nevermind|enough"
    filler_after_ms: int = 0  # say the filler if no reply audio this long after the turn; 0 off
    filler_text: str = "Let me think."
    first_chunk_max_chars: int = 16  # first audio sooner (`voice chat`: tts.first_chunk_max_chars)
    idle_prefill: bool = True  # pre-fill history, and the user's words while they speak
    lane_threads: int = 2  # CPU threads of every engine pass (they run one at a time)
    # An engine pass that takes longer has failed (a hung LLM server, a stuck model):
    # the session says the apology and goes on. One pass is a token, a sentence of
    # speech or one recognition window (at most 20 s of audio): normally well under 2 s.
    job_timeout_s: float = 8.0
    apology_text: str = "Sorry, something went wrong. Please say that again."  # "" = silent
    greeting: str = ""  # said when a conversation starts (voice serve, voice listen)
    # The conversation's language (ISO 639-1: "en", "zh", "fr"...): what Whisper listens
    # for, what the reply is asked to be in, which turn-taking rules apply and which
    # voice speaks (voice.config.with_language spreads it to those sections).
    language: str = "en"


class EchoCanceller(Protocol):
    """Removes the assistant's own voice from the microphone, given what was played.

    Transports that play through speakers hand the session the frame they played
    at the same moment as the microphone frame (the reference); the desktop and
    browser transports plug their canceller in here, so the assistant does not
    hear itself and interrupt itself.
    """

    def process(self, mic: Float32Array, reference: Float32Array) -> Float32Array: ...


BeforeReply = Callable[[str], str | None]
# The user's words -> what the knowledge says of them (voice.knowledge.policy.Grounding).
Grounder = Callable[[str], Decision]


_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, always a lone half of a pair


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a JavaScript text box cut inside an
    emoji, then sent as JSON "\\ud83d") would make every engine's UTF-8 encoding raise;
    it becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


class SessionBase:
    """The state of one conversation, and the helpers all the parts use."""

    def __init__(
        self,
        listener: Listener,
        history: History,
        config: ConversationConfig | None = None,
        turn: TurnConfig | None = None,
        eot_available: bool = False,
        echo: EchoCanceller | None = None,
        wake: WakeGate | None = None,
    ) -> None:
        self.listener = listener
        self.history = history
        self.config = config or ConversationConfig()
        self.turn = turn or TurnConfig()
        self.eot_available = eot_available and self.turn.use_model
        self.echo = echo
        self.end_of_turn = EndOfTurn(listener.endpointer.config, self.turn, self.eot_available)
        self._backchannels = set(split_words(self.config.backchannels))
        self._stop_phrases = {
            " ".join(split_words(p)) for p in self.config.stop_phrases.split("|") if p.strip()
        }
        self._out: list[Output] = []
        self._state = "listening"
        self._next_gen = 1
        # Speculation: the reply prepared while the user pauses.
        self._spec: Generation | None = None
        self._spec_tries: dict[int, int] = {}
        self._spec_deferred: int | None = None  # the utterance whose reply waits to be prepared
        # The silence inside the open utterance at the last frame (its id, ms): the
        # speaker's pauses, for their pace (turn.use_pace).
        self._silence_seen: tuple[int | None, int] = (None, 0)
        # The reply being said, what of it is queued and played, and its turn's figures.
        self._reply: Generation | None = None
        self._playback = Playback()
        self._turn: TurnRecord | None = None
        # Barge-in, resume and continued turns.
        self._barge = BargeIn(
            self.config.barge_in_pause_ms,
            self.config.resume_after_ms,
            self.config.blip_resume_ms,
            self._has_words,
            self.config.barge_in_max_no_speech,
        )
        self._continuation = Continuation(
            self.turn.continue_turns,
            self.turn.continue_window_ms,
            self.turn.continue_max_heard_ms,
            self.turn.continue_late_max_heard_ms,
        )
        self._answered: Answered | None = None  # the last reply, played to its end
        self._joined: dict[int, Joined] = {}  # turns being heard again, until their final
        self._ignored: set[int] = set()  # half-duplex: speech over a reply
        # Engine work: generations to close, pre-fill, the phrases rendered ahead.
        self._closing: deque[int] = deque()
        self._unanswered = ""  # a turn whose reply was cut before a word was heard
        self._prefilled = False
        self._prefilled_words = ""
        self._filler: Float32Array | None = None
        self._filler_sent = False
        self._apology: Float32Array | None = None
        self._asr_failed: set[int] = set()  # utterances with a failed recognition pass
        # Between the final transcript (or a typed turn) and the LLM: return the text to
        # answer (the same, or changed), or None when the application handled the turn
        # itself ("louder", a game command). Never called for speculation.
        self.before_reply: BeforeReply | None = None
        self.push_to_talk = False  # the microphone counts only while talking is True
        self._talking = False
        self._next_typed = -2  # typed turns: negative ids (-1 is a reply to no turn)
        # Behind a wake word (session/wake.py): idle until it is heard; a stop phrase
        # sends it back to idle as soon as nothing is going on.
        self.wake = wake
        self._stop_heard = False
        if wake is not None:  # a conversation behind a wake word starts idle
            listener.dormant = True
            self._emit(Idle(audio_ms=self.now_ms, reason="start"))
        # Grounded answers (docs/knowledge.md): every reply to the user's words, spoken,
        # typed or speculative, asks it first; an entry or the unknown reply is then said
        # as written (no LLM), and the model only gets what the knowledge leaves to it.
        self.grounding: Grounder | None = None
        # The question back the last reply asked ("Do you mean: ...?"), until the next
        # reply ends: the visitor's "yes" or "no" answers it.
        self._asked: Decision | None = None

    # -- clock and output --------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self.listener.now_ms

    @property
    def state(self) -> str:
        return self._state

    @property
    def busy(self) -> bool:
        """Anything still to hear, think, say or play."""
        return (
            self.listener.busy
            or self._reply is not None
            or self._spec is not None
            or bool(self._closing)
        )

    def take(self) -> list[Output]:
        """Events and output actions produced since the last call, in order."""
        out, self._out = self._out, []
        return out

    def _emit(self, item: Output) -> None:
        self._out.append(item)

    # -- generations -------------------------------------------------------------------------

    def _gen(self, gen_id: int) -> Generation | None:
        for gen in (self._reply, self._spec):
            if gen is not None and gen.gen_id == gen_id:
                return gen
        return None

    def _new_gen(
        self, uid: int, text: str, messages: list[Message], speculative: bool
    ) -> Generation:
        gen = Generation(
            gen_id=self._next_gen,
            utterance_id=uid,
            user_text=text,
            messages=messages,
            speculative=speculative,
            chunker=SentenceChunker(first_chunk_max_chars=self.config.first_chunk_max_chars),
            started_ms=self.now_ms,
        )
        self._next_gen += 1
        # Words that call a tool (session/tooling.py) act first; the knowledge answers
        # the rest.
        mark_tool_choice = getattr(self, "_mark_tool_choice", None)
        calls = mark_tool_choice is not None and mark_tool_choice(gen)
        if self.grounding is not None and text.strip() and not calls:
            self._ground(gen)
        return gen

    def _ground(self, gen: Generation) -> None:
        """Say the knowledge's answer as written, or give the model its facts."""
        assert self.grounding is not None
        try:
            decision, asked = turn_decision(
                self.grounding, self._asked, gen.user_text, self.history.last_said()
            )
        except Exception as exc:  # retrieval must never silence the assistant
            problem = f"knowledge lookup failed: {type(exc).__name__}: {exc}"
            self._emit(Error(audio_ms=self.now_ms, code="knowledge_failed", message=problem))
            return
        if decision is None:
            return  # "pardon?" with nothing said yet: the model answers
        best = decision.matches[0] if decision.matches else None
        named = best is not None and decision.kind not in ("unknown", "repeat")
        gen.knowledge = (
            decision.kind,
            best.entry.heading if best is not None and named else "",
            best.confidence if best is not None else 0.0,
        )
        gen.asked = asked
        if decision.spoken_as_written:
            gen.said = True
            gen.add_delta(decision.text, self.now_ms)
            gen.finish_text()
        elif decision.kind == "context" and gen.messages:
            system, *rest = gen.messages
            messages = [Message(system.role, context_prompt(system.content, decision.text))]
            old = gen.messages
            seed, limits = (old.seed, old.limits) if isinstance(old, Prompt) else (None, None)
            gen.messages = Prompt([*messages, *rest], seed, limits)

    def _cancel_gen(self, gen: Generation) -> None:
        cancel_tool = getattr(self, "_cancel_tool", None)
        if cancel_tool is not None and gen.tool_stage:
            cancel_tool(gen)
        if gen.llm_opened and not gen.llm_done:
            self._closing.append(gen.gen_id)
        gen.llm_done = True
        gen.pending_chunks.clear()

    # -- the user's words --------------------------------------------------------------------

    def _has_words(self, text: str) -> bool:
        """Words that make speech over a reply a turn: anything but backchannels."""
        return any(w not in self._backchannels for w in split_words(text))

    def _is_stop(self, text: str) -> bool:
        return " ".join(split_words(text)) in self._stop_phrases

    def _turn_text(self, text: str) -> str:
        return f"{self._unanswered} {text}".strip() if self._unanswered else text

    def _whole_turn_text(self, uid: int, text: str) -> str:
        """``text``, a pass over utterance ``uid``; for a turn heard again with its
        continuation, with the continuation's words it lost (:meth:`Joined.with_lost_words`)."""
        joined = self._joined.get(uid)
        return text if joined is None else joined.with_lost_words(text)

    def _prompt(self, text: str) -> list[Message] | None:
        try:
            return self.history.prompt_for(text)
        except VoiceError as exc:
            self._emit(Error(audio_ms=self.now_ms, code=exc.code, message=str(exc)))
            return None

    # -- state -------------------------------------------------------------------------------

    def _update_state(self) -> None:
        if self._reply is not None:
            if self._barge.paused:
                state = "paused"
            elif self._playback.first_played_ms is not None:
                state = "speaking"
            else:
                state = "thinking"
        elif self._spec is not None and self.config.speculate:
            state = "speculating"
        elif self.listener.open_utterance is not None:
            state = "user_speaking"
        elif self.wake is not None and not self.wake.awake:
            state = "idle"  # behind the wake word: speech is not recognised
        else:
            state = "listening"
        self._set_state(state)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            previous, self._state = self._state, state
            self._emit(StateChanged(audio_ms=self.now_ms, state=state, previous=previous))
