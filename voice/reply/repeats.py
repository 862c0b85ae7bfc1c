"""Whether a sentence repeats what the assistant said lately, judged as a listener would.

A listener hears "You're safe now." said in five replies running as the assistant
repeating itself, however short it is, and hears "That's just one example of the
AI's ability..." followed by "That's just another example of the AI's ability..."
as the same sentence said twice. Exact comparison of sentences of five words or
more (the guard's first rule) let both through. So a unit of speech is compared
with what was said by the words the two share in order (their longest common
subsequence), and these count as repeats:

* a sentence of ``MIN_SENTENCE_WORDS`` (3) words or more that is the same as, or
  a near-copy of, a sentence of one of the recent replies;
* a clause (a stretch between commas, semicolons, colons, dashes or sentence
  ends) of ``MIN_CLAUSE_WORDS`` (4) words or more that recurs: "..., I'm sorry
  for the error." ending three replies;
* a reply whose first sentence opens with a near-copy of the previous reply's
  first ``OPENING_WORDS`` (6) words ("That's just one example of the..." /
  "That's just another example of the...").

A near-copy shares at least ``NEAR_COPY`` (0.8) of the longer one's words in
order: one word in five may differ. The threshold was chosen on the labelled
pairs of ``tests/unit/test_repeats.py`` (docs/replies.md gives the table): at 0.7
"The cafe is on the ground floor." and "The shop is on the first floor." (two
answers to two questions) read as copies; at 0.9 a one-word change in a sentence
under ten words passed as new.

The one exception, a short answer given again because the user asked the same
thing again, is the caller's to make (:func:`same_question`): the history leaves
the replies to such questions out of what a reply may not repeat.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from voice.speak.chunking import SentenceChunker

NEAR_COPY = 0.8
MIN_SENTENCE_WORDS = 3
MIN_CLAUSE_WORDS = 4
OPENING_WORDS = 6

_WORD = re.compile(r"[a-z0-9']+")
_CLAUSE_BREAK = re.compile(r"[,;:]|\s[-–—]+\s|[–—]")
# Words that do not change what a question asks ("sorry, where is the cafe again?").
_NOT_CONTENT = frozenset(
    {
        "a", "an", "the", "is", "are", "was", "were", "be", "do", "does", "did", "to", "of",
        "in", "on", "at", "for", "and", "or", "but", "so", "please", "sorry", "again", "um",
        "uh", "well", "oh", "okay", "ok", "hey", "hi", "can", "could", "would", "will", "you",
        "your", "i", "me", "my", "it", "there", "that", "tell",
    }
)  # fmt: skip

Key = tuple[str, ...]


def words_of(text: str) -> list[str]:
    """Lowercase words without punctuation: "You're right!" -> ["you're", "right"]."""
    return _WORD.findall(text.lower().replace("’", "'"))


def split_sentences(text: str) -> list[str]:
    """The sentences of a finished text, by the chunker's own sentence rules."""
    return [p.strip() for p in pieces(text) if p.strip()]


def pieces(text: str) -> list[str]:
    """A text cut at the sentence ends inside it (whitespace kept, so they join back)."""
    splitter = SentenceChunker(first_chunk_min_chars=10**6, min_chars=1, max_chars=10**6)
    return [p for p in splitter.push(text) + splitter.flush() if p]


def clauses_of(sentence: str) -> list[Key]:
    """The clauses of a sentence as word keys ("Well, I'm sorry for the error." ->
    ("well",), ("i'm", "sorry", "for", "the", "error"))."""
    return [k for k in (tuple(words_of(p)) for p in _CLAUSE_BREAK.split(sentence)) if k]


def common_words(a: Sequence[str], b: Sequence[str]) -> int:
    """How many words ``a`` and ``b`` share in the same order (longest common
    subsequence; sentences are short, so the quadratic table is a few hundred cells)."""
    if not a or not b:
        return 0
    previous = [0] * (len(b) + 1)
    for word in a:
        row = [0]
        for j, other in enumerate(b):
            row.append(previous[j] + 1 if word == other else max(previous[j + 1], row[j]))
        previous = row
    return previous[-1]


def near_copy(a: Sequence[str], b: Sequence[str], threshold: float = NEAR_COPY) -> bool:
    """Whether the two say the same words in the same order, but for about one word
    in five."""
    longest = max(len(a), len(b))
    return longest > 0 and common_words(a, b) >= threshold * longest


def may_become(prefix: Sequence[str], unit: Sequence[str], threshold: float = NEAR_COPY) -> bool:
    """Whether a unit still being said (``prefix``, its words so far) may end as a
    near-copy of ``unit``: it is a near-copy of ``unit``'s start. Under five words
    that means an exact start but for one word from the third on, so a short
    opening ("Sure,", "I think") is held only while it is the unit's own."""
    if not prefix or len(prefix) > len(unit) + int(len(unit) * (1 - threshold)):
        return False
    start = unit[: len(prefix) + 1]
    misses = max(int(len(prefix) * (1 - threshold) + 1e-9), 1 if len(prefix) >= 3 else 0)
    return common_words(prefix, start) >= len(prefix) - misses


