"""Turn-taking: what the listener's events mean for the conversation.

A partial transcript may continue the last turn or interrupt the reply; a final one
ends the user's turn: a stop phrase stops, a backchannel or a cough lets the reply
go on, the application's ``before_reply`` hook may take the turn, and otherwise it
is answered, by the speculative reply if it guessed the same words, or by a new one.
"""

from __future__ import annotations

from dataclasses import replace

from voice.conversation.generation import Generation, Playback
from voice.conversation.metrics import TurnRecord
from voice.conversation.session.interruption import Interruptions
from voice.conversation.session.speculation import Speculation
from voice.conversation.turns import same_turn_text, split_words
from voice.events import (
    Error,
    Event,
    Final,
    KnowledgeAnswer,
    Partial,
    ReplyStarted,
    ReplyText,
    SpeechStart,
)


class TurnTaking(Speculation, Interruptions):
    """The listener's events in, the reply started (or not) out."""

    def _on_listener_event(self, event: Event) -> None:
        if isinstance(event, Final):  # the turn's words, all of them
            event = replace(event, text=self._whole_turn_text(event.utterance_id, event.text))
        self._emit(event)
        if isinstance(event, SpeechStart):
            self._on_speech_start(event)
        elif isinstance(event, Partial):
            if self._continues(event.utterance_id, event.text, event.no_speech_prob):
                return
            if self._holds_for_final(event.utterance_id, event.text, event.no_speech_prob):
                return
            decision = self._barge.on_partial(event.utterance_id, event.text, event.no_speech_prob)
            self._decide(decision)
        elif isinstance(event, Final):
            self._on_final(event)

    def _watch_pace(self) -> None:
        """A silence inside the open utterance that the speech went on after is one of
        the speaker's pauses (the end of turn keeps their pace)."""
        uid = self.listener.open_utterance
        silence = self.listener.endpointer.silence_ms if uid is not None else 0
        seen_uid, seen = self._silence_seen
        if uid is not None and uid == seen_uid and silence < seen:
            self.end_of_turn.observe_pause(seen)
        self._silence_seen = (uid, silence)

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
        joined = self._joined.pop(uid, None)  # heard again with its continuation: this is it
        decision = self._barge.on_final(uid, event.text, event.no_speech_prob)
        if decision is None and self._reply is not None and self._has_words(event.text):
            decision = "interrupt"  # one reply at a time: never two voices at once
        if decision is not None:
            self._decide(decision)
            if decision == "resume":
                return  # a cough, a door, an "uh-huh": the reply goes on
        if self._is_stop(event.text) or self._joined_turn_stopped(uid, joined, event.text):
            self._cancel_spec("stop phrase")
            self._unanswered = ""
            self._stop_heard = True  # behind a wake word: idle at once (session/wake.py)
            return
        if not split_words(event.text):
            self._cancel_spec("no words")
            if lost and self._reply is None:
                self._apologize()  # the user's words are lost: ask them to say it again
            return
        if joined is None:  # a turn that ended where it seemed to (so far)
            self.end_of_turn.turn_answered()
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
        if gen.knowledge is not None:
            kind, entry, confidence = gen.knowledge
            self._emit(
                KnowledgeAnswer(
                    audio_ms=self.now_ms,
                    reply_id=gen.gen_id,
                    kind=kind,
                    entry=entry,
                    confidence=confidence,
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
            patient = self._continuation.may_continue(speaking)
            self._decide(self._barge.on_speech_start(speaking, self.now_ms, patient))
