"""Playback accounting: what of a reply was queued, what was played, when it is over.

History keeps what the user heard, not what the model wrote, so the session counts
the samples it hands out (``Play``) and the samples the output reports played
(``on_played``); a reply ends when all of its text is synthesised and all of that
has played, and an interrupted one ends at the text heard so far. Here too are the
audio a reply does not ask for: the filler said while the user waits, and the
apology that ends a reply an engine failed.
"""

from __future__ import annotations

from voice.audio.format import SAMPLE_RATE
from voice.conversation.actions import Clear, Play, TtsJob
from voice.conversation.continuation import Answered
from voice.conversation.generation import Generation, Playback, SpokenChunk
from voice.conversation.session.base import APOLOGY_GEN, FILLER_GEN, Float32Array, SessionBase
from voice.events import AudioChunk, PlaybackStarted, ReplyEnded, ReplyStarted


class PlaybackAccounting(SessionBase):
    """A reply's audio from synthesis to the speaker, its start and its end."""

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

    def _heard_ms(self) -> float:
        return self._playback.played * 1000.0 / SAMPLE_RATE

    # -- what is queued ----------------------------------------------------------------------

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

    # -- a reply's start and end -------------------------------------------------------------

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
        self._answered = None
        # A question back stays open only when it was heard to its end.
        self._asked = gen.asked if heard and not interrupted else None
        if not remember:
            pass
        elif (heard or gen.tool_note) and gen.user_text:
            # A tool call is remembered with the reply ("Did you open the gate?").
            self.history.add_turn(gen.user_text, f"{gen.tool_note} {heard}".strip())
            # A reply that called a tool acted: words after it are a new turn, never the
            # rest of this one (joining them would choose, and run, the call again); the
            # words after a question back are its answer.
            acted = gen.tool_call is not None or gen.asked is not None  # or asked back
            if not cut and not acted and gen.utterance_id > 0 and self._turn is not None:
                self._answered = Answered(
                    gen.utterance_id, gen.gen_id, self._heard_ms(), self._turn.user_end_ms,
                    gen.user_text, heard,
                )  # fmt: skip
        elif heard and gen.said:
            self.history.add_said(heard)
        elif interrupted:
            self._unanswered = gen.user_text  # heard nothing: the next words continue it
        if self._turn is not None:
            barge_in = self._barge.reaction_ms
            self._emit(self._turn.event(gen, self._playback, self.now_ms, barge_in, interrupted))
            self._turn = None
        self._barge.reset()
