"""The Listener core on a scripted timeline with fake engines (pure scheduling logic).

The classifier calls a frame speech when it is loud; the recogniser "hears"
one word per 200 ms of loud audio. Real models are tested in tests/component.
"""

from __future__ import annotations

import itertools

import numpy as np
from conftest import LoudIsSpeech

from voice.events import Final, Partial, SpeechEnd, SpeechStart
from voice.listen.endpoint import EndpointConfig
from voice.listen.listener import ListenConfig, Listener
from voice.listen.runner import listen_virtual
from voice.listen.whisper import Segment, Transcription

WORDS = [
    "one", "two", "three", "four", "five", "six",
    "seven", "eight", "nine", "ten", "eleven", "twelve",
]  # fmt: skip


class OneWordPer200ms:
    def __init__(self, cost_ms: float = 50.0) -> None:
        self.cost_ms = cost_ms
        self.calls: list[int] = []

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append(len(audio))
        loud = int(np.sum(np.abs(audio) > 0.05) / 16000 * 1000)
        return Transcription(words=WORDS[: loud // 200], compute_ms=self.cost_ms)


def speech(seconds: float) -> np.ndarray:
    return np.full(int(seconds * 16000), 0.3, np.float32)


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), np.float32)


def run(audio: np.ndarray, cost_ms: float = 50.0):  # type: ignore[no-untyped-def]
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    engine = OneWordPer200ms(cost_ms)
    return list(listen_virtual(listener, engine, audio)), engine


def test_event_order_and_final_ready_at_the_endpoint() -> None:
    events, _ = run(np.concatenate([silence(0.5), speech(2.0), silence(2.0)]))
    kinds = [e.type for e in events]
    assert kinds[0] == "speech_start" and "partial" in kinds
    end = next(e for e in events if isinstance(e, SpeechEnd))
    final = next(e for e in events if isinstance(e, Final))
    assert kinds.index("partial") < kinds.index("speech_end") < kinds.index("final")
    assert final.text == " ".join(WORDS[:10])
    # The final pass was prefetched during the endpoint silence: no wait after the endpoint.
    assert final.audio_ms == end.audio_ms


def test_committed_prefix_only_grows_and_final_extends_it() -> None:
    events, _ = run(np.concatenate([silence(0.5), speech(2.4), silence(2.0)]))
    committed = [e.committed.split() for e in events if isinstance(e, Partial)]
    for earlier, later in itertools.pairwise(committed):
        assert later[: len(earlier)] == earlier
    final = next(e for e in events if isinstance(e, Final))
    assert final.text.split()[: len(committed[-1])] == committed[-1]


def test_slow_engine_delays_events_by_its_compute_time() -> None:
    fast, _ = run(np.concatenate([silence(0.5), speech(1.0), silence(2.0)]), cost_ms=10)
    slow, _ = run(np.concatenate([silence(0.5), speech(1.0), silence(2.0)]), cost_ms=900)
    first_fast = next(e for e in fast if isinstance(e, Partial)).audio_ms
    first_slow = next(e for e in slow if isinstance(e, Partial)).audio_ms
    assert first_slow - first_fast >= 800


def test_pause_shorter_than_end_silence_stays_one_utterance() -> None:
    audio = np.concatenate([silence(0.5), speech(1.0), silence(0.4), speech(1.0), silence(2.0)])
    events, _ = run(audio)
    assert sum(isinstance(e, SpeechStart) for e in events) == 1
    assert sum(isinstance(e, Final) for e in events) == 1


def test_two_utterances_get_two_finals_in_order() -> None:
    audio = np.concatenate([silence(0.5), speech(1.0), silence(1.5), speech(0.6), silence(2.0)])
    events, _ = run(audio)
    finals = [e for e in events if isinstance(e, Final)]
    assert [f.utterance_id for f in finals] == [1, 2]
    assert finals[0].text == "one two three four five"


