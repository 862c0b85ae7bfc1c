"""Speculation: preparing the reply while the user pauses, before the turn has ended.

When the user pauses and a recognition pass already covers everything the final
transcript needs, the session judges the words (which sets the end-of-turn silence,
see :mod:`voice.conversation.turns`; with the LLM's opinion where that is on) and
starts the reply, and the first sentence's synthesis, on those words, holding
everything back: at once where the words look finished, and only
``speculation_lead_ms`` before the silence runs out where they do not (most pauses
after "the", "and" or "um" end with the user going on). If the
turn ends with the same words, the held reply is released at once (see
:mod:`~voice.conversation.session.turn_taking`); if the user speaks on or the words
change, it is cancelled and never shown or played.
"""

from __future__ import annotations

from voice.conversation.generation import Generation
from voice.conversation.session.base import SessionBase
from voice.conversation.turns import same_turn_text, split_words
from voice.events import SpeculationCancelled, SpeculationStarted


class Speculation(SessionBase):
    """Starts, judges and cancels the speculative reply; never plays anything."""

    def _maybe_speculate(self) -> None:
        uid = self.listener.open_utterance
        if uid is None or uid in self._ignored:
            return
        candidate = uid == self._barge.candidate  # speech over a reply: no second reply
        if candidate and not self._barge.held:
            return
        words = self.listener.prefetched_final(uid)
        if not words or not split_words(words):
            return
        if candidate:  # words that may continue the turn: nothing to prepare; judge its end
            self._judge_words(uid, words)
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
            self._judge_words(uid, text)
            return
        if self._too_soon_to_prepare(uid, text):
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

    def _too_soon_to_prepare(self, uid: int, text: str) -> bool:
        """Judge the pause's words now; whether preparing their reply should wait until
        ``speculation_lead_ms`` before the silence they were given runs out
        (``_watch_deferred_speculation`` starts it then, if the user is still silent)."""
        lead = self.config.speculation_lead_ms
        if lead <= 0 or self.eot_available:
            return False
        self._judge_words(uid, text)
        self._spec_deferred = uid if self._silence_left_ms() > lead else None
        return self._spec_deferred is not None

    def _watch_deferred_speculation(self) -> None:
        uid = self._spec_deferred
        if uid is None:
            return
        if self.listener.open_utterance != uid or self.listener.endpointer.silence_ms == 0:
            self._spec_deferred = None  # over, or the user went on: the next pause decides
        elif self._silence_left_ms() <= self.config.speculation_lead_ms:
            self._spec_deferred = None
            self._maybe_speculate()

    def _silence_left_ms(self) -> int:
        """How much more silence ends the open utterance's turn, as judged now."""
        endpointer = self.listener.endpointer
        return endpointer.config.end_silence_ms - endpointer.quiet_ms

    def _judge(self, gen: Generation) -> None:
        uid = gen.utterance_id
        if self.listener.open_utterance == uid:
            coming = self.eot_available and gen.eot_probability is None and not gen.eot_failed
            self._judge_words(uid, gen.user_text, gen.eot_probability, coming)

    def _judge_words(
        self, uid: int, text: str, eot: float | None = None, model_coming: bool = False
    ) -> None:
        """Judge the end of the turn on the words the user actually said before the
        pause, not the ending Whisper made up for them ("...the door to see." when only
        "...the door to" was said, which reads as finished)."""
        spoken = self.listener.spoken_before_pause(uid) if self.turn.use_word_timing else None
        dropped = cut_off = False
        if spoken is not None:
            said, unspoken = spoken
            dropped, cut_off = unspoken.words > 0, unspoken.cut_off
            text = self._turn_text(said)
        text = self._whole_turn_text(uid, text)  # a turn heard again may lose its last words
        held_s = self.listener.held_before_pause(uid)  # a filler Whisper did not write
        self.end_of_turn.judge(uid, text, eot, model_coming, dropped, cut_off, held_s)

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