def same_question(a: str, b: str) -> bool:
    """Whether the user asked the same thing again: the same words but for about one
    in five, or the same content words ("Where is the cafe?" / "Sorry, where's the
    cafe again?")."""
    wa, wb = words_of(a), words_of(b)
    if near_copy(wa, wb):
        return True
    ca = {_stem(w) for w in wa} - _NOT_CONTENT
    cb = {_stem(w) for w in wb} - _NOT_CONTENT
    return bool(ca) and ca == cb


def _stem(word: str) -> str:
    """ "where's" -> "where", "tickets" -> "ticket": enough to match a question asked
    again in other words."""
    for suffix in ("'s", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            return word[: -len(suffix)]
    return word


@dataclass
class SaidLately:
    """What the recent replies said, in the units a repeat is judged on."""

    sentences: list[Key]
    clauses: list[Key]
    opening: Key  # the previous reply's first words, where its first sentence had as many

    @classmethod
    def of(cls, replies: Iterable[str]) -> SaidLately:
        """From the recent replies' texts, oldest first."""
        said = cls([], [], ())
        for text in replies:
            sentences = split_sentences(text)
            first = tuple(words_of(sentences[0])) if sentences else ()
            said.opening = first[:OPENING_WORDS] if len(first) >= OPENING_WORDS else ()
            for sentence in sentences:
                said.add(sentence)
        return said

    def add(self, sentence: str) -> None:
        """A sentence just said: it may not be said again."""
        key = tuple(words_of(sentence))
        if len(key) >= MIN_SENTENCE_WORDS:
            self.sentences.append(key)
        self.clauses += [c for c in clauses_of(sentence) if len(c) >= MIN_CLAUSE_WORDS]

    def repeats(self, sentence: str, first: bool = False) -> bool:
        """Whether this finished sentence repeats one said lately, or one of its
        clauses does, or (``first``: it opens the reply) its opening does."""
        return self.match(sentence, first) is not None

    def match(self, sentence: str, first: bool = False) -> tuple[str, str] | None:
        """What of ``sentence`` repeats, and how: ("same" | "near" | "clause" |
        "opening", the words said before), or None."""
        key = tuple(words_of(sentence))
        if len(key) >= MIN_SENTENCE_WORDS:
            for said in self.sentences:
                if near_copy(key, said):
                    return ("same" if key == said else "near"), " ".join(said)
        for clause in clauses_of(sentence):
            if len(clause) >= MIN_CLAUSE_WORDS:
                for said in self.clauses:
                    if near_copy(clause, said):
                        return "clause", " ".join(said)
        if first and self._opens_alike(key):
            return "opening", " ".join(self.opening)
        return None

    def may_repeat(self, sentence_so_far: str, first: bool = False) -> bool:
        """Whether a sentence not yet finished may still end as a repeat: held, not
        said, until it ends (a repeat is dropped whole, never half-said)."""
        key = tuple(words_of(sentence_so_far))
        if any(may_become(key, s) for s in self.sentences):
            return True
        parts = clauses_of(sentence_so_far)
        clause = parts[-1] if parts and not _ends_in_break(sentence_so_far) else ()
        if clause and any(may_become(clause, c) for c in self.clauses):
            return True
        if not first or not self.opening:
            return False
        return may_become(key, self.opening) if len(key) < OPENING_WORDS else self._opens_alike(key)

    def _opens_alike(self, key: Key) -> bool:
        return (
            bool(self.opening)
            and len(key) >= OPENING_WORDS
            and near_copy(key[:OPENING_WORDS], self.opening)
        )


def _ends_in_break(text: str) -> bool:
    stripped = text.rstrip()
    return bool(stripped) and bool(_CLAUSE_BREAK.search(stripped[-1]))


def find_repeats(
    exchanges: Sequence[tuple[str, str]], window: int = 5, skip: str = ""
) -> list[dict[str, str | int]]:
    """Every repeat a listener hears in a conversation: per reply (``exchanges`` are
    (user, reply) pairs in order), the sentences that repeat one of the ``window``
    replies before it, by the guard's own rules and with the same exception (an
    answer to a question asked again). Replies equal to ``skip`` (the fallback) are
    neither judged nor remembered: they are counted apart."""
    found: list[dict[str, str | int]] = []
    earlier: list[tuple[str, str]] = []
    for number, (user, reply) in enumerate(exchanges):
        if not reply.strip() or reply.strip() == skip.strip():
            continue
        recent = [r for u, r in earlier if not same_question(u, user)][-window:]
        said = SaidLately.of(recent)
        for index, sentence in enumerate(split_sentences(reply)):
            hit = said.match(sentence, first=index == 0)
            if hit is not None:
                found.append(
                    {"turn": number, "kind": hit[0], "sentence": sentence, "earlier": hit[1]}
                )
        earlier.append((user, reply))
    return found
