"""The wake gate in the session: idle until the wake word, awake for a turn and a
follow-up window (see :mod:`voice.conversation.wake` for the behaviour).

Idle, the listener is *dormant*: it follows speech with the VAD but runs no
recognition pass and reports nothing, and keeps only the last few seconds of the
utterance being spoken. The wake-word detector hears every frame. On a detection the
open utterance becomes the turn from just before the detection point (the phrase and
any talk before it are cut off, and what of the phrase is left is taken off its
words), so "Hey Jarvis, what time is it?" in one breath is answered as "what time is
it?". Awake, everything works as without a wake word: barge-in needs no word.

Push-to-talk, a typed turn and a reply (a greeting, ``say``) wake it too: each is the
user or the assistant starting a conversation. A stop phrase ("stop", "never mind")
sends it back to idle at once, skipping the follow-up window; idle, a stop phrase is
not heard (nothing is recognised) and there is nothing to stop: a reply playing keeps
it awake.
"""

from __future__ import annotations

from voice.audio.format import SAMPLE_RATE, float_to_pcm16
from voice.conversation.actions import Play
from voice.conversation.session.base import Float32Array
from voice.conversation.session.turn_taking import TurnTaking
from voice.events import Event, Idle, Wake


class WakeWord(TurnTaking):
    """The session's side of the wake gate (``self.wake``; None: always listening)."""

    def _conversing(self) -> bool:
        """Anything going on that the follow-up window must wait for."""
        return (
            self._reply is not None
            or self._spec is not None
            or self._talking
            or self.listener.open_utterance is not None
            or self.listener.busy
        )

    def _watch_wake(self, frame: Float32Array) -> None:
        gate = self.wake
        if gate is None:
            return
        now = self.now_ms
        if gate.hear(float_to_pcm16(frame), now):
            self._wake_up("wake_word", gate.cut_ms(now))
        elif not gate.awake and (self._reply is not None or self._talking):
            self._wake_up("talk" if self._talking else "reply")
        if not gate.awake:
            return
        if self._stop_heard and not self._conversing():
            self._go_idle("stop")
        elif self._conversing():
            gate.busy(now)
        elif gate.due_to_sleep(now):
            self._go_idle("quiet")

    def _wake_up(self, reason: str, cut_ms: float | None = None) -> None:
        gate = self.wake
        assert gate is not None
        self._stop_heard = False
        gate.woke(self.now_ms)
        start = self.now_ms if cut_ms is None else cut_ms
        if cut_ms is None:
            self.listener.dormant = False
            events: list[Event] = []
        else:
            events = self.listener.wake(round(cut_ms * SAMPLE_RATE / 1000), gate.unwake)
        self._emit(Wake(audio_ms=self.now_ms, reason=reason, phrase=gate.phrase, start_ms=start))
        if reason == "wake_word" and gate.earcon is not None and self._reply is None:
            self._emit(Play(self._next_gen, 0, gate.earcon))  # an id of its own: no reply's
            self._next_gen += 1
        for event in events:
            self._on_listener_event(event)

    def _go_idle(self, reason: str) -> None:
        gate = self.wake
        assert gate is not None
        gate.slept()
        self._stop_heard = False
        self.listener.dormant = True
        self._emit(Idle(audio_ms=self.now_ms, reason=reason))

    def _typed_turn_wakes(self) -> None:
        """A typed turn is the user starting a conversation: awake before it is answered."""
        if self.wake is not None and not self.wake.awake:
            self._wake_up("text")
