"""The ears as a Sans-I/O core: audio in, events and recognition requests out.

:class:`Listener` never runs a model and never reads a clock. The caller feeds
it audio (``feed``), asks it what to recognise next whenever its ASR worker is
idle (``next_request``), and hands back results (``on_result``). All times are
positions in the input stream, so a file runs faster than real time, a device
runs at real time, and tests script exact timelines, through the same code.

Scheduling, with one ASR worker in mind:

- The final pass of an ended utterance comes before any partial.
- Final prefetch: once ``final_tail_ms`` of silence follows the last speech,
  the utterance is recognised up to that point. That audio is exactly what the
  final pass would read, so when the endpointer fires ``end_silence_ms`` later,
  the final transcript is usually ready at once. If the user speaks on, the
  pass was simply a partial.
- Partials re-read the utterance after every ``partial_interval_ms`` of new
  audio; LocalAgreement commits what two passes agree on.
- Utterances longer than ``max_window_s`` are trimmed at a committed segment
  boundary found by a timestamped pass; the trimmed text becomes the prompt.

One turn, however many pauses: the last ``RECENT_S`` of the input stream are
kept, so a caller that decides an utterance continues the previous one (the
user went on after a pause that ended their turn too soon) can have the whole
turn heard again as one (``join`` while the new utterance is open, ``rehear``
once it has ended). The words after the pause are then recognised in context,
not as a fragment of their own. A turn too long to hear again in one pass
(over ``max_window_s``) is joined by its words: the earlier utterance's final
leads, and is the context of the later one's passes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voice.audio.format import (
    FRAME_MS,
    FRAME_SAMPLES,
    SAMPLE_RATE,
    burst_level_db,
    float_to_pcm16,
    level_db,
)
from voice.errors import ConfigError
from voice.events import Event, Final, Partial, SpeechEnd, SpeechStart
from voice.listen.agreement import (
    LocalAgreement,
    committed_through,
    drop_overlap,
    says_committed,
    tail_after,
)
from voice.listen.endpoint import Ended, EndpointConfig, Endpointer, Started
from voice.listen.spoken import NOTHING_UNSPOKEN, Unspoken, spoken_part, unspoken_tail
from voice.listen.vad import (
    FrameClassifier,
    close_classifier,
    fresh_onset,
    onset_heard,
    second_opinion_heard,
)
from voice.listen.whisper import MAX_AUDIO_S, Segment, Transcription

Float32Array = npt.NDArray[np.float32]

RECENT_S = 40.0  # input kept for joining turns: a recognition window and then some
RECENT_SPANS = 8  # finished utterances whose extent is remembered for a join
JOIN_MAX_S = 20.0  # a joined turn is heard again in one pass (the buffer stays under 29 s)
# Dormant (behind a wake word), an utterance keeps this much of its latest audio: the
# wake phrase and the request said in the same breath, whatever talk went before.
DORMANT_KEEP_S = 4.0
# A woken utterance with less speech than this after the wake phrase was the phrase
# alone: it ends without a pass (Whisper makes words up for silence: "Thank you.").
WOKEN_MIN_SPEECH_MS = 200


@dataclass
class ListenConfig:
    partial_interval_ms: int = 500
    # Silence after the speech's sound before the final pass: each 20 ms more delays
    # every reply as much; under 100 ms Whisper lost reverberant word ends ("And so my
    # I fellow America."). voice bench asr: WER 7.08% at 100 ms, 7.31% at 60.
    final_tail_ms: int = 100
    # Longer utterances are trimmed at a committed segment boundary, so a pass costs
    # what this many seconds cost however long the turn. At 12 s a long turn's passes
    # took 400-880 ms each: recognition fell behind the speech, and the pass covering
    # the last pause came up to 1.7 s after it. 12 -> 6 s (docs/turn-taking.md, voice
    # bench turns, two runs): reply after the endpoint p95 870-910 -> 460-510 ms on
    # conversation, 1025-1220 -> 470-625 ms on joined pairs; voice bench asr WER 7.08%
    # -> 8.02% (4 words more, in 2 of 45 clips; the monologues' WER unchanged).
    max_window_s: float = 6.0
    # Where Whisper closes no segment (one open segment is how tiny.en writes most long
    # passes of spontaneous speech), cut the buffer in a pause whose words are committed.
    # voice bench turns, two runs each: conversation over 15 s p50 / p95 740-760 /
    # 1143-1157 ms, against 1164-1180 / 1460-1593 without; long pairs 690-760 / 814-843,
    # against 790-910 / 943-1225; cut-ins within their spread (docs/turn-taking.md).
    trim_in_pauses: bool = True
    holdback_words: int = 2
    # A last word the alignment starts this close to the end of the speech, or after it,
    # was not said: Whisper finishes the sentence it heard into the pause ("...the door
    # to see." for "...the door to"); a real last word starts a word's length earlier.
    unspoken_slack_ms: int = 80
    # ... and that much sound for each of its syllables: a longer word given less was
    # broken off, or lengthened by the decoder ("...being in [pause]" written "...being
    # infected."), and the turn is judged unfinished (voice.listen.spoken). False: the
    # slack is one per word, however long, as the guard first had it.
    unspoken_slack_per_syllable: bool = True

    def validate(self) -> None:
        if not 1.0 <= self.max_window_s < MAX_AUDIO_S:
            raise ConfigError(
                f"listen.max_window_s must be from 1 to under {MAX_AUDIO_S:g} s (Whisper "
                f"takes at most {MAX_AUDIO_S:g} s a pass), not {self.max_window_s:g}."
            )
        if self.partial_interval_ms <= 0 or self.final_tail_ms < 0 or self.holdback_words < 0:
            raise ConfigError(
                "listen.partial_interval_ms must be positive, and listen.final_tail_ms and "
                "listen.holdback_words must not be negative."
            )


@dataclass(frozen=True)
class TranscribeRequest:
    """One recognition pass for the worker over ``audio``, the utterance's buffer."""

    request_id: int
    utterance_id: int
    audio: Float32Array
    context: str
    with_timestamps: bool
    end_sample: int
    final: bool  # covers all the audio the final transcript needs
    live: bool = False  # a partial while the user speaks (not during a pause or after)
    # A final pass: where the speech stopped (absolute sample), so the pass can also
    # measure the voice held there (``voice.listen.pitch``); -1 otherwise.
    speech_end_sample: int = -1
    # The buffer's committed words: a pass over a pause that left most of them out is
    # run again (``voice.listen.runner.run_pass``).
    committed: tuple[str, ...] = ()

    def split_at_pause(self) -> tuple[Float32Array, Float32Array] | None:
        """A final pass's audio up to where the speech stopped, and the rest (the pause
        the pass runs on into); None for other passes, and for a pass that ends where
        the speech does (a pause is judged only on a pass that runs past its stop)."""
        if not self.final or self.speech_end_sample < 0:
            return None
        stop = max(0, self.speech_end_sample - (self.end_sample - len(self.audio)))
        if stop >= len(self.audio):
            return None
        return self.audio[:stop], self.audio[stop:]


