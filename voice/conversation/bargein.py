"""Speech over a reply: pause first, then decide, so noise never kills a reply.

Pure decisions over audio time, no I/O. The session tells :class:`BargeIn`
what it hears and carries out what it answers:

- a run of ``barge_in_pause_ms`` that the VAD's hair trigger heard (its
  ``onset``: Silero at a lower threshold) over a live reply: ``"pause"`` (the
  user hears the assistant stop at once; nothing is lost yet);
- a run that never becomes speech, once ``blip_resume_ms`` has passed:
  ``"resume"`` (a knock, a click);
- speech with no words for ``resume_after_ms``: ``"resume"``, for the rest of
  that utterance (a television goes on; only words stop it now); words that are
  not a backchannel, from a pass Whisper believes heard speech (no-speech
  probability under ``max_no_speech``): ``"interrupt"`` (whenever they come,
  until the utterance ends); a final without such words: ``"resume"``;
- words that may be the rest of the user's turn, to be decided by more of them
  (:meth:`hold`): nothing until the session decides, neither a resume nor a cut;
- speech that may be the rest of the user's turn (it began soon after the turn,
  over a reply barely heard: ``patient``) and has no words yet: the resume waits
  for a gap in it (``PATIENT_GAP_MS``), and the speech pauses the reply again
  when it goes on after such a gap. Whisper finds no words in some voices for
  seconds (a cold, a mumble), and resuming on the timer alone talked over them
  for 2.6 s. A run with no such gap for ``PATIENT_RUN_MAX_MS`` is not speech
  (music that began just after the turn): the reply resumes over it, as for any
  sound without words.

It also remembers the onset of the speech that stopped the output and when
the output stopped, for the turn's ``barge_in_ms``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

PATIENT_GAP_MS = 300  # patient speech: resume only once it has paused this long
PATIENT_RUN_MAX_MS = 3000  # ... unless it runs on this long without one: not speech

Decision = Literal["pause", "resume", "interrupt"] | None


class BargeIn:
    def __init__(
        self,
        pause_ms: int,
        resume_after_ms: int,
        blip_resume_ms: int,
        has_words: Callable[[str], bool],
        max_no_speech: float = 0.5,
    ) -> None:
        self.pause_ms = pause_ms
        self.resume_after_ms = resume_after_ms
        self.blip_resume_ms = blip_resume_ms
        self.has_words = has_words
        self.max_no_speech = max_no_speech
        self.reset()

    def reset(self) -> None:
        """A new reply (or none): nothing is paused or pending."""
        self.paused_at: float | None = None
        self.candidate: int | None = None  # an utterance over the reply, not yet a turn
        self.held = False  # the candidate has words; its final decides: no resuming
        self.patient = False  # the candidate may be the rest of the user's turn
        self.rearmed = False  # patient speech paused since the reply resumed: it pauses it
        self.voiced_at: float | None = None  # the hair trigger's last voiced frame
        self.onset_ms: float | None = None
        self.stopped_ms: float | None = None

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    def on_frame(self, now_ms: float, run_ms: int, speaking: bool) -> Decision:
        """Every frame while a reply is live (``run_ms``: the hair trigger's run)."""
        if run_ms > 0:
            self.voiced_at = now_ms
        quiet_ms = now_ms - self.voiced_at if self.voiced_at is not None else now_ms
        if self.paused_at is None:
            # A candidate that is not paused was resumed (no words in time): the same
            # sound must not pause the reply again on the next frame; words still can.
            # Patient speech that paused since: its next run pauses it again.
            if self.patient and quiet_ms >= PATIENT_GAP_MS:
                self.rearmed = True
            fresh = self.candidate is None or self.rearmed
            return "pause" if fresh and run_ms >= self.pause_ms else None
        waited = now_ms - self.paused_at
        if self.candidate is None:
            blip_over = run_ms == 0 and not speaking
            return "resume" if blip_over and waited >= self.blip_resume_ms else None
        if self.held or waited < self.resume_after_ms:
            return None
        if self.patient and quiet_ms < PATIENT_GAP_MS and run_ms < PATIENT_RUN_MAX_MS:
            return None  # not over the user: in a gap of their speech
        # No words yet: keep talking; words later in this utterance still interrupt.
        return "resume"

    def hold(self) -> None:
        """The paused reply waits for more of the candidate's words (words came that may
        be the rest of the turn): it neither resumes over them nor is cut before that."""
        self.held = self.paused

    def on_speech_start(
        self, utterance_id: int, now_ms: float | None = None, patient: bool = False
    ) -> Decision:
        """Speech began over the reply. Already paused (for an earlier sound): the wait
        for words starts again from now, for this speech. Counted from the first pause,
        a second utterance 1.5 s later resumed the reply at once, over the user.
        ``patient``: it may be the rest of the user's turn (see the module's docstring)."""
        self.candidate = utterance_id
        self.patient = patient
        self.rearmed = False
        if self.paused:
            if now_ms is not None:
                self.paused_at = now_ms
            return None
        return "pause"

    def is_turn(self, text: str, no_speech_prob: float) -> bool:
        """Words, not a backchannel, and Whisper believes someone spoke: music and noise
        can make it write a sentence, but then it also says it heard nobody."""
        return no_speech_prob < self.max_no_speech and self.has_words(text)

    def on_partial(self, utterance_id: int, text: str, no_speech_prob: float) -> Decision:
        if utterance_id == self.candidate and self.is_turn(text, no_speech_prob):
            return "interrupt"
        return None

    def on_final(self, utterance_id: int, text: str, no_speech_prob: float) -> Decision:
        """The candidate utterance ended: a turn ("interrupt") or not ("resume")."""
        if utterance_id != self.candidate:
            return None
        self.candidate = None
        self.held = self.patient = self.rearmed = False
        return "interrupt" if self.is_turn(text, no_speech_prob) else "resume"

    def paused_now(self, now_ms: float, onset_ms: float) -> None:
        self.paused_at = now_ms
        if self.onset_ms is None:
            self.onset_ms, self.stopped_ms = onset_ms, now_ms

    def resumed(self) -> None:
        self.paused_at = None
        self.held = self.rearmed = False
        self.onset_ms = self.stopped_ms = None  # it was not a barge-in after all

    def interrupted_now(self, now_ms: float, onset_ms: float) -> None:
        self.candidate = None
        self.held = self.patient = self.rearmed = False
        if self.onset_ms is None:
            self.onset_ms = onset_ms
        if self.stopped_ms is None:
            self.stopped_ms = now_ms

    @property
    def reaction_ms(self) -> float | None:
        """Onset of the speech to the output stopping, if a barge-in stopped it."""
        if self.onset_ms is None or self.stopped_ms is None:
            return None
        return self.stopped_ms - self.onset_ms
