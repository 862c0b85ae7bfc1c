"""Keep a spoken reply short and loop-free, whatever the model does.

A tiny model (the bundled SmolLM2-135M) ignores "answer in one or two
sentences": every reply ran to the token cap, and from the third turn on it
looped ("You're right, I'm not a tester. You're right, I'm not a tester.
..."). Asking harder does not help, so the reply path enforces it:
:class:`ReplyGuard` wraps the sentence chunker and decides, chunk by chunk,
what may be spoken. It stops the reply

* after ``max_sentences`` sentences ("sentences"),
* at the last sentence boundary before ``max_chars`` ("length"), counted as
  spoken (:func:`spoken_chars`: "1.5 hours" is "one point five hours"); only a
  first sentence that runs on past the cap is cut inside, so every later
  sentence is held until it ends and then said whole or not at all,
* when a sentence repeats one of this reply ("loop") or of the recent replies
  ("repeat"), as a listener judges a repeat (:mod:`voice.reply.repeats`: the same
  sentence of three words or more, a near-copy of one, a recurring clause of
  four words or more, or the previous reply's opening), or the words repeat an
  ``ngram``-word run already said in this reply, or stutter ("no, no, no, no":
  "loop"). A reply that would open with such a sentence skips that sentence
  instead (once): silence is no answer, and what follows is often new.

What it drops was never spoken, so it is not in the reply's text either: the
history keeps exactly what was said. A chunk is released the moment it is
certain, so the first audio is not delayed; only text that may still end as a
repeat (it starts like a sentence or clause said lately) is held until its
sentence ends (a repeat is then dropped whole, never half-said).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from voice.reply.repeats import CJK_CHARS, SaidLately, pieces, split_sentences, words_of
from voice.speak.chunking import SentenceChunker

_CJK_CHAR = re.compile(rf"[{CJK_CHARS}]")
CJK_CHAR_WEIGHT = 3  # one CJK character is spoken about as long as three letters
_CLAUSE_END = re.compile(r"[,;:.!?…—–)\]\"'”’。！？；，、：」』）]\s*$")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]}*_`」』）]*\s*$")
# A unit of up to this many words said this many times in a row is a loop ("no, no,
# no, no"), however short.
STUTTER_WORDS, STUTTER_TIMES = 3, 4


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_SPOKEN_SYMBOLS = {"%": " percent", "$": " dollars", "€": " euros", "£": " pounds", "&": " and "}
# A digit is read as about five letters ("28": "twenty-eight", "1961": "nineteen
# sixty-one"); a point or comma inside a number as a word ("point", "thousand").
CHARS_PER_DIGIT, CHARS_PER_SEPARATOR = 5, 6


def spoken_chars(text: str) -> int:
    """The length of ``text`` as the voice will say it. Characters stand for speech
    time, except where the voice reads more than is written: numbers and a few symbols.
    A reply capped on written characters ran to 12 s when it listed numbers
    ("1.5 hours, 14 minutes, 28 seconds, ...": 108 characters, read digit by digit)."""

    def number(match: re.Match[str]) -> str:
        digits = sum(c.isdigit() for c in match.group())
        separators = len(match.group()) - digits
        return "x" * max(4, CHARS_PER_DIGIT * digits + CHARS_PER_SEPARATOR * separators)

    spoken = _NUMBER.sub(number, text)
    symbols = sum(len(_SPOKEN_SYMBOLS[c]) - 1 for c in spoken if c in _SPOKEN_SYMBOLS)
    return len(spoken) + symbols + (CJK_CHAR_WEIGHT - 1) * len(_CJK_CHAR.findall(spoken))


__all__ = ["ReplyGuard", "ReplyLimits", "has_loop", "split_sentences", "spoken_chars", "words_of"]


def repeated_ngram(words: Sequence[str], n: int) -> int | None:
    """Index of the first word that completes an ``n``-word run seen earlier, or of a
    short unit said ``STUTTER_TIMES`` times in a row; None if neither happens."""
    if n <= 0:
        return None
    seen: set[tuple[str, ...]] = set()
    for end in range(1, len(words) + 1):
        if _stutters(words, end):
            return end - 1
        if end >= n:
            gram = tuple(words[end - n : end])
            if gram in seen:
                return end - 1
            seen.add(gram)
    return None


def _stutters(words: Sequence[str], end: int) -> bool:
    for unit in range(1, STUTTER_WORDS + 1):
        span = unit * STUTTER_TIMES
        if end >= span:
            run = words[end - span : end]
            if all(run[i] == run[i % unit] for i in range(span)):
                return True
    return False


def has_loop(text: str, ngram: int) -> bool:
    """A sentence (or clause) said twice or near-copied, or an ``ngram``-word run
    repeated, within one text."""
    said = SaidLately([], [], ())
    for sentence in split_sentences(text):
        if said.repeats(sentence):
            return True
        said.add(sentence)
    return repeated_ngram(words_of(text), ngram) is not None


@dataclass(frozen=True)
class ReplyLimits:
    """What one reply may say. Zero turns a limit off."""

    max_sentences: int = 0
    max_chars: int = 0
    # Never past this many (as spoken), not even inside a first sentence that runs on:
    # the reply's audio stays under llm.reply_max_audio_s (History.for_backend).
    hard_chars: int = 0
    ngram: int = 0
    # The recent replies' texts (oldest first) a reply may not repeat: the history
    # leaves out the answers to a question the user asks again.
    recent: tuple[str, ...] = ()
    # Said in place of a reply of which the guard let nothing through (the model only
    # repeated an earlier reply, or stuttered): "" stays silent.
    fallback: str = ""
    # Before the fallback, sample the reply again this many times (another seed, no
    # history: the model copies its last reply from there), so the user hears an
    # answer rather than "Sorry, I'm not sure." (Prompt.resampled).
    resamples: int = 0

    def for_attempt(self, attempt: int) -> ReplyLimits:
        """The limits of one try: a try that may still be sampled again says no fallback."""
        return replace(self, fallback="") if attempt < self.resamples else self


@dataclass
class ReplyGuard:
    """A :class:`SentenceChunker` that only hands out what the reply may say.

    ``push`` a delta and get the chunks to speak; ``stopped`` then says whether
    generation should end (its reason in ``reason``). ``text`` is everything
    released: what was spoken and belongs in history.
    """

    chunker: SentenceChunker
    limits: ReplyLimits = field(default_factory=ReplyLimits)
    reason: str | None = None
    text: str = ""
    sentences: int = 0
    skipped: int = 0  # opening sentences dropped as repeats of a recent reply
    _raw: str = ""
    _held: list[str] = field(default_factory=list)  # chunks of the sentence in progress
    _current: str = ""  # the sentence in progress: released and held chunks
    _current_said: bool = False  # ... of which some was released
    _lately: SaidLately = field(default_factory=lambda: SaidLately([], [], ()))
    _own: SaidLately = field(default_factory=lambda: SaidLately([], [], ()))  # this reply

    def __post_init__(self) -> None:
        for cap in (self.limits.max_chars, self.limits.hard_chars):
            if cap > 0:
                # A run-on sentence is split at half the cap, not 250 characters on, so it
                # ends at the cap within half a cap (a chunk that would overrun is dropped).
                self.chunker.max_chars = min(self.chunker.max_chars, max(1, cap // 2))
        self._lately = SaidLately.of(self.limits.recent)

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def push(self, delta: str) -> list[str]:
        if self.stopped:
            return []
        self._raw += delta
        if self._looped(self._raw):
            self._stop("loop")
            return self._fallback()
        return self._take(self.chunker.push(delta), final=False)

    def flush(self) -> list[str]:
        """The stream ended: what is left, if it may be said."""
        if self.stopped:
            return []
        if self._looped(self._raw + " "):
            self._stop("loop")
            return self._fallback()
        return self._take(self.chunker.flush(), final=True) or self._fallback()

    # -- internals -------------------------------------------------------------------

    def _fallback(self) -> list[str]:
        """Silence is no answer: a reply of which nothing could be said says the
        fallback (once, and only if nothing at all was said)."""
        if self.text.strip() or not self.limits.fallback:
            return []
        self.text = self.limits.fallback
        return [self.limits.fallback]

    def _looped(self, raw: str) -> bool:
        """A repeated n-gram among the complete words (those followed by a space)."""
        cut = max(raw.rfind(" "), raw.rfind("\n"))
        return cut > 0 and repeated_ngram(words_of(raw[:cut]), self.limits.ngram) is not None

    def _take(self, chunks: Iterable[str], final: bool) -> list[str]:
        """Judge each chunk sentence by sentence: the chunker merges a short sentence
        into the next chunk ("that. It is a lovely day."), and a cap can fall between."""
        out: list[str] = []
        chunks = [c for c in chunks if c]
        for number, chunk in enumerate(chunks):
            ends = (final and number == len(chunks) - 1) or bool(_SENTENCE_END.search(chunk))
            got: list[str] = []
            parts = pieces(chunk)
            for index, piece in enumerate(parts):
                earlier, now = self._chunk(piece, ends or index < len(parts) - 1)
                # Chunks held back from earlier are released as the chunker cut them: a
                # held first chunk joined to the rest of its sentence made the first
                # audio wait for the whole sentence's synthesis.
                if earlier and got:
                    out.append("".join(got))
                    got = []
                out.extend(earlier)
                got.extend(now)
                if self.stopped:
                    break
            if got:  # one chunk out per chunk in: its sentences are synthesised together
                out.append("".join(got))
            if self.stopped:
                break
        return out + self._fallback() if self.stopped else out

    def _chunk(self, chunk: str, ends_sentence: bool) -> tuple[list[str], list[str]]:
        """What of ``chunk`` (a piece of the chunker's chunk) may be said now: the chunks
        held back before it, and the piece itself (each may be empty)."""
        limits = self.limits
        pending = "".join(self._held) + chunk
        hard = limits.hard_chars
        if hard and self.text.strip() and spoken_chars(self.text + pending.rstrip()) > hard:
            self._stop("length")  # however the sentence is going: the audio would run long
            return [], []
        if limits.max_chars and self.text.strip() and self._overruns(pending):
            self._stop("length")
            return [], []
        sentence = self._current + chunk
        first = not self.sentences and not self.skipped  # it opens the reply
        if not ends_sentence:
            self._current = sentence
            if self._lately.may_repeat(sentence, first) or self._own.may_repeat(sentence):
                self._held.append(chunk)  # may be a repeat: decided at its end
                return [], []
            if limits.max_chars and self.sentences:
                # A later sentence is said whole or not at all: released chunk by chunk,
                # the length cap cut it mid-clause ("What kind of potion would").
                # Holding it costs no latency: the sentences before it are playing.
                self._held.append(chunk)
                return [], []
            self._current_said = True
            return self._release([chunk])  # a run-on sentence: the next chunk may overrun
        own = self._own.repeats(sentence)
        if own or self._lately.repeats(sentence, first):
            if self._current_said and not _CLAUSE_END.search(self.text):
                # Its start was said before it could be told a repeat (a first chunk cut
                # mid-phrase for first audio): a sentence left on "The cafe is at the" is
                # worse than one said again, so it ends, and so does the reply. Said up
                # to a clause ("In God's sight,"), it ends there instead.
                out = self._release([chunk])
                self._current, self._current_said = "", False
                self._stop("loop" if own else "repeat")
                return out
            if own or self.text.strip():
                self._stop("loop" if own else "repeat")
                return [], []
            # Nothing said yet, and it opens with a recent reply's sentence: skip that
            # sentence, not the whole reply (silence is no answer); the rest may be new.
            self._held.clear()
            self._current = ""
            self.skipped += 1
            if self.skipped > 1:
                self._stop("repeat")
            return [], []
        self._current, self._current_said = "", False
        self.sentences += 1
        if limits.ngram > 0:  # loop checks on: this reply's sentences may not recur
            self._own.add(sentence)
        out = self._release([chunk])
        if limits.max_sentences and self.sentences >= limits.max_sentences:
            self._stop("sentences")
        elif limits.max_chars and spoken_chars(self.text) >= limits.max_chars:
            self._stop("length")
        return out

    def _overruns(self, pending: str) -> bool:
        """Whether saying ``pending`` next would take the reply past its length cap.

        It ends at the last sentence boundary before the cap. A first sentence that
        runs on (it is spoken as it comes) ends at its last clause that fits, one
        whole clause past the cap at most (a list of figures was one 100-character
        chunk, 12 s of speech); it is never left on "the ticket counter with a"
        unless it runs half a cap further.
        """
        cap = self.limits.max_chars
        length = spoken_chars(self.text + pending.rstrip())
        if length <= cap:
            return False
        if self.sentences or _CLAUSE_END.search(self.text):
            return True
        return length > cap * 3 // 2

    def _release(self, chunks: list[str]) -> tuple[list[str], list[str]]:
        held, self._held = self._held, []
        self.text += "".join(held + chunks)
        return held, chunks

    def _stop(self, reason: str) -> None:
        self.reason = reason
        self._held.clear()
        self._discard()

    def _discard(self) -> None:
        """Drop what the chunker still holds: it will never be spoken."""
        self.chunker.flush()