@dataclass
class _Utterance:
    uid: int
    start_sample: int  # absolute sample of the first buffered sample (onset minus pre-roll)
    onset_sample: int
    chunks: list[Float32Array] = field(default_factory=list)
    size: int = 0
    agreement: LocalAgreement = field(default_factory=LocalAgreement)
    trimmed_words: int = 0  # committed words whose audio was cut from the buffer
    cut_in_speech: bool = False  # cut by force, maybe inside a word (not at a segment end)
    last_pass_end: int = -1
    last_speech_end: int = -1
    ended_at: int = -1  # when the endpointer fired, or -1 while speaking
    final_result: tuple[int, list[str], Transcription] | None = None  # (end, words, pass)
    finished: bool = False
    unspoken: Unspoken = NOTHING_UNSPOKEN  # last words of final_result the audio lacks
    held_s: float = 0.0  # the voice held at one pitch where final_result's speech stopped
    first_request: int = 0  # results of passes asked before a join describe other audio
    # Passes over the buffer up to a pause: (their end, the words said in them), for a
    # cut where Whisper closes no segment (``_pause_cut``). Emptied by every trim.
    pause_hearings: list[tuple[int, list[str]]] = field(default_factory=list)
    # Behind a wake word: opened while the listener was dormant (no pass, no event, and
    # only the last ``DORMANT_KEEP_S`` kept) until a wake word makes it a turn; then the
    # words of the wake phrase are taken off its text (``unwake``).
    muted: bool = False
    unwake: Callable[[str], str] | None = None

    def audio(self) -> Float32Array:
        if len(self.chunks) > 1:
            self.chunks = [np.concatenate(self.chunks)]
        return self.chunks[0] if self.chunks else np.zeros(0, dtype=np.float32)

    def append(self, chunk: Float32Array) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)

    def trim(self, samples: int) -> None:
        kept = self.audio()[samples:]
        self.chunks, self.size = [kept], len(kept)
        self.start_sample += samples
        self.pause_hearings.clear()

    @property
    def end_sample(self) -> int:
        return self.start_sample + self.size

    def final_end(self, tail: int) -> int:
        return min(self.end_sample, self.last_speech_end + tail)

    def buffer_words(self) -> list[str]:
        return self.agreement.committed[self.trimmed_words :]

    def context(self) -> str:
        return " ".join(self.agreement.committed[: self.trimmed_words])