def test_long_utterance_never_sends_the_engine_more_than_it_takes() -> None:
    _, engine = run(np.concatenate([silence(0.5), speech(40.0), silence(2.0)]), cost_ms=20)
    assert max(engine.calls) <= 29 * 16000


def test_a_live_pass_taken_back_is_asked_again_over_the_newer_audio() -> None:
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    frames = speech(2.0)
    for i in range(0, 16000, 320):
        listener.feed(frames[i : i + 320])
    first = listener.next_request()
    assert first is not None and first.live
    assert listener.next_request() is None  # one at a time
    listener.take_back(first)
    for i in range(16000, 24000, 320):
        listener.feed(frames[i : i + 320])
    again = listener.next_request()
    assert again is not None and again.live
    assert again.request_id != first.request_id and again.end_sample > first.end_sample


def numbered_words(audio: np.ndarray) -> list[str]:
    """Word ``wK`` wherever most of 200 ms block K of the stream is in ``audio`` (the test
    audio's level encodes K)."""
    blocks = np.round((audio[audio > 0.05] - 0.2) / 1e-4).astype(int)
    ids, counts = np.unique(blocks, return_counts=True)
    return [f"w{k}" for k, n in zip(ids, counts, strict=True) if n >= 1600]


class SegmentsWithARewrittenWord:
    """Hears word ``wK`` for each 200 ms block K of the stream as NumberedWords does, in
    segments of ten words with their times, and once the pass holds 15 words, writes its
    second word differently every other pass: spontaneous speech, where Whisper rewrites
    a committed word of an early segment from pass to pass."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append(len(audio))
        words = numbered_words(audio)
        if len(words) >= 15 and len(self.calls) % 2:
            words[1] = f"x{words[1]}"
        tens = [words[i : i + 10] for i in range(0, len(words), 10)]
        segments = [
            Segment(i * 2.0, (i * 10 + len(ten)) * 0.2, " ".join(ten)) for i, ten in enumerate(tens)
        ]
        return Transcription(words=words, segments=segments, compute_ms=20.0)


def test_a_long_turn_is_trimmed_though_a_pass_rewrites_a_committed_word() -> None:
    """The buffer is cut at segment ends the committed words line up with, so a long
    turn's passes stay near the window: with an exact match only, a rewritten early
    word kept a 20 s meeting turn's whole audio in every pass (600-900 ms each)."""
    blocks = 100  # 20 s
    spoken = np.concatenate([np.full(3200, 0.2 + k * 1e-4, np.float32) for k in range(blocks)])
    audio = np.concatenate([silence(0.5), spoken, silence(2.0)])
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    engine = SegmentsWithARewrittenWord()
    events = list(listen_virtual(listener, engine, audio))
    (final,) = [e for e in events if isinstance(e, Final)]
    words = final.text.split()
    assert len(words) == len(set(words)) and len(words) >= blocks - 3
    assert max(engine.calls) <= (ListenConfig().max_window_s + 3.0) * 16000


def one_open_segment(words: list[str], with_timestamps: bool) -> Transcription:
    """``words`` as one segment that never closes (no end time), when timestamps are asked."""
    segments = [Segment(0.0, 0.0, " ".join(words))] if with_timestamps and words else []
    return Transcription(words=words, segments=segments, compute_ms=20.0)


def ends_in_a_pause(audio: np.ndarray) -> bool:
    """Whether a pass's audio ends in 100 ms of silence: a pass run at a pause."""
    return len(audio) > 1600 and bool(np.all(np.abs(audio[-1600:]) < 0.05))


