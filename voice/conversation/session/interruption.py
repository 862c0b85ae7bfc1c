"""Barge-in and resume: what the session does when the user speaks over a reply.

Speech over a reply first *pauses* the output (a hair trigger on a short voiced
run). Words (not a backchannel) make it a barge-in: the queued audio is cleared,
generation stops and history keeps only what was heard. No words within
``resume_after_ms``, or only a backchannel, and the output resumes where it
paused. Words soon after the turn ended, over a reply barely heard, are the rest
of that turn (:mod:`voice.conversation.continuation`): the same cut, but the reply
leaves the history and the whole turn is heard again.
"""

from __future__ import annotations

from voice.conversation.actions import Clear, Pause, Resume
from voice.conversation.bargein import Decision
from voice.conversation.continuation import Answered, Heard, Joined
from voice.conversation.session.playback import PlaybackAccounting
from voice.conversation.turns import split_words
from voice.events import (
    Interrupted,
    Paused,
    Resumed,
    SpeechStart,
    TurnContinued,
    TurnRestored,
)

# Words over a reply heard for over turn.continue_max_heard_ms join the turn on a partial
# only from this many: the stop phrases have at most two.
JOIN_WORDS = 3


class Interruptions(PlaybackAccounting):
    """Speech over a reply: pause on a hair trigger, then resume, cut or rejoin.

    The decisions are :class:`~voice.conversation.bargein.BargeIn`'s and
    :class:`~voice.conversation.continuation.Continuation`'s; this carries them out
    on the reply and says so in events and output actions."""

    def _on_speech_start(self, event: SpeechStart) -> None:
        """Speech began: over a reply, it may pause it now and may be the rest of the
        turn that reply answers (how much of the reply was heard by the onset decides)."""
        self.end_of_turn.await_judgement()
        reply = self._reply
        if reply is None:
            self._may_continue_answered(event)
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
        if reply.tool_call is None:  # a reply that acts is never joined to what follows
            self._continuation.on_speech_start(
                event.utterance_id, event.start_ms, reply.utterance_id, turn_end, heard, played
            )
        patient = self._continuation.may_continue(event.utterance_id)
        decision = self._barge.on_speech_start(event.utterance_id, self.now_ms, patient)
        self._decide(decision, event.start_ms)

    def _may_continue_answered(self, event: SpeechStart) -> None:
        """Speech after a reply played to its end may still be the rest of the turn it
        answered, if all of that reply was short enough for its first words to join
        (``turn.continue_max_heard_ms``; see :class:`Answered`). Not to the late limit:
        that allows for a reply playing on while the VAD hears the onset late, and a
        reply that is over played on over nothing."""
        answered = self._answered
        if (
            answered is not None
            and self.turn.continue_after_short_reply
            and answered.heard_ms <= self.turn.continue_max_heard_ms
        ):
            self._continuation.on_speech_start(
                event.utterance_id, event.start_ms, answered.utterance_id,
                answered.turn_end_ms, answered.heard_ms,
            )  # fmt: skip

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

    def _barge_in(
        self, onset_ms: float, remember: bool = True, continued: TurnContinued | None = None
    ) -> None:
        """Words over the reply cut it where the speech began: its queued audio is
        cleared, generation stops and the reply ends at what was heard.

        ``remember``: history keeps what was heard, and the session shows the state
        "interrupted". False when the words are the rest of the turn the reply
        answered (``continued`` says which, see :meth:`_continues`): the reply was
        premature, not interrupted; it leaves no trace, and the whole turn is
        answered again."""
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
                played_ms=self._heard_ms(),
            )
        )
        if continued is not None:
            self._emit(continued)
        if remember:
            self._set_state("interrupted")
        self._cancel_gen(reply)
        self._end_reply(interrupted=True, remember=remember)

    def _continues(self, uid: int, text: str, no_speech_prob: float, ended: bool = False) -> bool:
        """If ``uid`` now has words and continues the turn the live reply answers, join
        the two: the reply stops and leaves no trace in the history, and the listener
        hears the whole turn again (its final answers it). False if not, or if that
        audio is gone (then the ordinary barge-in and the unanswered words take it)."""
        if not self._could_be_more_of_turn(text, no_speech_prob):
            return False
        target = self._reply_to_continue()
        heard = None if target is None else target.heard_ms
        if not ended and self._continuation.is_late(uid, heard) and not self._many_words(text):
            return False  # late: more words decide, see _holds_for_final
        pause = self._continuation.pause_before(uid)
        previous = self._continuation.previous_of(uid, heard)
        if previous is None or target is None or previous != target.utterance_id:
            return False
        rejoin = self.listener.rehear if ended else self.listener.join
        if not rejoin(uid, previous):
            return False
        if pause is not None:  # the turn went on after a pause the assistant took too soon
            self.end_of_turn.observe_joined_pause(uid, round(pause))
        continued = TurnContinued(audio_ms=self.now_ms, utterance_id=uid, continues=previous,
                                  reply_id=target.reply_id, heard_ms=target.heard_ms)  # fmt: skip
        if self._reply is not None:
            heard_text = self._playback.heard_text()
            self._joined[uid] = Joined(
                self._reply.user_text, heard_text, previous, target.reply_id, went_on=text
            )
            onset = self.now_ms - self.listener.onset_run_ms
            self._barge_in(onset, remember=False, continued=continued)
        elif isinstance(target, Answered):  # over already: it leaves the history all the same
            self.history.take_back_turn(target.user_text, target.reply_text)
            self._joined[uid] = Joined(
                target.user_text, target.reply_text, previous, target.reply_id, went_on=text
            )
            self._answered = None
            self._emit(continued)
        self._spec_tries.pop(uid, None)
        self.end_of_turn.await_judgement()
        return True

    def _joined_turn_stopped(self, uid: int, joined: Joined | None, text: str) -> bool:
        """Whether ``text``, the final of the turn ``joined`` heard again with its
        continuation ``uid``, adds only a stop phrase to the turn (a first partial
        misheard the "stop" and joined it): then the exchange goes back into the history
        as far as it was heard, as a stop over the reply would have left it, nothing
        more is said, and ``turn_restored`` tells the client to show it again."""
        if joined is None:
            return False
        stop = next((words for words in joined.added_words(text) if self._is_stop(words)), None)
        if stop is None:
            return False
        if joined.heard_reply:
            self.history.add_turn(joined.user_text, joined.heard_reply)
        restored = TurnRestored(audio_ms=self.now_ms, utterance_id=uid,
                                continues=joined.continues, reply_id=joined.reply_id,
                                user_text=joined.user_text, heard_text=joined.heard_reply,
                                stop_text=stop)  # fmt: skip
        self._emit(restored)
        self.end_of_turn.forget_join(uid)  # the user stopped the reply: no pause of theirs
        return True

    def _reply_to_continue(self) -> Heard | None:
        """The reply whose turn speech may continue: the live one, as far as it has
        played, or else the last one played to its end."""
        reply = self._reply
        if reply is None:
            return self._answered
        return Heard(reply.utterance_id, reply.gen_id, self._heard_ms())

    @staticmethod
    def _many_words(text: str) -> bool:
        """More words than a stop phrase has, even misheard ("start." for "stop")."""
        return len(split_words(text)) >= JOIN_WORDS

    def _holds_for_final(self, uid: int, text: str, no_speech_prob: float) -> bool:
        """Words over a paused reply heard a little too long for its first words to join
        the turn (over ``turn.continue_max_heard_ms``): the reply stays paused and the
        final decides (:meth:`_continues`, or a barge-in), unless a partial has
        ``JOIN_WORDS`` words first (joined then, so the whole turn is heard again while
        the user speaks, not after). A stop phrase stops it now."""
        heard = None if self._reply is None else self._heard_ms()
        late = self._continuation.is_late(uid, heard) and self._barge.paused
        if not late or not self._could_be_more_of_turn(text, no_speech_prob):
            return False
        self._barge.hold()
        return True

    def _could_be_more_of_turn(self, text: str, no_speech_prob: float) -> bool:
        """Words, not a cough, an "uh-huh" or a stop phrase."""
        return self._barge.is_turn(text, no_speech_prob) and not self._is_stop(text)

    def _cut_reply(self) -> None:
        """Stop the reply now, not for speech over it (the application's stop, one voice
        at a time): cleared, and remembered as far as it was heard."""
        if self._reply is not None:
            self._emit(Clear(self._reply.gen_id))
            self._cancel_gen(self._reply)
            self._end_reply(interrupted=True)
