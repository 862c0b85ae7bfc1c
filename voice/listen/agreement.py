"""LocalAgreement-2: stable partial transcripts from unstable hypotheses.

Each recognition pass re-reads the whole utterance so far and may revise its
last words. A word is committed once two consecutive passes agree on it (the
longest common prefix of their hypotheses); committed words are never changed
again. The rest of the latest hypothesis is the unstable tail.

Each pass hypothesises the whole buffer, so :func:`tail_after` finds where the
committed words end inside a new hypothesis, tolerating small revisions.
"""

from __future__ import annotations

import difflib
import re

_STRIP = re.compile(r"[^\w']+")


def normalize_word(word: str) -> str:
    """Case- and punctuation-insensitive form used to compare hypotheses."""
    return _STRIP.sub("", word.lower()).strip("'") or word.strip()


def common_prefix_length(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if normalize_word(x) != normalize_word(y):
            break
        n += 1
    return n


def drop_overlap(before: list[str], hypothesis: list[str], longest: int = 3) -> list[str]:
    """``hypothesis`` without the words it repeats from the end of ``before``: after
    the audio was cut inside a word, the next pass hears that word again."""
    for n in range(min(longest, len(before), len(hypothesis)), 0, -1):
        if [normalize_word(w) for w in before[-n:]] == [normalize_word(w) for w in hypothesis[:n]]:
            return list(hypothesis[n:])
    return list(hypothesis)


def _matching_blocks(a: list[str], b: list[str]) -> list[difflib.Match]:
    """The runs of words ``a`` and ``b`` share, in order (difflib's, without its empty
    last one)."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [m for m in matcher.get_matching_blocks() if m.size]


def tail_after(committed: list[str], hypothesis: list[str]) -> list[str]:
    """The words of ``hypothesis`` that come after the ``committed`` words.

    Usually the hypothesis starts with the committed words. When the decoder revised
    some of them, the committed words end where the hypothesis's first words are
    closest to them: the fewest words changed, left out or put in (an edit distance
    over words, weighted below). On a tie, the later end: "your country" after a
    committed "what you" reads as "you" revised, not as "you" lost and "your" new.
    With nothing in common, they are as many of the hypothesis's first words as there
    are committed words.

    Lining up the words the two share instead (difflib's blocks) let one common word
    decide. With "...ask not what you" committed (Whisper had heard "your" as "you
    are"), it lined that "you" up with the last word of the pass "...ask not what your
    country can do for you", so the pass's new words read as a revision, and a buffer
    cut at the pause after them lost "country can do for you".
    """
    n = len(committed)
    if n == 0:
        return list(hypothesis)
    a = [normalize_word(w) for w in committed]
    b = [normalize_word(w) for w in hypothesis]
    if b[:n] == a:
        return list(hypothesis[n:])
    return list(hypothesis[_closest_prefix(a, b) :])


# What a committed word changed or left out costs, against a word put in among them: a
# pass that hears more of the audio writes words it missed or spells out ("the view of
# you and" for a committed "the view and"; "the six hundred, then seventy-third night"
# for "the 673rd night"), so a shared word a few words on still lines up. Five or more
# words put in before one shared word are no revision: "...what your country can do
# for you" after a committed "...what you" is new words, not a revision ending in "you".
CHANGED_COST = 4
PUT_IN_COST = 1


def _closest_prefix(a: list[str], b: list[str]) -> int:
    """The length of the prefix of ``b`` closest to ``a`` by the weighted edit distance
    above (the longest of those that tie)."""
    # Rows of the table, one committed word at a time: row[j] is the cost from the
    # committed words so far to the hypothesis's first j words.
    row = [j * PUT_IN_COST for j in range(len(b) + 1)]
    for i, word in enumerate(a, start=1):
        previous, row = row, [i * CHANGED_COST] + [0] * len(b)
        for j, other in enumerate(b, start=1):
            changed = previous[j - 1] + (0 if word == other else CHANGED_COST)
            row[j] = min(previous[j] + CHANGED_COST, row[j - 1] + PUT_IN_COST, changed)
    best = min(row)
    return max(j for j, cost in enumerate(row) if cost == best)


# A segment end lines up with the committed words when the hypothesis and they agree on
# its last words, and on most of its words: Whisper rewrites a word or two of an early
# segment from pass to pass on spontaneous speech ("the view of you and" for "the view
# and"), and an exact match never came, so a 20 s turn was never trimmed.
ANCHOR_WORDS = 2
MIN_AGREED_SHARE = 0.75


def committed_through(committed: list[str], heard: list[str]) -> int | None:
    """How many of the ``committed`` words the hypothesis words ``heard`` (its words up to
    a segment end) cover, or None when the two cannot be lined up with confidence: the
    last ``ANCHOR_WORDS`` words must agree, and at least ``MIN_AGREED_SHARE`` of the words
    on both sides."""
    a = [normalize_word(w) for w in committed]
    b = [normalize_word(w) for w in heard]
    if not b or len(b) > len(a) + len(a) // 2 + 1:
        return None
    if a[: len(b)] == b:
        return len(b)
    blocks = _matching_blocks(a, b)
    if not blocks:
        return None
    last = blocks[-1]
    if last.b + last.size != len(b) or last.size < min(ANCHOR_WORDS, len(b)):
        return None
    through = last.a + last.size
    agreed = sum(m.size for m in blocks)
    if agreed < MIN_AGREED_SHARE * max(len(b), through):
        return None
    return through


def says_committed(
    committed: list[str], hypothesis: list[str], share: float = MIN_AGREED_SHARE
) -> bool:
    """Whether a pass over a whole buffer (``hypothesis``) says that buffer's
    ``committed`` words: ``share`` of them are found in it, in order. Whisper at times
    leaves out a buffer's first words when its prompt runs up to them: "country has
    never been surpassed." over "...ask what you can do for your country has never been
    surpassed", with "ask what you can do for" committed. Such a pass is no account of
    the audio it heard, and a buffer cut placed by it lost the words it left out."""
    if not committed:
        return True
    a = [normalize_word(w) for w in committed]
    b = [normalize_word(w) for w in hypothesis]
    if b[: len(a)] == a:
        return True
    agreed = sum(m.size for m in _matching_blocks(a, b))
    return agreed >= share * len(a)


class LocalAgreement:
    """Commits the longest common prefix of consecutive hypothesis tails.

    The last ``holdback`` words of a hypothesis are never committed: the end of
    the buffer often cuts a word in two, and two passes can agree on the same
    wrong guess for it ("maybe consider" for "may be considered").
    """

    def __init__(self, holdback: int = 1) -> None:
        self.holdback = holdback
        self.committed: list[str] = []
        self.tail: list[str] = []
        self._has_previous = False

    def update(self, hypothesis: list[str]) -> list[str]:
        """Take a pass's words after the committed prefix; return newly committed words."""
        if not self._has_previous:
            self._has_previous = True
            self.tail = list(hypothesis)
            return []
        limit = max(0, len(hypothesis) - self.holdback)
        n = min(common_prefix_length(self.tail, hypothesis), limit)
        newly = list(hypothesis[:n])
        self.committed.extend(newly)
        self.tail = list(hypothesis[n:])
        return newly

    def force_commit(self, words: list[str]) -> None:
        """Commit words without agreement (used when audio must be dropped from the window)."""
        self.committed.extend(words)
        self.tail = []
        self._has_previous = False

    def text(self, tail: list[str] | None = None) -> str:
        return " ".join(self.committed + (self.tail if tail is None else tail))
