"""Split a streaming LLM reply into speakable chunks as early as possible.

Text-to-speech sounds natural only when it is given whole sentences, but waiting for
the whole reply before speaking adds seconds of silence. :class:`SentenceChunker` sits
between the two: it is fed the reply token by token and hands out each sentence the
moment its end is certain, so synthesis of sentence one overlaps with generation of
sentence two. The first chunk may end even earlier, at a clause boundary, because the
delay before the *first* audio is what the user notices most.

Rules, in short:

* A chunk ends after a sentence end (``.``, ``!``, ``?``, ``…`` and runs of them, with
  any closing quotes, brackets or markdown emphasis after them) followed by whitespace,
  or at a line break.
* Only the first chunk may end at a clause boundary (``,`` ``;`` ``:`` or a spaced dash
  `` - `` / `` – `` / `` — ``), and only once it has ``first_chunk_min_chars``.
* Chunks shorter than ``min_chars`` are merged with what follows.
* A run longer than ``max_chars`` without a boundary is split at its last clause
  boundary or whitespace before ``max_chars`` (or hard at ``max_chars``).
* Fenced code blocks (```` ``` ````) are never split and always form chunks of their own,
  so a later ``to_speakable`` step can drop them whole.
* No split inside ``3.14``, ``10:30``, ``1,000``, ``v1.2.3``, ``example.com/a?b=1``,
  ``a.b@c.org`` (no whitespace after the mark), after abbreviations (``Dr.``, ``e.g.``,
  ``U.S.``, ``Jan.``...), single initials (``J. K. Rowling``), list numbers at a line
  start (``1. ``), or before a lowercase word (``Wait... what``).

Chinese and Japanese (CJK) text has no spaces: ``。！？`` end a sentence and ``；，、：``
a clause right where they stand, with no whitespace after them, and a length is
counted in characters, each CJK character as ``CJK_CHAR_WEIGHT`` Latin ones (one
syllable of speech, as long as three letters of English), so the same settings give a
Mandarin first chunk of its first clause ("北京是中国的首都，") and not the whole reply.

Whitespace convention: the whitespace after a boundary belongs to the chunk that the
boundary ends, so every chunk but the first starts with a non-space character and
``"".join(chunks)`` is exactly the input. Callers should skip chunks that are blank.

Lookahead: whether a mark ends a sentence depends on the next non-space character
(``"Dr." + " Smith"`` versus ``"now." + " Then"``), which in a stream may not have
arrived yet. The chunker therefore re-scans its pending text after every delta and only
cuts where the decision can no longer change; where it needs a character it has not
seen, it waits. Every decision depends only on the text (never on how it was split into
deltas), so one big delta and a character-by-character stream give the same chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SentenceChunker"]

_TERMINATORS = ".!?…。！？"
_CLOSERS = "\"'”’»)]}*_`」』）》〉】"
_CLAUSE_MARKS = ",;:；，、："
_CJK_TERMINATORS = "。！？!?…"
_CJK_CLAUSE_MARKS = "；，、："
_CJK_MARKS = "。！？；，、："
# A whitespace run, or the empty place right after a CJK mark (and its closers) where
# the next character is neither space nor closer: CJK boundaries need no whitespace.
_WHITESPACE_RUN = re.compile(
    r"\s+|(?<=[。！？；，、：」』）》〉】”’])(?=[^\s\"'”’»)\]}*_`」』）》〉】。！？；，、：])"
)
CJK_CHAR_WEIGHT = 3
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_DASHES = "-–—"
_FENCE = "```"
# "U.S", "e.g", "U.S.A": letters joined by dots (the final dot is the one being judged).
_INITIALISM = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")

# Never end a sentence after these (compared lowercase, without the final dot).
_ABBREVIATIONS = frozenset(
    {
        "dr", "mr", "mrs", "ms", "mx", "prof", "st", "jr", "sr", "mt", "vs", "fig", "approx",
        "e.g", "i.e", "u.s", "u.k",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    }
)  # fmt: skip
# Often the last word of a sentence: a sentence end only before an uppercase letter.
_SENTENCE_FINAL_ABBREVIATIONS = frozenset({"etc", "a.m", "p.m"})


@dataclass(frozen=True, slots=True)
class _Cut:
    """Where the pending text is cut, and whether the chunk is a fenced code block."""

    end: int
    code: bool = False


class SentenceChunker:
    """Turn a stream of text deltas into speakable chunks, as soon as each is certain.

    Feed deltas with :meth:`push` and call :meth:`flush` at the end of the stream. Every
    character pushed comes back exactly once, in order, in some chunk. After
    :meth:`flush` the chunker is reset and can take a new stream.
    """

    def __init__(
        self,
        *,
        first_chunk_min_chars: int = 20,
        min_chars: int = 8,
        max_chars: int = 250,
        first_chunk_max_chars: int = 0,
    ) -> None:
        """Configure the chunker.

        Args:
            first_chunk_min_chars: the first chunk may end at a clause boundary once it
                has this many characters, to start speaking sooner.
            min_chars: a chunk shorter than this (ignoring surrounding whitespace) is
                merged with the next one, so TTS is not fed fragments like ``"1."``.
            max_chars: a chunk is force-split near this length when no boundary comes,
                bounding the latency and the TTS input size.
            first_chunk_max_chars: if set, the first chunk is force-split near this
                length, preferably before a conjunction or preposition. Piper renders a
                whole chunk before any audio comes out (~0.13 s per second of speech
                here), so a short first chunk is what makes first audio fast.
        """
        if first_chunk_min_chars < 0 or min_chars < 0:
            raise ValueError("first_chunk_min_chars and min_chars must be >= 0")
        if max_chars < 1:
            raise ValueError("max_chars must be >= 1")
        self.first_chunk_min_chars = first_chunk_min_chars
        self.min_chars = min_chars
        self.max_chars = max_chars
        self.first_chunk_max_chars = first_chunk_max_chars
        self._buf = ""
        self._first = True  # no spoken (non-code) chunk emitted yet
        self._line_start = True  # the pending text starts at the start of a line

    def push(self, text_delta: str) -> list[str]:
        """Add the next piece of the stream; return the chunks it completes (maybe none)."""
        self._buf += text_delta
        return self._drain(final=False)

    def flush(self) -> list[str]:
        """End the stream: return the remaining chunks, including any unfinished tail.

        The chunker is reset afterwards, ready for the next reply.
        """
        chunks = self._drain(final=True)
        if self._buf:
            chunks.append(self._buf)
        self._buf = ""
        self._first = True
        self._line_start = True
        return chunks

    # -- internals -------------------------------------------------------------------

    def _drain(self, *, final: bool) -> list[str]:
        chunks: list[str] = []
        while (cut := self._find_cut(self._buf, final=final)) is not None:
            chunk, self._buf = self._buf[: cut.end], self._buf[cut.end :]
            chunks.append(chunk)
            trailing = chunk[len(chunk.rstrip()) :]
            self._line_start = "\n" in trailing
            if not cut.code:
                self._first = False
        return chunks

    def _find_cut(self, buf: str, *, final: bool) -> _Cut | None:
        """Return the end of the next chunk in ``buf``, or None if it is not yet certain.

        When ``final`` is false, a result must hold for every possible continuation of
        ``buf``: wherever the answer depends on characters not seen yet, return None.
        When ``final`` is true there is no continuation; None then means "no cut".
        """
        n = len(buf)
        start = _skip_space(buf, 0)
        if start == n:
            return None
        if self._line_start:
            if buf.startswith(_FENCE, start):
                return _fence_cut(buf, start, final=final)
            if not final and _FENCE.startswith(buf[start:]):
                return None  # "`" or "``" so far: could still become a fence
        limit = start + self._max_len()
        runs: list[tuple[int, int]] = []
        for match in _WHITESPACE_RUN.finditer(buf, start):
            s, k = match.span()
            if s > limit:
                return self._forced_cut(buf, start, runs)
            if k == n and not final:
                return None  # the boundary (if any) depends on the next character
            runs.append((s, k))
            if k == n:
                break  # trailing whitespace at the end of the stream
            if self._is_boundary(buf, start, s, k):
                return _Cut(k)
            if not final and "\n" in buf[s:k] and _FENCE.startswith(buf[k:]):
                return None  # "\n`": a fence (always a boundary) may be starting
        if n > limit:
            return self._forced_cut(buf, start, runs)
        return None

    def _is_boundary(self, buf: str, start: int, s: int, k: int) -> bool:
        """Decide whether the whitespace run ``buf[s:k]`` (with ``k < len(buf)``) ends a chunk."""
        content = spoken_len(buf[start:s].rstrip())
        if s == k:  # right after a CJK mark (see _WHITESPACE_RUN)
            return self._is_cjk_boundary(buf, start, s, content)
        if "\n" in buf[s:k]:
            # A code fence always starts a chunk of its own; else a line break is a boundary.
            return buf.startswith(_FENCE, k) or content >= self.min_chars
        if content >= self.min_chars and self._is_sentence_end(buf, start, s, k):
            return True
        return (
            self._first and content >= self.first_chunk_min_chars and _is_clause_end(buf, start, s)
        )

    def _is_cjk_boundary(self, buf: str, start: int, s: int, content: int) -> bool:
        p = s
        while p > start and buf[p - 1] in _CLOSERS:
            p -= 1
        if p == start or buf[p - 1] not in _CJK_MARKS:
            return False  # a closing bracket with no CJK mark before it
        if buf[p - 1] in _CJK_TERMINATORS:
            return content >= self.min_chars
        return self._first and content >= self.first_chunk_min_chars

    def _is_sentence_end(self, buf: str, start: int, s: int, k: int) -> bool:
        """Whether the text before ``s`` ends a sentence, given the next character ``buf[k]``."""
        p = s
        while p > start and buf[p - 1] in _CLOSERS:
            p -= 1
        t = p
        while t > start and buf[t - 1] in _TERMINATORS:
            t -= 1
        if t == p:
            return False  # no terminator
        nxt = buf[k]
        if nxt.islower():
            return False  # "Wait... what", "approx. five": the sentence goes on
        if buf[t:p] != ".":
            return True  # "!", "?!", "...", "…"
        b = t
        while b > 0 and (buf[b - 1].isalnum() or buf[b - 1] == "."):
            b -= 1
        token = buf[b:t]
        low = token.lower()
        if low in _ABBREVIATIONS:
            return False
        if low in _SENTENCE_FINAL_ABBREVIATIONS:
            return nxt.isupper()
        if low == "no":
            return not (nxt.isdigit() or nxt == "#")  # "No. 5" but "No. I won't."
        if _INITIALISM.fullmatch(token) or (len(token) == 1 and token.isupper()):
            return False  # "U.S.A." and "J. K. Rowling"
        return not (token.isdigit() and self._at_line_start(buf, b))  # "1. First item"

    def _at_line_start(self, buf: str, pos: int) -> bool:
        newline = buf.rfind("\n", 0, pos)
        if newline == -1:
            return self._line_start and not buf[:pos].strip()
        return not buf[newline + 1 : pos].strip()

    def _max_len(self) -> int:
        if self._first and 0 < self.first_chunk_max_chars < self.max_chars:
            return self.first_chunk_max_chars
        return self.max_chars

    def _forced_cut(self, buf: str, start: int, runs: list[tuple[int, int]]) -> _Cut:
        """Cut an over-long run: at its last clause boundary in the second half of the
        allowed length, else (first chunk) before a joining word, else at its last
        whitespace, else hard at the allowed length."""
        longest = self._max_len()
        half = start + longest // 2
        for s, k in reversed(runs):
            if s < half:
                break
            if _is_clause_end(buf, start, s):
                return _Cut(k)
        if self._first:
            for s, k in reversed(runs):
                if s < start + self.first_chunk_min_chars:
                    break
                if buf[k:].split(" ", 1)[0].lower() in _JOINING_WORDS:
                    return _Cut(k)
        if runs:
            return _Cut(runs[-1][1])
        return _Cut(start + longest)


# Words a phrase naturally breaks before: a forced first cut here sounds least chopped.
_JOINING_WORDS = frozenset(
    [
        "and", "but", "or", "so", "because", "which", "that", "who", "when", "where", "while",
        "with", "without", "to", "of", "in", "on", "for", "from", "about", "as", "at", "by",
        "into", "like", "than", "is", "are", "was", "were", "will", "would", "can", "could",
    ]
)  # fmt: skip


def spoken_len(text: str) -> int:
    """A length that stands for speaking time: characters, a CJK one as
    ``CJK_CHAR_WEIGHT``."""
    return len(text) + (CJK_CHAR_WEIGHT - 1) * len(_CJK.findall(text))


def _skip_space(buf: str, i: int) -> int:
    n = len(buf)
    while i < n and buf[i].isspace():
        i += 1
    return i


def _fence_cut(buf: str, start: int, *, final: bool) -> _Cut | None:
    """End of the fenced code block opening at ``start``: after the closing fence (the
    next run of three or more backticks) and the whitespace that follows it."""
    n = len(buf)
    body = start
    while body < n and buf[body] == "`":
        body += 1
    close = buf.find(_FENCE, body)
    if close == -1:
        return None
    end = close
    while end < n and buf[end] == "`":
        end += 1
    k = _skip_space(buf, end)
    if k == n and not final:
        return None  # more backticks or whitespace may follow
    return _Cut(k, code=True)


def _is_clause_end(buf: str, start: int, s: int) -> bool:
    """Whether the text before ``s`` ends a clause: ``,`` ``;`` ``:`` or a spaced dash."""
    p = s
    while p > start and buf[p - 1] in _CLOSERS:
        p -= 1
    if p == start:
        return False
    mark = buf[p - 1]
    if mark in _CLAUSE_MARKS:
        # "e.g., apples": the comma belongs to the abbreviation.
        return not buf[start : p - 1].lower().endswith(("e.g.", "i.e.", "etc."))
    if mark in _DASHES:
        d = p - 1
        while d > start and buf[d - 1] in _DASHES:
            d -= 1
        # " - " or " -- " after a word on the same line; not a "- item" bullet.
        return p - d <= 2 and d - 2 >= start and buf[d - 1] in " \t" and not buf[d - 2].isspace()
    return False
