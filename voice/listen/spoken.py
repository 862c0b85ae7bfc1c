"""The word-timing guard: which of Whisper's last words the user actually said.

At a pause Whisper finishes the sentence it has heard ("...the door to see." when only
"...the door to" was said) and punctuates it, which reads as a finished turn. The pass
that covers a pause also aligns its words to the audio, and the guard compares where
its last words lie with where the speech stopped:

- a last word the alignment starts at the end of the speech, or after it, was not
  said: the decoder added it;
- a last word that was begun but given far too little sound for its syllables was not
  said either, at least not whole: "...the lower case being in [pause]" came out as
  "...being infected.", three syllables aligned to the 180 ms of "in". Nobody says a
  syllable in under ~80 ms (fast speech takes 150-200), so a word that had less than
  that for each of its syllables was broken off, or was a shorter word that the
  decoder lengthened. Either way the speaker stopped inside a phrase;
- a last word Whisper itself wrote broken off ("...Lord, wait a-" for "...Lord, but
  [1.0 s]") says the same, wherever the alignment put it: the decoder's own endings
  are whole words ("see.", "purpose."), and it marks a word as broken off only where
  it heard the sound stop inside one. Dropped with the word before it, it left
  "Lord", which reads no more unfinished than a finished turn whose mark was dropped.

Measured on the corpus's read sentences, passes as the listener sends them (to the
audible end + 100 ms): of 87 cuts after a function word Whisper wrote words that were
not said in 63, and the first rule catches 60 of those at 80 ms; of 28 whole
sentences it flags none (a real last word starts a word's length before the end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voice.listen.whisper import WordTime

# A word aligned shorter than this at the very end was squeezed there: the alignment
# ran out of frames for a real last word ("Phil" at 20 ms), it did not invent one.
SQUEEZED_WORD_S = 0.06
# ... if it is squeezed in where the sound ends: the pass's audio runs on a little past
# the speech (``listen.final_tail_ms``, 100 ms) and a frame may be lost to rounding. The
# alignment also runs a second into the padding after the audio, and words the decoder
# invented pile up squeezed at *that* end ("...sailed on [to the land.]" at 1.08 s past
# the speech, all three in one frame): nothing was said there.
SQUEEZED_REACH_S = 0.2

# How Whisper writes a word it heard broken off ("a-", "e-", "wh—").
BROKEN_OFF = ("-", "—")

_VOWEL_GROUPS = re.compile(r"[aeiouy]+")


@dataclass(frozen=True)
class Unspoken:
    """The last words of a pass that the audio does not hold."""

    words: int = 0
    # The first of them was begun (it had at least one syllable's sound) but not said
    # whole, or Whisper wrote one of them broken off: the speaker stopped inside a word
    # or a phrase, not at an end.
    cut_off: bool = False


NOTHING_UNSPOKEN = Unspoken()


def syllables(word: str) -> int:
    """A low estimate of a written word's syllables (its vowel groups, less a silent
    final "e" or "-ed"): low, so that a word is never thought longer than it is.
    Digits count one: "600" may be "six hundred", but nothing here must guess so."""
    letters = re.sub(r"[^a-z]", "", word.lower())
    count = len(_VOWEL_GROUPS.findall(letters))
    if count > 1 and letters.endswith("e"):
        count -= 1  # "mobile", "little": undercounted, never over
    if count > 1 and letters.endswith("ed") and not letters.endswith(("ted", "ded")):
        count -= 1  # "opened", "seemed"
    return max(1, count)


def unspoken_tail(
    timed: list[WordTime],
    speech_end_s: float,
    slack_s: float,
    per_syllable: bool = True,
    most: int | None = None,
) -> Unspoken:
    """The last words (punctuation aside) whose part before ``speech_end_s`` is shorter
    than ``slack_s`` for each of their syllables: words the decoder added after the
    speech stopped (one syllable: it starts within ``slack_s`` of the end, or later),
    or a word too long for the sound it was given (``cut_off``, as is a dropped word
    written broken off, "a-"). A word squeezed into one frame or two where the sound
    ends is real (the alignment ran out of frames for it).
    ``per_syllable`` False: ``slack_s`` for every word, however long (no word is found
    broken off). ``most``: no more words than this are dropped (the pass's words that
    are the caller's to drop)."""
    dropped = 0
    cut_off = False
    # The pass ends in a word broken off: "a-", or "a" then a token "-" of its own.
    broken = bool(timed) and timed[-1].word.strip().endswith(BROKEN_OFF)
    for word in reversed(timed):
        if not any(c.isalnum() for c in word.word):
            continue  # punctuation: it belongs to the word before it
        squeezed = (
            word.end_s - word.start_s < SQUEEZED_WORD_S
            and word.start_s <= speech_end_s + SQUEEZED_REACH_S
        )
        needed_s = slack_s * (syllables(word.word) if per_syllable else 1)
        # Alignments come in 20 ms steps, so the bounds are often met exactly: both are
        # compared as start against the end less a slack, the same way every time.
        if squeezed or word.start_s < speech_end_s - needed_s:
            break
        dropped += 1
        cut_off = word.start_s < speech_end_s - slack_s  # begun, and only too short
    cut_off = cut_off or (broken and dropped > 0)
    return Unspoken(dropped if most is None else min(most, dropped), cut_off)


def spoken_part(text: str, unspoken: int) -> str:
    """``text`` without its last ``unspoken`` words (``unspoken_tail``), ending bare."""
    if not unspoken:
        return text
    kept = text.split()[:-unspoken]
    # All its punctuation goes: a comma before a dropped word is Whisper's guess too,
    # and read as "unfinished" it made a real last word, dropped, cost 2 s.
    return " ".join(kept).rstrip(".?!,;:-—…") if kept else ""