class OneOpenSegment:
    """Hears ``wK`` for each 200 ms block K as NumberedWords does, and writes a long pass
    as one segment it never closes (no end time): tiny.en on spontaneous speech."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append(len(audio))
        words = numbered_words(audio)
        return one_open_segment(words, with_timestamps)


def words_with_pauses(blocks: int, every: int) -> np.ndarray:
    """``blocks`` numbered 200 ms words (see :func:`numbered_words`), a 0.4 s pause after
    every ``every`` of them, with silence before and after."""
    parts = [silence(0.5)]
    for k in range(blocks):
        parts.append(np.full(3200, 0.2 + k * 1e-4, np.float32))
        if k % every == every - 1:
            parts.append(silence(0.4))
    return np.concatenate([*parts, silence(2.0)])


def test_a_long_turn_without_segment_ends_is_trimmed_in_its_pauses() -> None:
    """Where Whisper closes no segment, the buffer is cut in a pause whose words are
    committed (the pass at the pause heard exactly the audio before it): before, such a
    20 s meeting turn sent passes of up to 18 s."""
    blocks = 100  # 20 s of words, a 0.4 s pause after every 3 s
    audio = words_with_pauses(blocks, every=15)
    longest = {}
    for in_pauses in (True, False):
        config = ListenConfig(trim_in_pauses=in_pauses)
        listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), config)
        engine = OneOpenSegment()
        events = list(listen_virtual(listener, engine, audio))
        (final,) = [e for e in events if isinstance(e, Final)]
        assert final.text.split() == [f"w{k}" for k in range(blocks)]
        longest[in_pauses] = max(engine.calls) / 16000
    assert longest[True] <= ListenConfig().max_window_s + 3.5 < 15.0 < longest[False]


class LeavesOutTheCommittedWords(OneOpenSegment):
    """As OneOpenSegment, but a pass during speech rewrites every word after its sixth
    from pass to pass (so only six get committed), and the first pass at a pause
    writes only its last five words: Whisper leaving out the first words of a buffer
    that its prompt runs up to ("country has never been surpassed." with "ask what you
    can do for" committed)."""

    def __init__(self) -> None:
        super().__init__()
        self.left_out = False

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append(len(audio))
        words = numbered_words(audio)
        at_pause = ends_in_a_pause(audio)
        if at_pause and len(words) >= 10 and not self.left_out:
            self.left_out, words = True, words[-5:]
        elif not at_pause:
            mark = "ab"[len(self.calls) % 2]
            words = words[:6] + [w + mark for w in words[6:]]
        return one_open_segment(words, with_timestamps)


def test_a_pause_pass_that_left_out_the_committed_words_places_no_cut() -> None:
    """A buffer is cut in a pause only where the pass at the pause said the words
    committed from it: a pass that left them out had its words read as the committed
    ones alone, and the cut there lost the words it did say (a 50 s utterance's
    final missed "your country has never been surpassed")."""
    blocks = 60  # 12 s of words, a 0.4 s pause after every 3 s
    audio = words_with_pauses(blocks, every=15)
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    engine = LeavesOutTheCommittedWords()
    events = list(listen_virtual(listener, engine, audio))
    assert engine.left_out
    (final,) = [e for e in events if isinstance(e, Final)]
    assert final.text.split() == [f"w{k}" for k in range(blocks)]


class MishearsAWordAsALaterOne(OneOpenSegment):
    """As OneOpenSegment, but a pass during speech hears w8 as w14 and rewrites every
    word after it from pass to pass (so the committed words end in the misheard one),
    while a pass at a pause hears every word right: Whisper committing "...ask not
    what you" for "what your", then writing "...what your country can do for you" at
    the pause."""

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append(len(audio))
        words = numbered_words(audio)
        at_pause = ends_in_a_pause(audio)
        if not at_pause and len(words) > 8:
            mark = "ab"[len(self.calls) % 2]
            words = [*words[:8], "w14", *(w + mark for w in words[9:])]
        return one_open_segment(words, with_timestamps)


def test_a_revised_word_that_reappears_later_loses_no_words_at_a_pause_cut() -> None:
    """The pass at a pause revises the last committed word, which the speaker says
    again a few words on: its new words are new, not a revision, and the buffer cut in
    that pause keeps them (lining up the shared words dropped w9-w13, "country can do
    for")."""
    blocks = 60  # 12 s of words, a 0.4 s pause after every 3 s
    audio = words_with_pauses(blocks, every=15)
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    engine = MishearsAWordAsALaterOne()
    events = list(listen_virtual(listener, engine, audio))
    (final,) = [e for e in events if isinstance(e, Final)]
    said = final.text.split()
    assert said[:9] == [*(f"w{k}" for k in range(8)), "w14"]  # committed: stays misheard
    assert said[9:] == [f"w{k}" for k in range(9, blocks)]


class FinalModeWritesNothingOnce(OneOpenSegment):
    """As OneOpenSegment, but its first final pass at a pause writes nothing: tiny.en's
    final mode at times, for speech a partial pass had heard."""

    def __init__(self) -> None:
        super().__init__()
        self.silenced = False

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        result = super().transcribe(audio, context, with_timestamps, final)
        at_pause = ends_in_a_pause(audio)
        if final and at_pause and not self.silenced:
            self.silenced = True
            return Transcription(words=[], compute_ms=20.0)
        return result


def test_a_final_pass_that_wrote_nothing_is_heard_again() -> None:
    """The listener tells the pass the buffer's committed words, so a final pass that
    wrote nothing is run again (as a partial pass is): before, the final held only the
    committed words."""
    audio = words_with_pauses(20, every=20)
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    engine = FinalModeWritesNothingOnce()
    events = list(listen_virtual(listener, engine, audio))
    assert engine.silenced
    (final,) = [e for e in events if isinstance(e, Final)]
    assert final.text.split() == [f"w{k}" for k in range(20)]


class NumberedWords:
    """Hears word ``wK`` wherever most of 200 ms block K of the stream is in the audio
    (the test audio's level encodes K), and never gives segment times, so a monologue
    is only ever trimmed by force."""

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        return Transcription(words=numbered_words(audio))


def test_a_forced_trim_of_a_monologue_does_not_repeat_words() -> None:
    """35 s without a segment boundary: the buffer is cut by force before it outgrows
    what Whisper takes. The words already committed must not be heard twice."""
    blocks = 175
    spoken = np.concatenate([np.full(3200, 0.2 + k * 1e-4, np.float32) for k in range(blocks)])
    audio = np.concatenate([silence(0.5), spoken, silence(2.0)])
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    events = list(listen_virtual(listener, NumberedWords(), audio))
    (final,) = [e for e in events if isinstance(e, Final)]
    words = final.text.split()
    assert len(words) == len(set(words))
    assert len(words) >= blocks - 3  # at most a word or two lost at each forced cut


class CountsFreshOnsets(LoudIsSpeech):
    def __init__(self) -> None:
        self.fresh: list[int] = []
        self.resets = 0
        self.frames = 0

    def is_speech(self, frame: np.ndarray) -> bool:
        self.frames += 1
        return super().is_speech(frame)

    def fresh_onset(self) -> None:
        self.fresh.append(self.frames)

    def reset(self) -> None:
        self.resets += 1


def test_the_hair_trigger_starts_fresh_after_each_utterance_ends() -> None:
    """Silero's state, settled into the quiet after speech, hears the next onset late
    (see tests/component/test_speech_edges.py): the hair trigger restarts once per
    end, not in a pause; the speech decisions keep their state."""
    classifier = CountsFreshOnsets()
    listener = Listener(classifier, EndpointConfig(end_silence_ms=600), ListenConfig())
    audio = np.concatenate(
        [
            silence(0.5),
            speech(1.0),
            silence(0.4),
            speech(1.0),
            silence(1.5),
            speech(0.6),
            silence(1.0),
        ]
    )
    ends = [
        e for e in listen_virtual(listener, OneWordPer200ms(), audio) if isinstance(e, SpeechEnd)
    ]
    assert len(ends) == 2
    assert classifier.fresh == [round(e.audio_ms / 20) for e in ends]
    assert classifier.resets == 0