@dataclass(frozen=True)
class _Span:
    """Where a finished utterance lay in the stream: enough to hear it again."""

    start_sample: int  # its buffer's first sample (trimmed audio excluded)
    onset_sample: int
    last_speech_end: int
    context: str  # its words before ``start_sample`` (trimmed, or joined earlier)
    text: str  # all its words, as its final said them


def _pause_cut(committed: list[str], utt: _Utterance, usable_until: float) -> tuple[float, int]:
    """Where to cut a buffer in a pause (seconds into it), and how many of its
    ``committed`` words go with the cut, when no segment end can say: the latest pass
    over the buffer up to a pause (ending by ``usable_until`` seconds into it) whose words
    said line up with committed ones. tiny.en wrote 117 of the conversation set's 154 passes over
    6 s as one segment it never closed, so such a turn was never trimmed (AMI FEE013:
    passes of 18 s, and a final 680 ms after the endpoint). The pass at the pause heard
    exactly the audio before its end, so no alignment is needed to place its words
    (placing them by the alignment cut a held-out hesitation's words off, run X); the
    words it made up for the pause are left out (the word-timing guard), and a pause
    inside a word is no place to cut."""
    for end, heard in reversed(utt.pause_hearings):
        end_s = (end - utt.start_sample) / SAMPLE_RATE
        if end_s > usable_until or not heard:
            continue
        through = committed_through(committed, heard)
        if through:
            return end_s, through
    return 0.0, 0


def _said(utt: _Utterance, text: str) -> str:
    """``text`` of ``utt`` as the user's turn: without the wake phrase it woke with."""
    return text if utt.unwake is None else utt.unwake(text)


