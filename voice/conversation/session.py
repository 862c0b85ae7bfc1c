"""The conversation as a Sans-I/O core: audio frames and engine results in, events,
engine jobs and output actions out, all on the input's audio clock.

:class:`Session` owns turn-taking and nothing else. It never runs a model,
never reads a clock and never touches a device, so files, a browser, a desk
microphone and scripted tests drive the same code. Its callers:

- feed it the microphone (``feed``) and report what the output played
  (``on_played``);
- run the jobs it hands out (``next_job``), one at a time, and give back the
  results (``on_result``): the order of ``next_job`` *is* the CPU schedule;
- carry out its output actions and show its events (``take``).

Turn-taking, in brief:

- When the user pauses and a recognition pass already covers everything the
  final transcript needs, the session *speculates*: it asks the LLM how likely
  the turn is over (which sets the end-of-turn silence, see
  :mod:`voice.conversation.turns`) and starts the reply, and the first
  sentence's synthesis, on those words, holding everything back. If the turn
  ends with the same words, the held reply is released at once; if the user
  speaks on or the words change, it is cancelled and never shown or played.
- Speech over a reply first *pauses* the output (a hair trigger on a short
  voiced run). Words (not a backchannel) make it a barge-in: the queued audio
  is cleared, generation stops and history keeps only what was heard. No
  words within ``resume_after_ms``, or only a backchannel, and the output
  resumes where it paused.
- Words soon after the turn ended, over a reply barely heard, are the rest of
  that turn (:mod:`voice.conversation.continuation`): the reply stops and leaves
  the history, and the listener hears the whole turn again as one, which the
  next reply answers.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE
from voice.conversation.actions import (
    Action,
    AsrJob,
    Clear,
    EotJob,
    Job,
    LlmClose,
    LlmStep,
    Pause,
    Play,
    PrefillJob,
    Resume,
    TtsJob,
    engine_of,
)
from voice.conversation.bargein import BargeIn, Decision
from voice.conversation.continuation import Continuation
from voice.conversation.generation import Generation, Playback, SpokenChunk
from voice.conversation.metrics import TurnRecord
from voice.conversation.turns import EndOfTurn, TurnConfig, same_turn_text, split_words
from voice.errors import VoiceError
from voice.events import (
    AudioChunk,
    Error,
    Event,
    Final,
    Interrupted,
    Partial,
    Paused,
    PlaybackStarted,
    ReplyEnded,
    ReplyStarted,
    ReplyText,
    Resumed,
    SpeculationCancelled,
    SpeculationStarted,
    SpeechStart,
    StateChanged,
    TurnContinued,
)
from voice.listen.listener import Listener
from voice.listen.whisper import Transcription
from voice.reply.history import History
from voice.speak.chunking import SentenceChunker
from voice.think.backend import Message

log = logging.getLogger(__name__)

Float32Array = npt.NDArray[np.float32]
Output = Event | Action

FILLER_GEN = 0  # the gen id of the pre-synthesised filler phrase
APOLOGY_GEN = -1  # ... and of the apology said when an engine fails mid-turn
PHRASE_GENS = (FILLER_GEN, APOLOGY_GEN)  # phrases rendered ahead, in spare time


@dataclass
class ConversationConfig:
    """The ``[conversation]`` settings."""

    speculate: bool = True  # start the reply when the user pauses, before the turn ends
    speculation_retries: int = 3  # speculations per utterance at most
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


class EchoCanceller(Protocol):
    """Removes the assistant's own voice from the microphone, given what was played.

    Transports that play through speakers hand the session the frame they played
    at the same moment as the microphone frame (the reference); the desktop and
    browser transports plug their canceller in here, so the assistant does not
    hear itself and interrupt itself.
    """

    def process(self, mic: Float32Array, reference: Float32Array) -> Float32Array: ...


BeforeReply = Callable[[str], str | None]


_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, always a lone half of a pair


def valid_text(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (a JavaScript text box cut inside an
    emoji, then sent as JSON "\\ud83d") would make every engine's UTF-8 encoding raise;
    it becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


class Session:
    def __init__(
        self,
        listener: Listener,
        history: History,
        config: ConversationConfig | None = None,
        turn: TurnConfig | None = None,
        eot_available: bool = False,
        echo: EchoCanceller | None = None,
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
        self._spec: Generation | None = None
        self._reply: Generation | None = None
        self._playback = Playback()
        self._turn: TurnRecord | None = None
        self._barge = BargeIn(
            self.config.barge_in_pause_ms,
            self.config.resume_after_ms,
            self.config.blip_resume_ms,
            self._has_words,
            self.config.barge_in_max_no_speech,
        )
        self._continuation = Continuation(
            self.turn.continue_turns, self.turn.continue_window_ms, self.turn.continue_max_heard_ms
        )
        self._ignored: set[int] = set()  # half-duplex: speech over a reply
        self._spec_tries: dict[int, int] = {}
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

    # -- clock and output ----------------------------------------------------------------

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

    @property
    def audio_ahead_ms(self) -> float:
        """Reply audio queued but not yet played: how long the listener stays covered
        if the CPU turns to other work now (a scheduler across sessions uses it)."""
        if self._reply is None:
            return 0.0
        ahead = self._playback.queued - self._playback.played
        return max(0, ahead) * 1000.0 / SAMPLE_RATE

    def all_audio_queued(self, reply_id: int) -> bool:
        """Every sample of ``reply_id`` has been handed out in ``Play`` actions (or the
        reply is over): a transport may tell its client the audio is complete."""
        reply = self._reply
        return reply is None or reply.gen_id != reply_id or reply.synthesis_done

    @property
    def awaiting_first_audio(self) -> bool:
        """A reply is due and none of its audio is queued: the user waits in silence."""
        return self._reply is not None and self._playback.queued == 0

    def take(self) -> list[Output]:
        """Events and output actions produced since the last call, in order."""
        out, self._out = self._out, []
        return out

    def _emit(self, item: Output) -> None:
        self._out.append(item)

    # -- input ---------------------------------------------------------------------------

    def feed(self, frame: Float32Array, reference: Float32Array | None = None) -> None:
        """Microphone audio (16 kHz mono float, any length; 20 ms frames are natural),
        and optionally what the speaker played meanwhile, for the echo canceller."""
        if self.echo is not None and reference is not None:
            frame = self.echo.process(frame, reference)
        if self.push_to_talk and not self._talking:
            frame = np.zeros_like(frame)  # the clock runs on; what the mic hears does not count
        for event in self.listener.feed(frame):
            self._on_listener_event(event)
        self._watch_barge_in()
        self._watch_user_resumed()
        self._watch_filler()
        self._update_state()

    def talk(self, down: bool) -> None:
        """Push-to-talk: the button went down (the user speaks) or up (the turn is over
        now, no end-of-turn silence to wait for)."""
        self._talking = down
        if not down:
            self.finish()

    def say(self, text: str) -> int:
        """Speak ``text`` as the assistant (a greeting, an NPC's bark) through the same
        path as a reply: interruptible, truncated to what was heard. A reply already
        playing is cut first (one voice at a time). Returns its reply id."""
        self.stop_reply()
        gen = self._start_own_reply()
        gen.said = True
        gen.add_delta(valid_text(text), self.now_ms)
        gen.finish_text()
        self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=gen.text))
        self._update_state()
        return gen.gen_id

    def _start_own_reply(self) -> Generation:
        """A reply that answers no user turn (something said, an apology): no LLM, no
        turn metrics; utterance id -1."""
        gen = self._new_gen(-1, "", [], speculative=False)
        self._reply, self._playback, self._turn = gen, Playback(), None
        self._barge.reset()
        self._emit(
            ReplyStarted(
                audio_ms=self.now_ms,
                reply_id=gen.gen_id,
                utterance_id=-1,
                text="",
                speculative=False,
            )
        )
        return gen

    def reset(self) -> None:
        """Forget the conversation (a kiosk's next visitor): the reply stops, history and
        every carried-over word (an unanswered turn, pre-filled words) are dropped."""
        self.stop_reply()
        self.history.clear()
        self._unanswered = ""
        self._prefilled = False
        self._prefilled_words = ""
        self._spec_tries.clear()
        self._asr_failed.clear()

    def stop_reply(self) -> None:
        """Stop the reply in progress now (an application's stop button, a new visitor):
        its queued audio is cleared and history keeps what was heard."""
        self._cancel_spec("stopped")
        self._cut_reply()
        self._update_state()

    def _cut_reply(self) -> None:
        if self._reply is not None:
            self._emit(Clear(self._reply.gen_id))
            self._cancel_gen(self._reply)
            self._end_reply(interrupted=True)

    def submit_text(self, text: str) -> None:
        """A typed user turn (a text box, a game's chat): answered like a spoken one,
        from now. It interrupts a reply in progress."""
        text = valid_text(text)
        if not text.strip():
            return
        uid, self._next_typed = self._next_typed, self._next_typed - 1
        final = Final(
            audio_ms=self.now_ms, utterance_id=uid, text=text.strip(), start_ms=self.now_ms,
            end_ms=self.now_ms, compute_ms=0.0,
        )  # fmt: skip
        self._emit(final)
        if self._reply is not None:
            self._barge_in(self.now_ms)
        self._on_final(final)
        self._update_state()

    def finish(self) -> None:
        """End of input: close the open utterance (its final still needs a pass)."""
        for event in self.listener.finish():
            self._on_listener_event(event)
        self._update_state()

    def close(self) -> None:
        """The conversation is over: free what its listener holds natively."""
        self.listener.close()

    def on_played(self, reply_id: int, samples: int) -> None:
        """The output reports how many samples of ``reply_id`` it has played in total."""
        if self._reply is None or reply_id != self._reply.gen_id:
            return
        self._playback.played = max(self._playback.played, samples)
        if self._playback.first_played_ms is None and samples > 0:
            self._playback.first_played_ms = self.now_ms
            self._emit(PlaybackStarted(audio_ms=self.now_ms, reply_id=reply_id))
        self._end_reply_if_played()
        self._update_state()

    def _end_reply_if_played(self) -> None:
        """The reply is over once all its text is synthesised and all of that played.
        Checked on each playback report and whenever synthesis finishes: a reply whose
        last sentences made no sound (an emoji, a code block) gets no more reports."""
        if (
            self._reply is not None
            and self._reply.synthesis_done
            and not self._barge.paused
            and self._playback.played >= self._playback.queued
        ):
            self._end_reply(interrupted=False)

    # -- engine work -----------------------------------------------------------------------

    def next_job(self) -> Job | None:
        """The work the CPU should do next, or None. Run it, then call ``on_result``."""
        if self._closing:
            return LlmClose(self._closing.popleft())
        request = self.listener.next_request()
        if request is not None:  # recognition first: nothing may starve the ears
            return AsrJob(request)
        for gen in (self._reply, self._spec):
            if gen is not None:
                job = self._gen_job(gen)
                if job is not None:
                    return job
        if self.config.apology_text and self._apology is None:
            self._apology = np.zeros(0, dtype=np.float32)  # asked once
            return TtsJob(APOLOGY_GEN, 0, self.config.apology_text)
        if self.config.filler_after_ms > 0 and self._filler is None:
            self._filler = np.zeros(0, dtype=np.float32)  # asked once
            return TtsJob(FILLER_GEN, 0, self.config.filler_text)
        if self.config.idle_prefill and self._reply is None and self._spec is None:
            return self._prefill_job()
        return None

    def take_back(self, job: Job) -> bool:
        """Un-ask ``job`` before it ran, if it is one that can wait: a live partial pass
        or a pre-fill. A scheduler serving several sessions calls this to offer the CPU
        to a session with urgent work instead; the job will be asked for again."""
        if isinstance(job, AsrJob) and job.request.live:
            self.listener.take_back(job.request)
            return True
        if isinstance(job, PrefillJob):
            if job.user_prefix:
                self._prefilled_words = ""
            else:
                self._prefilled = False
            return True
        if isinstance(job, TtsJob) and job.gen_id in PHRASE_GENS:
            if job.gen_id == APOLOGY_GEN:  # rendered ahead in spare time: asked again
                self._apology = None
            else:
                self._filler = None
            return True
        return False

    def _prefill_job(self) -> PrefillJob | None:
        """The words committed so far are part of the reply's prompt whatever else the
        user says: evaluate them while the CPU is free, not after the turn."""
        uid = self.listener.open_utterance
        if uid is not None and uid not in self._ignored and uid != self._barge.candidate:
            words = self._turn_text(self.listener.committed_text(uid))
            if words and words != self._prefilled_words:
                self._prefilled_words = words
                return PrefillJob(self.history.so_far(), words)
            return None
        if not self._prefilled:
            self._prefilled = True
            return PrefillJob(self.history.so_far())
        return None

    def _gen_job(self, gen: Generation) -> Job | None:
        if gen.eot_pending:
            gen.eot_pending = False
            return EotJob(gen.gen_id, gen.messages[:-1], gen.messages[-1].content)
        speak = not gen.speculative or (self.config.presynthesize and gen.next_seq == 0)
        if speak and gen.pending_chunks and not gen.tts_busy:
            gen.tts_busy = True
            seq, gen.next_seq = gen.next_seq, gen.next_seq + 1
            return TtsJob(gen.gen_id, seq, gen.pending_chunks.popleft())
        generating = not gen.speculative or self.config.speculate
        if generating and not gen.llm_done:
            gen.llm_opened = True
            return LlmStep(gen.gen_id, gen.messages)
        return None

    def on_result(self, job: Job, result: object) -> None:
        """The result of a job from ``next_job``: a Transcription, an end-of-turn
        probability, a text delta (None at the end), or audio."""
        if isinstance(job, AsrJob):
            assert isinstance(result, Transcription)
            for event in self.listener.on_result(job.request, result):
                self._on_listener_event(event)
            self._maybe_speculate()
        elif isinstance(job, EotJob):
            gen = self._gen(job.gen_id)
            if gen is not None and isinstance(result, float):
                gen.eot_probability = result
                self._judge(gen)
        elif isinstance(job, LlmStep):
            self._on_delta(job.gen_id, result if isinstance(result, str) else None)
            self._end_reply_if_played()
        elif isinstance(job, TtsJob):
            audio = np.asarray(result, dtype=np.float32).reshape(-1)
            self._on_audio(job, audio)
            self._end_reply_if_played()
        self._update_state()

    def on_job_failed(self, job: Job, error: BaseException) -> None:
        """An engine raised or timed out: report it, end what depended on it, and if
        the user was waiting for an answer, say the apology (the session goes on)."""
        engine = engine_of(job)
        if isinstance(job, PrefillJob | LlmClose | EotJob):
            # Spare-time and clean-up work: nobody waits on it. Logged, not shown.
            log.warning("%s failed (nobody was waiting on it): %s", type(job).__name__, error)
            if isinstance(job, EotJob):
                gen = self._gen(job.gen_id)
                if gen is not None:
                    self._judge(gen)  # judged on the words alone
            return
        code = error.code if isinstance(error, VoiceError) else f"{engine}_failed"
        error_event = Error(audio_ms=self.now_ms, code=code, message=f"{engine}: {error}")
        if isinstance(job, AsrJob):
            uid = job.request.utterance_id
            if uid not in self._asr_failed:  # once per utterance, not once per pass
                self._asr_failed.add(uid)
                self._emit(error_event)
            self.on_result(job, Transcription(words=[]))  # the pass found nothing
            return
        self._emit(error_event)
        if isinstance(job, TtsJob) and job.gen_id in PHRASE_GENS:
            pass  # no phrase: nothing is said in its place
        elif isinstance(job, LlmStep | TtsJob):
            gen = self._gen(job.gen_id)
            if gen is None:
                pass
            elif gen is self._spec:
                self._cancel_spec("engine error")
            else:
                self._apologize()
        self._update_state()

    def _apologize(self) -> None:
        """End the reply in progress (or start one) with the pre-rendered apology, so
        the user hears that something failed instead of silence. It plays through the
        same path as any reply: a barge-in stops it, and history keeps what was heard."""
        apology = self._apology if self._apology is not None and len(self._apology) else None
        reply = self._reply
        if reply is None:
            if apology is None:
                return
            reply = self._start_own_reply()
        self._cancel_gen(reply)
        reply.tts_busy = False
        reply.failed = True
        if apology is not None:
            self._play(reply, reply.next_seq, self.config.apology_text, apology)
            reply.next_seq += 1
        if self._playback.played >= self._playback.queued:
            if self._barge.paused:  # a noise holds it: the output must let it go
                self._emit(Clear(reply.gen_id))
            self._end_reply(interrupted=apology is None)  # nothing (more) to play

    def _gen(self, gen_id: int) -> Generation | None:
        for gen in (self._reply, self._spec):
            if gen is not None and gen.gen_id == gen_id:
                return gen
        return None

    def _on_delta(self, gen_id: int, delta: str | None) -> None:
        gen = self._gen(gen_id)
        if gen is None:
            return  # a cancelled generation's last step: dropped
        if delta is None:
            tail = gen.finish_text()
            if gen is self._reply and tail:
                self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=tail))
            return
        spoken = gen.add_delta(delta, self.now_ms)
        if gen.stopped_early:  # it said enough (or began to loop): free the model now
            self._closing.append(gen.gen_id)
        if gen is self._reply and spoken:
            self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=spoken))

    def _on_audio(self, job: TtsJob, audio: Float32Array) -> None:
        if job.gen_id == FILLER_GEN:
            self._filler = audio
            return
        if job.gen_id == APOLOGY_GEN:
            self._apology = audio
            return
        gen = self._gen(job.gen_id)
        if gen is None:
            return
        gen.tts_busy = False
        if gen.first_audio_ready_ms is None:
            gen.first_audio_ready_ms = self.now_ms
        if gen is self._reply:
            self._play(gen, job.seq, job.text, audio)
        else:
            gen.held_audio.append((job.seq, job.text, audio))

    def _play(self, gen: Generation, seq: int, text: str, audio: Float32Array) -> None:
        self._playback.chunks.append(SpokenChunk(seq, text, len(audio)))
        self._emit(
            AudioChunk(
                audio_ms=self.now_ms,
                reply_id=gen.gen_id,
                seq=seq,
                text=text,
                duration_ms=len(audio) * 1000.0 / SAMPLE_RATE,
            )
        )
        self._emit(Play(gen.gen_id, seq, audio))

    # -- listener events -----------------------------------------------------------------

    def _on_listener_event(self, event: Event) -> None:
        self._emit(event)
        if isinstance(event, SpeechStart):
            self._on_speech_start(event)
        elif isinstance(event, Partial):
            if self._continues(event.utterance_id, event.text, event.no_speech_prob):
                return
            decision = self._barge.on_partial(event.utterance_id, event.text, event.no_speech_prob)
            self._decide(decision)
        elif isinstance(event, Final):
            self._on_final(event)

    def _on_speech_start(self, event: SpeechStart) -> None:
        self.end_of_turn.await_judgement()
        reply = self._reply
        if reply is None:
            return
        if not self.config.barge_in:
            self._ignored.add(event.utterance_id)
            return
        turn_end = None if self._turn is None else self._turn.user_end_ms
        played = self._heard_ms()
        # What had played by the speech's onset: detection comes a syllable or two later,
        # and the output has played on until now, or until the hair trigger paused it.
        stopped = self._barge.paused_at if self._barge.paused_at is not None else self.now_ms
        heard = max(0.0, played - max(0.0, stopped - event.start_ms))
        self._continuation.on_speech_start(
            event.utterance_id, event.start_ms, reply.utterance_id, turn_end, heard, played
        )
        self._decide(self._barge.on_speech_start(event.utterance_id, self.now_ms), event.start_ms)

    def _on_final(self, event: Final) -> None:
        uid = event.utterance_id
        silence = self.end_of_turn.silence_used(uid)
        self._spec_tries.pop(uid, None)
        lost = uid in self._asr_failed and not split_words(event.text)
        self._asr_failed.discard(uid)
        if uid in self._ignored:
            self._ignored.discard(uid)
            return
        if self._continues(uid, event.text, event.no_speech_prob, ended=True):
            return  # heard again with the turn it continues: that final is the one to answer
        self._continuation.forget(uid)
        decision = self._barge.on_final(uid, event.text, event.no_speech_prob)
        if decision is None and self._reply is not None and self._has_words(event.text):
            decision = "interrupt"  # one reply at a time: never two voices at once
        if decision is not None:
            self._decide(decision)
            if decision == "resume":
                return  # a cough, a door, an "uh-huh": the reply goes on
        if self._is_stop(event.text):
            self._cancel_spec("stop phrase")
            self._unanswered = ""
            return
        if not split_words(event.text):
            self._cancel_spec("no words")
            if lost and self._reply is None:
                self._apologize()  # the user's words are lost: ask them to say it again
            return
        text = self._turn_text(event.text)
        if self.before_reply is not None:
            answer = self._ask_application(text)
            if answer is None:  # the application took the turn
                self._cancel_spec("handled by the application")
                self._unanswered = ""
                return
            text = answer
        self._cut_reply()  # the hook had it say something: one voice at a time
        spec = self._spec
        if spec is not None and spec.utterance_id == uid and same_turn_text(spec.user_text, text):
            self._spec = None
            self._start_reply(spec, event, silence)
            return
        self._cancel_spec("transcript changed")
        messages = self._prompt(text)
        if messages is not None:
            gen = self._new_gen(uid, text, messages, speculative=False)
            self._start_reply(gen, event, silence)

    def _heard_ms(self) -> float:
        return self._playback.played * 1000.0 / SAMPLE_RATE

    def _continues(self, uid: int, text: str, no_speech_prob: float, ended: bool = False) -> bool:
        """If ``uid`` now has words and continues the turn the live reply answers, join
        the two: the reply stops and leaves no trace in the history, and the listener
        hears the whole turn again (its final answers it). False if not, or if that
        audio is gone (then the ordinary barge-in and the unanswered words take it)."""
        if not self._barge.is_turn(text, no_speech_prob) or self._is_stop(text):
            return False  # a cough, an "uh-huh", or "stop": not more of the turn
        reply = self._reply
        heard = None if reply is None else self._heard_ms()
        previous = self._continuation.previous_of(uid, heard)
        if previous is None or reply is None or reply.utterance_id != previous:
            return False
        rejoin = self.listener.rehear if ended else self.listener.join
        if not rejoin(uid, previous):
            return False
        self._barge.interrupted_now(self.now_ms, self.now_ms - self.listener.onset_run_ms)
        self._emit(Clear(reply.gen_id))
        self._emit(Interrupted(audio_ms=self.now_ms, reply_id=reply.gen_id,
                               heard_text=self._playback.heard_text(),
                               played_ms=self._heard_ms()))  # fmt: skip
        self._emit(TurnContinued(audio_ms=self.now_ms, utterance_id=uid, continues=previous,
                                 reply_id=reply.gen_id, heard_ms=self._heard_ms()))  # fmt: skip
        self._cancel_gen(reply)
        self._end_reply(interrupted=True, remember=False)
        self._spec_tries.pop(uid, None)
        self.end_of_turn.await_judgement()
        return True

    def _ask_application(self, text: str) -> str | None:
        """The before_reply hook; a hook that raises is reported, and the turn is
        answered as it was said (an application bug must not silence the assistant)."""
        assert self.before_reply is not None
        try:
            return self.before_reply(text)
        except Exception as exc:
            problem = f"before_reply raised {type(exc).__name__}: {exc}"
            self._emit(Error(audio_ms=self.now_ms, code="hook_failed", message=problem))
            return text

    def _has_words(self, text: str) -> bool:
        """Words that make speech over a reply a turn: anything but backchannels."""
        return any(w not in self._backchannels for w in split_words(text))

    def _is_stop(self, text: str) -> bool:
        return " ".join(split_words(text)) in self._stop_phrases

    def _turn_text(self, text: str) -> str:
        return f"{self._unanswered} {text}".strip() if self._unanswered else text

    def _prompt(self, text: str) -> list[Message] | None:
        try:
            return self.history.prompt_for(text)
        except VoiceError as exc:
            self._emit(Error(audio_ms=self.now_ms, code=exc.code, message=str(exc)))
            return None

    # -- speculation and the end of the turn ---------------------------------------------

    def _maybe_speculate(self) -> None:
        uid = self.listener.open_utterance
        if uid is None or uid == self._barge.candidate or uid in self._ignored:
            return
        words = self.listener.prefetched_final(uid)
        if not words or not split_words(words):
            return
        if self._is_stop(words):  # nothing to prepare, but the turn should end on time
            self.end_of_turn.judge(uid, words, None)
            return
        text = self._turn_text(words)
        spec = self._spec
        if spec is not None and spec.utterance_id == uid and same_turn_text(spec.user_text, text):
            return
        self._cancel_spec("transcript changed")
        tries = self._spec_tries.get(uid, 0)
        if tries >= self.config.speculation_retries:
            self.end_of_turn.judge(uid, self._judged_text(uid, text), None)
            return
        messages = self._prompt(text)
        if messages is None:
            return
        self._spec_tries[uid] = tries + 1
        gen = self._new_gen(uid, text, messages, speculative=True)
        gen.eot_pending = self.eot_available
        self._spec = gen
        self._judge(gen)
        if self.config.speculate:
            self._emit(
                SpeculationStarted(
                    audio_ms=self.now_ms, utterance_id=uid, gen_id=gen.gen_id, text=text
                )
            )

    def _judge(self, gen: Generation) -> None:
        uid = gen.utterance_id
        if self.listener.open_utterance == uid:
            text = self._judged_text(uid, gen.user_text)
            self.end_of_turn.judge(uid, text, gen.eot_probability)

    def _judged_text(self, uid: int, text: str) -> str:
        """What the end of the turn is judged on: the words the user actually said before
        the pause, not the ending Whisper made up for them ("...the door to see." when
        only "...the door to" was said, which reads as finished)."""
        if not self.turn.use_word_timing:
            return text
        spoken = self.listener.spoken_before_pause(uid)
        return text if spoken is None else self._turn_text(spoken)

    def _watch_user_resumed(self) -> None:
        spec = self._spec
        if (
            spec is not None
            and self.listener.open_utterance == spec.utterance_id
            and self.listener.endpointer.silence_ms == 0
        ):
            self._cancel_spec("user went on")
            self.end_of_turn.await_judgement()

    def _cancel_spec(self, reason: str) -> None:
        spec, self._spec = self._spec, None
        if spec is None:
            return
        self._cancel_gen(spec)
        if self.config.speculate:
            self._emit(
                SpeculationCancelled(audio_ms=self.now_ms, gen_id=spec.gen_id, reason=reason)
            )

    def _cancel_gen(self, gen: Generation) -> None:
        if gen.llm_opened and not gen.llm_done:
            self._closing.append(gen.gen_id)
        gen.llm_done = True
        gen.pending_chunks.clear()

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
        return gen

    # -- the reply -------------------------------------------------------------------------

    def _start_reply(self, gen: Generation, final: Final, end_silence_ms: int) -> None:
        speculative = gen.speculative and self.config.speculate
        gen.speculative = False
        self._reply = gen
        self._playback = Playback()
        self._barge.reset()
        self._filler_sent = False
        self._unanswered = ""
        self._prefilled = False
        self._turn = TurnRecord(
            uid=final.utterance_id,
            user_start_ms=final.start_ms,
            user_end_ms=final.end_ms,
            asr_final_ms=final.compute_ms,
            end_silence_ms=end_silence_ms,
            speculative=speculative,
        )
        self._emit(
            ReplyStarted(
                audio_ms=self.now_ms,
                reply_id=gen.gen_id,
                utterance_id=final.utterance_id,
                text=gen.user_text,
                speculative=speculative,
            )
        )
        if gen.text:
            self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=gen.text))
        held, gen.held_audio = gen.held_audio, []
        for seq, text, audio in held:
            self._play(gen, seq, text, audio)
        speaking = self.listener.open_utterance
        if speaking is not None and speaking != final.utterance_id and self.config.barge_in:
            # The user already speaks again: that speech is over this reply from its start,
            # and may be the rest of the turn it answers.
            onset = self.listener.open_onset_ms
            if onset is not None:
                self._continuation.on_speech_start(
                    speaking, onset, gen.utterance_id, final.end_ms, heard_ms=0.0
                )
            self._decide(self._barge.on_speech_start(speaking, self.now_ms))

    def _end_reply(self, interrupted: bool, remember: bool = True) -> None:
        """``remember``: history keeps what was heard (False: the reply answered half a
        turn the user went on with, see ``_continues``)."""
        gen, self._reply = self._reply, None
        if gen is None:
            return
        cut = interrupted or gen.failed
        heard = self._playback.heard_text() if cut else gen.text.strip()
        self._emit(
            ReplyEnded(
                audio_ms=self.now_ms,
                reply_id=gen.gen_id,
                text=gen.text,
                heard_text=heard,
                interrupted=interrupted,
            )
        )
        if not remember:
            pass
        elif heard and gen.user_text:
            self.history.add_turn(gen.user_text, heard)
        elif heard and gen.said:
            self.history.add_said(heard)
        elif interrupted:
            self._unanswered = gen.user_text  # heard nothing: the next words continue it
        if self._turn is not None:
            barge_in = self._barge.reaction_ms
            self._emit(self._turn.event(gen, self._playback, self.now_ms, barge_in, interrupted))
            self._turn = None
        self._barge.reset()

    # -- barge-in ----------------------------------------------------------------------------

    def _watch_barge_in(self) -> None:
        if self._reply is not None and self.config.barge_in:
            run = self.listener.onset_run_ms
            speaking = self.listener.open_utterance is not None
            self._decide(self._barge.on_frame(self.now_ms, run, speaking))

    def _decide(self, decision: Decision, onset_ms: float | None = None) -> None:
        onset = self.now_ms - self.listener.onset_run_ms if onset_ms is None else onset_ms
        if decision == "pause":
            self._pause(onset)
        elif decision == "resume":
            self._resume()
        elif decision == "interrupt":
            self._barge_in(onset)

    def _pause(self, onset_ms: float) -> None:
        reply = self._reply
        if reply is None or self._barge.paused:
            return
        self._barge.paused_now(self.now_ms, onset_ms)
        self._emit(Pause(reply.gen_id))
        self._emit(Paused(audio_ms=self.now_ms, reply_id=reply.gen_id))

    def _resume(self) -> None:
        reply = self._reply
        if reply is None or not self._barge.paused:
            return
        self._barge.resumed()
        self._emit(Resume(reply.gen_id))
        self._emit(Resumed(audio_ms=self.now_ms, reply_id=reply.gen_id))
        self.on_played(reply.gen_id, self._playback.played)

    def _barge_in(self, onset_ms: float) -> None:
        reply = self._reply
        if reply is None:
            return
        self._barge.interrupted_now(self.now_ms, onset_ms)
        self._emit(Clear(reply.gen_id))
        self._emit(
            Interrupted(
                audio_ms=self.now_ms,
                reply_id=reply.gen_id,
                heard_text=self._playback.heard_text(),
                played_ms=self._playback.played * 1000.0 / SAMPLE_RATE,
            )
        )
        self._set_state("interrupted")
        self._cancel_gen(reply)
        self._end_reply(interrupted=True)

    # -- filler ------------------------------------------------------------------------------

    def _watch_filler(self) -> None:
        reply, turn, filler = self._reply, self._turn, self._filler
        if (
            reply is None
            or turn is None
            or filler is None
            or not len(filler)
            or self._filler_sent
            or self._playback.chunks
            or self.config.filler_after_ms <= 0
            or self._barge.paused
        ):
            return
        if self.now_ms - turn.user_end_ms >= self.config.filler_after_ms:
            self._filler_sent = True
            self._play(reply, -1, "", filler)

    # -- state -----------------------------------------------------------------------------

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
        else:
            state = "listening"
        self._set_state(state)

    def _set_state(self, state: str) -> None:
        if state != self._state:
            previous, self._state = self._state, state
            self._emit(StateChanged(audio_ms=self.now_ms, state=state, previous=previous))
