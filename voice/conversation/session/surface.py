"""The session's surface: what its callers call (see :mod:`voice.conversation.session`).

Input (the microphone, typed turns, push-to-talk, stop and reset) and engine work:
the next job to run, in the order the CPU should run it, and its result or failure.
"""

from __future__ import annotations

import logging

import numpy as np

from voice.conversation.actions import (
    AsrJob,
    EotJob,
    Job,
    LlmClose,
    LlmStep,
    PrefillJob,
    ToolChoice,
    TtsJob,
    engine_of,
)
from voice.conversation.generation import Generation
from voice.conversation.session.base import (
    APOLOGY_GEN,
    FILLER_GEN,
    PHRASE_GENS,
    Float32Array,
    valid_text,
)
from voice.conversation.session.tooling import ToolCalls
from voice.conversation.session.wake import WakeWord
from voice.errors import VoiceError
from voice.events import Error, Final, ReplyText
from voice.listen.whisper import Transcription

log = logging.getLogger(__name__)


class Session(WakeWord, ToolCalls):
    """One conversation, Sans-I/O: frames and engine results in, output out.

    Feed it audio (``feed``) and what played (``on_played``); run what ``next_job``
    asks, one at a time, and give back ``on_result`` (or ``on_job_failed``); carry
    out and show what ``take`` returns."""

    # -- input -------------------------------------------------------------------------------

    def feed(self, frame: Float32Array, reference: Float32Array | None = None) -> None:
        """Microphone audio (16 kHz mono float, any length; 20 ms frames are natural),
        and optionally what the speaker played meanwhile, for the echo canceller."""
        if self.echo is not None and reference is not None:
            frame = self.echo.process(frame, reference)
        if self.push_to_talk and not self._talking:
            frame = np.zeros_like(frame)  # the clock runs on; what the mic hears does not count
        for event in self.listener.feed(frame):
            self._on_listener_event(event)
        self._watch_wake(frame)
        self._watch_pace()
        self._watch_barge_in()
        self._watch_user_resumed()
        self._watch_deferred_speculation()
        self._watch_filler()
        self._watch_tools()
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

    def submit_text(self, text: str) -> None:
        """A typed user turn (a text box, a game's chat): answered like a spoken one,
        from now. It interrupts a reply in progress."""
        text = valid_text(text)
        if not text.strip():
            return
        self._typed_turn_wakes()
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
        if self.wake is not None:
            self.wake.close()

    def reset(self) -> None:
        """Forget the conversation (a kiosk's next visitor): the reply stops, history and
        every carried-over word (an unanswered turn, pre-filled words) are dropped, and so
        is what the end of turn learned of the last speaker's pauses."""
        self.stop_reply()
        self.history.clear()
        self.end_of_turn.forget_speaker()
        self._unanswered = ""
        self._asked = None
        self._prefilled = False
        self._prefilled_words = ""
        self._spec_tries.clear()
        self._asr_failed.clear()
        if self.wake is not None and self.wake.awake:
            self._go_idle("reset")  # the next visitor wakes it

    def stop_reply(self) -> None:
        """Stop the reply in progress now (an application's stop button, a new visitor):
        its queued audio is cleared and history keeps what was heard."""
        self._cancel_spec("stopped")
        self._cut_reply()
        self._update_state()

    # -- engine work -------------------------------------------------------------------------

    def next_job(self) -> Job | None:
        """The work the CPU should do next, or None. Run it, then call ``on_result``."""
        if self._closing:
            return LlmClose(self._closing.popleft())
        self._watch_tools()
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
        if gen.tool_stage:  # the tools first; a running call holds the model's turn
            return self._tool_job(gen) if generating else None
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
        elif isinstance(job, ToolChoice):
            self._on_tool_choice(job, result)
        elif isinstance(job, TtsJob):
            audio = np.asarray(result, dtype=np.float32).reshape(-1)
            self._on_audio(job, audio)
            self._end_reply_if_played()
        self._update_state()

    def on_job_failed(self, job: Job, error: BaseException) -> None:
        """An engine raised or timed out: report it, end what depended on it, and if
        the user was waiting for an answer, say the apology (the session goes on)."""
        engine = engine_of(job)
        if isinstance(job, ToolChoice):
            self._tool_choice_failed(job, error)
            self._update_state()
            return
        if isinstance(job, PrefillJob | LlmClose | EotJob):
            # Spare-time and clean-up work: nobody waits on it. Logged, not shown.
            log.warning("%s failed (nobody was waiting on it): %s", type(job).__name__, error)
            if isinstance(job, EotJob):
                gen = self._gen(job.gen_id)
                if gen is not None:
                    gen.eot_failed = True
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

    def _on_delta(self, gen_id: int, delta: str | None) -> None:
        gen = self._gen(gen_id)
        if gen is None:
            return  # a cancelled generation's last step: dropped
        if delta is None:
            tail = gen.finish_text()
            gen.take_restart()  # sampled again? The finished stream is closed already
            if gen is self._reply and tail:
                self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=tail))
            return
        spoken = gen.add_delta(delta, self.now_ms)
        if gen.stopped_early or gen.take_restart():  # it said enough (or began to loop,
            self._closing.append(gen.gen_id)  # or is sampled again): free the model now
        if gen is self._reply and spoken:
            self._emit(ReplyText(audio_ms=self.now_ms, reply_id=gen.gen_id, text=spoken))