class Listener:
    """VAD + endpointing + incremental recognition, driven by the caller."""

    def __init__(
        self,
        classifier: FrameClassifier,
        endpoint: EndpointConfig | None = None,
        config: ListenConfig | None = None,
    ) -> None:
        self.classifier = classifier
        self.endpointer = Endpointer(endpoint)
        self.config = config or ListenConfig()
        self.config.validate()
        self.sample = 0  # stream position: samples consumed so far
        self._pending = np.zeros(0, dtype=np.float32)
        preroll = self.endpointer.config.preroll_ms + self.endpointer.config.window_ms
        self._history: deque[Float32Array] = deque(maxlen=max(1, preroll // FRAME_MS))
        self._recent: deque[Float32Array] = deque(maxlen=int(RECENT_S * 1000) // FRAME_MS)
        self._spans: dict[int, _Span] = {}
        self._utterances: list[_Utterance] = []
        self._next_uid = 1
        self._next_request_id = 1
        self._in_flight: TranscribeRequest | None = None
        self._before_in_flight: tuple[_Utterance, int] | None = None  # for take_back
        self.onset_run = 0  # consecutive frames the classifier's hair trigger heard (barge-in)
        # Behind a wake word and idle: speech is followed (the VAD runs) but not recognised
        # and not reported, until ``wake`` makes the open utterance a turn.
        self.dormant = False

    # -- helpers -------------------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self.sample * 1000.0 / SAMPLE_RATE

    @staticmethod
    def _ms(sample: int) -> float:
        return sample * 1000.0 / SAMPLE_RATE

    @property
    def busy(self) -> bool:
        """True while speech is open, a pass is out, or a final is still owed."""
        return self._in_flight is not None or any(not u.muted for u in self._utterances)

    @property
    def _tail(self) -> int:
        return self.config.final_tail_ms * SAMPLE_RATE // 1000

    def _current(self) -> _Utterance | None:
        if self._utterances and self._utterances[-1].ended_at < 0:
            return self._utterances[-1]
        return None

    def _heard(self) -> _Utterance | None:
        """The open utterance, unless it is muted (dormant speech is nobody's turn)."""
        current = self._current()
        return None if current is None or current.muted else current

    @property
    def buffered_samples(self) -> int:
        """Audio held for recognition, over all utterances not yet final: bounded by
        the recognition window however long anyone speaks."""
        return sum(utt.size for utt in self._utterances)

    @property
    def onset_run_ms(self) -> int:
        """How long someone may have been speaking, by the VAD's hair trigger (its
        ``onset``): what pauses a reply, sooner than speech is believed."""
        return self.onset_run * FRAME_MS

    @property
    def open_utterance(self) -> int | None:
        """The id of the utterance being spoken now, if any."""
        current = self._heard()
        return None if current is None else current.uid

    @property
    def open_onset_ms(self) -> float | None:
        """Where the utterance being spoken now began, if any."""
        current = self._heard()
        return None if current is None else self._ms(current.onset_sample)

    def committed_text(self, utterance_id: int) -> str:
        """The words of an open utterance that will not change any more."""
        utt = self._current()
        if utt is None or utt.uid != utterance_id:
            return ""
        return _said(utt, " ".join(utt.agreement.committed))

    def spoken_before_pause(self, utterance_id: int) -> tuple[str, Unspoken] | None:
        """``prefetched_final`` without the last words no sound was made for (see
        ``voice.listen.spoken``): what the user actually said before this pause, and
        what was dropped. Its final punctuation is Whisper's guess at an ending, so
        where words were dropped the text ends bare, and only its last word, or a word
        broken off, can say "unfinished"."""
        text = self.prefetched_final(utterance_id)
        utt = self._current()
        if text is None or utt is None or not utt.unspoken.words:
            return None if text is None else (text, NOTHING_UNSPOKEN)
        return (spoken_part(text, utt.unspoken.words), utt.unspoken)

    def held_before_pause(self, utterance_id: int) -> float:
        """How long the voice was held at one pitch where it stopped before this pause
        (``voice.listen.pitch``): a filler Whisper does not write. 0.0 until a pass
        covers the pause."""
        if self.prefetched_final(utterance_id) is None:
            return 0.0
        utt = self._current()
        return 0.0 if utt is None else utt.held_s

    def prefetched_final(self, utterance_id: int) -> str | None:
        """The open utterance's transcript if a pass already covers everything its final
        needs (the user has paused): what the final will say unless they speak on."""
        utt = self._current()
        if utt is None or utt.uid != utterance_id or utt.final_result is None:
            return None
        end, words, _ = utt.final_result
        if end < utt.last_speech_end + self._tail or end < utt.final_end(self._tail):
            return None  # not a pause yet: the pass ends in speech
        return _said(utt, " ".join(words))

    # -- audio in ------------------------------------------------------------------------

    def feed(self, audio: Float32Array) -> list[Event]:
        """Consume 16 kHz mono float audio of any length; return events it caused."""
        events: list[Event] = []
        data = np.concatenate([self._pending, np.asarray(audio, dtype=np.float32)])
        whole = len(data) - len(data) % FRAME_SAMPLES
        for i in range(0, whole, FRAME_SAMPLES):
            events.extend(self._frame(data[i : i + FRAME_SAMPLES]))
        self._pending = data[whole:]
        return events

    def _frame(self, frame: Float32Array) -> list[Event]:
        events: list[Event] = []
        voiced = self.classifier.is_speech(float_to_pcm16(frame))
        onset = onset_heard(self.classifier, voiced)
        self.onset_run = self.onset_run + 1 if onset else 0
        self.sample += FRAME_SAMPLES
        sure = second_opinion_heard(self.classifier)
        change = self.endpointer.push(voiced, level_db(frame), burst_level_db(frame), onset, sure)
        current = self._current()
        if current is not None:
            current.append(frame)
            if self.endpointer.speaking:
                end = (self.endpointer.speech_end_frame + 1) * FRAME_SAMPLES
                current.last_speech_end = max(current.last_speech_end, end)
            if current.muted and current.size > DORMANT_KEEP_S * SAMPLE_RATE:
                current.trim(current.size - int(DORMANT_KEEP_S * SAMPLE_RATE))
        self._history.append(frame)
        self._recent.append(frame)
        if isinstance(change, Started):
            started = self._start(change)
            if not self._utterances[-1].muted:
                events.append(started)
        elif isinstance(change, Ended) and current is not None:
            events.extend(self._end(current))
        return events

    def _start(self, started: Started) -> SpeechStart:
        onset = started.onset_frame * FRAME_SAMPLES
        history = list(self._history)
        preroll_frames = self.endpointer.config.preroll_ms // FRAME_MS
        frames_since_onset = (self.sample - onset) // FRAME_SAMPLES
        keep = min(len(history), frames_since_onset + preroll_frames)
        utt = _Utterance(
            uid=self._next_uid,
            start_sample=self.sample - keep * FRAME_SAMPLES,
            onset_sample=onset,
            agreement=LocalAgreement(self.config.holdback_words),
            muted=self.dormant,
        )
        for frame in history[len(history) - keep :]:
            utt.append(frame)
        utt.last_speech_end = self.sample
        self._next_uid += 1
        self._utterances.append(utt)
        return SpeechStart(audio_ms=self.now_ms, utterance_id=utt.uid, start_ms=self._ms(onset))

    def _end(self, utt: _Utterance) -> list[Event]:
        utt.ended_at = self.sample
        fresh_onset(self.classifier)  # a barge-in after seconds of quiet is heard as soon
        woken_alone = utt.unwake is not None and (
            self._ms(utt.last_speech_end - utt.onset_sample) < WOKEN_MIN_SPEECH_MS
        )
        if utt.muted or woken_alone:  # nobody's turn, or the wake phrase alone: no pass
            self._utterances.remove(utt)
            if utt.muted:
                return []
            return [SpeechEnd(audio_ms=self.now_ms, utterance_id=utt.uid,
                              start_ms=self._ms(utt.onset_sample),
                              end_ms=self._ms(utt.onset_sample))]  # fmt: skip
        events: list[Event] = [
            SpeechEnd(
                audio_ms=self.now_ms,
                utterance_id=utt.uid,
                start_ms=self._ms(utt.onset_sample),
                end_ms=self._ms(utt.last_speech_end),
            )
        ]
        if utt.final_result is not None and utt.final_result[0] >= utt.final_end(self._tail):
            events.append(self._final(utt, *utt.final_result[1:]))
        return events

    def finish(self) -> list[Event]:
        """End of input: close any open utterance now (its final still needs a pass)."""
        ended = self.endpointer.force_end()
        current = self._current()
        if ended is not None and current is not None:
            return self._end(current)
        return []

    def close(self) -> None:
        """Free the classifier's native model now (Silero's), rather than whenever a
        full garbage collection reaches a listener caught in a reference cycle."""
        close_classifier(self.classifier)

    # -- recognition -------------------------------------------------------------------

    def next_request(self) -> TranscribeRequest | None:
        """The pass the idle worker should run now, or None. At most one is ever out."""
        if self._in_flight is not None:
            return None
        tail = self._tail
        for ended in self._utterances:
            if ended.ended_at >= 0 and not ended.finished:
                return self._request(ended, ended.final_end(tail))
        utt = self._heard()
        if utt is None:
            return None
        silence = self.endpointer.silence_ms
        covered = utt.last_pass_end >= utt.final_end(tail)
        if silence >= self.config.final_tail_ms and not covered:
            return self._request(utt, utt.final_end(tail))
        new_audio_ms = self._ms(utt.end_sample - max(utt.last_pass_end, utt.start_sample))
        # No partial once a pause has begun: it would hear nothing new, and it
        # would hold the worker just when the final pass should start.
        if silence == 0 and new_audio_ms >= self.config.partial_interval_ms:
            return self._request(utt, utt.end_sample, live=True)
        return None

    def _request(self, utt: _Utterance, end_sample: int, live: bool = False) -> TranscribeRequest:
        audio = utt.audio()[: max(0, end_sample - utt.start_sample)]
        long = len(audio) > self.config.max_window_s * SAMPLE_RATE
        if len(audio) > MAX_AUDIO_S * SAMPLE_RATE:  # never hand the engine more than it takes
            self._force_trim(utt, len(audio) - int(self.config.max_window_s * SAMPLE_RATE))
            audio = utt.audio()[: max(0, end_sample - utt.start_sample)]
        end = utt.start_sample + len(audio)
        request = TranscribeRequest(
            request_id=self._next_request_id,
            utterance_id=utt.uid,
            audio=audio,
            context=utt.context(),
            with_timestamps=long,
            end_sample=end,
            final=end >= utt.final_end(self._tail),
            live=live,
            speech_end_sample=utt.last_speech_end,
            committed=tuple(utt.buffer_words()),
        )
        self._next_request_id += 1
        self._before_in_flight = (utt, utt.last_pass_end)
        utt.last_pass_end = request.end_sample
        self._in_flight = request
        return request

    def take_back(self, request: TranscribeRequest) -> None:
        """The worker will not run ``request`` after all (a busier caller went first):
        forget it was asked, so the next request reflects the audio as it is then."""
        if self._in_flight is None or request.request_id != self._in_flight.request_id:
            return
        assert self._before_in_flight is not None
        utt, last_pass_end = self._before_in_flight
        if request.request_id >= utt.first_request:  # a join since: it reads from scratch
            utt.last_pass_end = last_pass_end
        self._in_flight = None

    def _force_trim(self, utt: _Utterance, samples: int) -> None:
        """No segment boundary was agreed in time: commit what we have and drop the audio
        it came from (at least ``samples``). Its words are context from now on; audio of
        them left in the buffer would be transcribed, and committed, a second time."""
        utt.agreement.force_commit(utt.agreement.tail)
        utt.trimmed_words = len(utt.agreement.committed)
        heard = utt.last_pass_end - utt.start_sample  # the last pass's words cover this
        utt.trim(min(utt.size, max(samples, heard)))
        utt.cut_in_speech = True

    def on_result(self, request: TranscribeRequest, result: Transcription) -> list[Event]:
        """A pass finished; stamp what it produced with the current stream position."""
        if self._in_flight is not None and request.request_id == self._in_flight.request_id:
            self._in_flight = None
        utt = next((u for u in self._utterances if u.uid == request.utterance_id), None)
        if utt is None or request.request_id < utt.first_request:
            return []  # gone, or a pass over the audio as it was before a join
        words = self._tail_words(utt, request, result)
        if request.end_sample >= utt.final_end(self._tail):
            full = utt.agreement.committed + words
            utt.final_result = (request.end_sample, full, result)
            audio_start = request.end_sample - len(request.audio)
            speech_end_s = (utt.last_speech_end - audio_start) / SAMPLE_RATE
            slack_s = self.config.unspoken_slack_ms / 1000.0
            per_syllable = self.config.unspoken_slack_per_syllable
            utt.unspoken = unspoken_tail(
                result.timed_words, speech_end_s, slack_s, per_syllable, most=len(words)
            )
            utt.held_s = result.held_s
            buffered = utt.buffer_words()
            if (
                self.config.trim_in_pauses
                and audio_start == utt.start_sample
                and not utt.unspoken.cut_off
                and says_committed(buffered, result.words)
            ):
                heard = buffered + words
                utt.pause_hearings.append(
                    (request.end_sample, heard[: len(heard) - utt.unspoken.words])
                )
            if utt.ended_at >= 0:
                return [self._final(utt, full, result)]
        if utt.ended_at >= 0:
            return []
        utt.agreement.update(words)
        if request.with_timestamps:
            self._trim(utt, request, result.segments)
        committed = _said(utt, " ".join(utt.agreement.committed))
        text = _said(utt, utt.agreement.text())
        unstable = text[len(committed) :].strip() if text.startswith(committed) else text
        return [
            Partial(
                audio_ms=self.now_ms,
                utterance_id=utt.uid,
                text=text,
                committed=committed,
                unstable=unstable,
                compute_ms=result.compute_ms,
                no_speech_prob=round(result.no_speech_prob, 3),
            )
        ]

    def _tail_words(
        self, utt: _Utterance, request: TranscribeRequest, result: Transcription
    ) -> list[str]:
        """The hypothesis after the words already committed from this buffer."""
        del request
        buffered = utt.buffer_words()
        words = tail_after(buffered, result.words)
        if utt.cut_in_speech and not buffered:  # the word the cut went through, again
            words = drop_overlap(utt.agreement.committed, words)
        return words

    def _trim(self, utt: _Utterance, request: TranscribeRequest, segments: list[Segment]) -> None:
        """Cut the buffer after the last whole segment made only of committed words (as
        :func:`committed_through` lines them up: a word the pass rewrote does not stop
        it); failing that, in a pause whose words are committed (:func:`_pause_cut`)."""
        committed = utt.buffer_words()
        cut_s, cut_words = 0.0, 0
        heard: list[str] = []
        usable_until = len(request.audio) / SAMPLE_RATE - 1.0
        for seg in segments:
            if seg.end_s <= seg.start_s or seg.end_s > usable_until:
                break
            heard.extend(seg.text.split())
            through = committed_through(committed, heard)
            if through is not None and through > cut_words:
                cut_s, cut_words = seg.end_s, through
        if not cut_words and self.config.trim_in_pauses:
            cut_s, cut_words = _pause_cut(committed, utt, usable_until)
        if cut_words:
            utt.trimmed_words += cut_words
            utt.trim(int(cut_s * SAMPLE_RATE))
            utt.cut_in_speech = False  # between two segments, or in a pause: no word was cut

    def _final(self, utt: _Utterance, words: list[str], result: Transcription) -> Final:
        utt.finished = True
        self._utterances.remove(utt)
        self._spans[utt.uid] = _Span(
            utt.start_sample, utt.onset_sample, utt.last_speech_end, utt.context(),
            _said(utt, " ".join(words)),
        )  # fmt: skip
        while len(self._spans) > RECENT_SPANS:
            del self._spans[min(self._spans)]
        return Final(
            audio_ms=self.now_ms,
            utterance_id=utt.uid,
            text=_said(utt, " ".join(words)),
            start_ms=self._ms(utt.onset_sample),
            end_ms=self._ms(utt.last_speech_end),
            compute_ms=result.compute_ms,
            no_speech_prob=round(result.no_speech_prob, 3),
            language=result.language,
        )

    # -- behind a wake word ------------------------------------------------------------------

    def wake(self, from_sample: int, unwake: Callable[[str], str]) -> list[Event]:
        """The wake phrase ended at about ``from_sample``: the open utterance, if it was
        muted, becomes a turn from there (its earlier audio is dropped: the phrase and any
        talk before it) and is recognised from now on; ``unwake`` takes what is left of
        the phrase off its words. Returns its ``SpeechStart`` (none if no speech is open)."""
        self.dormant = False
        utt = self._current()
        if utt is not None and not utt.muted and utt.unwake is None:
            if self._ms(from_sample - utt.onset_sample) < DORMANT_KEEP_S * 1000:
                utt.unwake = unwake  # awake already: the phrase opens this turn
            return []
        if utt is None or not utt.muted:
            return []
        utt.muted = False
        utt.unwake = unwake
        cut = min(max(from_sample, utt.start_sample), utt.end_sample)
        if cut > utt.start_sample:
            utt.trim(cut - utt.start_sample)
        utt.onset_sample = max(utt.onset_sample, utt.start_sample)
        utt.last_speech_end = max(utt.last_speech_end, utt.onset_sample)
        return [SpeechStart(audio_ms=self.now_ms, utterance_id=utt.uid,
                            start_ms=self._ms(utt.onset_sample))]  # fmt: skip

    # -- one turn, however many pauses -----------------------------------------------------

    def _recent_audio(self, start: int, end: int) -> Float32Array | None:
        """Input samples ``start`` to ``end`` if they are still kept, else None."""
        kept_from = self.sample - len(self._recent) * FRAME_SAMPLES
        if start < kept_from or end > self.sample or end < start:
            return None
        recent = np.concatenate(list(self._recent)) if self._recent else np.zeros(0, np.float32)
        return recent[start - kept_from : end - kept_from]

    def _fits_one_pass(self, span: _Span, end: int) -> bool:
        """Whether ``span`` through ``end`` may be heard again in one pass: at most the
        window a long turn's passes get. The final of a turn joined at its end comes
        after the endpoint, and a 20 s one cost up to 0.9 s there (voice bench turns);
        longer turns join by their words."""
        longest = min(JOIN_MAX_S, self.config.max_window_s)
        return end - span.start_sample <= longest * SAMPLE_RATE

    def join(self, utterance_id: int, previous: int) -> bool:
        """The open utterance ``utterance_id`` goes on with the finished ``previous``
        (the user paused, the turn ended, they went on): from now on its passes read
        the whole turn, from ``previous``'s start, pause included, and its final says
        all of it; a turn too long to hear again in one pass joins ``previous``'s words
        instead (also when its audio is no longer at hand). False (nothing changed) if
        ``previous`` is forgotten."""
        utt = self._current()
        span = self._spans.get(previous)
        if utt is None or utt.uid != utterance_id or span is None:
            return False
        fits = self._fits_one_pass(span, utt.end_sample)
        prefix = self._recent_audio(span.start_sample, utt.start_sample) if fits else None
        if prefix is None:  # too long to hear again in one pass, or its audio is gone
            utt.onset_sample = span.onset_sample
            self._rehear_from_scratch(utt, f"{span.text} {utt.context()}")
            return True
        utt.chunks, utt.size = [prefix, utt.audio()], len(prefix) + utt.size
        utt.start_sample, utt.onset_sample = span.start_sample, span.onset_sample
        self._rehear_from_scratch(utt, span.context)
        return True

    def rehear(self, utterance_id: int, previous: int) -> bool:
        """Like ``join``, for ``utterance_id`` already finished (its first words came with
        its final): hear ``previous`` through its end as one utterance, which owes a final
        pass and then gives a second ``Final`` under the same id."""
        span, later = self._spans.get(previous), self._spans.get(utterance_id)
        if span is None or later is None:
            return False
        end = min(self.sample, later.last_speech_end + self._tail)
        start, before = span.start_sample, span.context
        audio = self._recent_audio(start, end) if self._fits_one_pass(span, end) else None
        if audio is None:  # too long to hear again in one pass: join the words
            start, before = later.start_sample, f"{span.text} {later.context}"
            audio = self._recent_audio(start, end)
            if audio is None:
                return False
        utt = _Utterance(
            uid=utterance_id,
            start_sample=start,
            onset_sample=span.onset_sample,
            agreement=LocalAgreement(self.config.holdback_words),
            last_speech_end=later.last_speech_end,
            ended_at=self.sample,
        )
        utt.append(audio)
        self._rehear_from_scratch(utt, before)
        open_now = 1 if self._current() is not None else 0  # the open one stays last
        self._utterances.insert(len(self._utterances) - open_now, utt)
        del self._spans[utterance_id]
        return True

    def _rehear_from_scratch(self, utt: _Utterance, before: str) -> None:
        """Nothing heard of the utterance's buffer counts any more: all of it is read
        again, and a pass still out answers for the old audio, so it is ignored.
        ``before``: the turn's words whose audio is not in the buffer (trimmed away
        earlier, or a previous utterance too long to hear again with this one: its
        words are joined as they were heard); they stay committed (the final says
        them) and are the passes' context."""
        utt.agreement = LocalAgreement(self.config.holdback_words)
        utt.agreement.force_commit(before.split())
        utt.trimmed_words = len(utt.agreement.committed)
        utt.cut_in_speech = False
        utt.last_pass_end = -1
        utt.final_result = None
        utt.unspoken = NOTHING_UNSPOKEN
        utt.held_s = 0.0
        utt.first_request = self._next_request_id
