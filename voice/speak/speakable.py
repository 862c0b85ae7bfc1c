"""Rewrite reply text so that a TTS voice can read it aloud.

An LLM writes for the screen: markdown, code, links, emoji. Read literally, a voice
would say "asterisk asterisk" or spell out a URL. :func:`to_speakable` turns such text
into plain sentences for synthesis only; the text shown to the user keeps the original.

Choices made here:

* fenced code blocks are dropped entirely (reading code aloud helps nobody), while inline
  code keeps its text without the backticks;
* headers, list items and table rows become sentences: header, bullet and quote marks
  go (item numbers stay, read as "1."), and every line gets a final punctuation mark so
  the voice pauses between items as the chunker pauses between lines;
* ``[text](url)`` keeps its text, images are dropped, and bare URLs are reduced to their
  domain, spoken with "dot" (``https://www.example.com/a?b=1`` → "example dot com");
* e-mail addresses are spoken ("a dot b at c dot org"), as is any other ``@``;
* emoji and other pictographic symbols are removed;
* ``&`` becomes "and", ``50%`` "50 percent", ``2 * 3`` "2 times 3", and whitespace
  collapses to single spaces (the output is a single line).

Symbols are spoken in the reply's language (``language``, ISO 639-1: "50%" is "50
percent", "百分之50", "50 Prozent"...), and a line of Chinese or Japanese ends in "。";
languages without a table here get English words for symbols. Digits are left to the
voice's phonemizer, which reads them in its own language.

The function is pure, never raises on any string, and is idempotent:
``to_speakable(to_speakable(x)) == to_speakable(x)``.
"""

from __future__ import annotations

import re
import string
import unicodedata
from dataclasses import dataclass

__all__ = ["to_speakable"]

_CODE_FENCE = re.compile(r"`{3,}.*?(?:`{3,}|\Z)", re.DOTALL)
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
# Header, bullet and quote marks (and commas left by table borders), repeated so that
# "> - item" loses them all.
_LINE_MARKERS = re.compile(r"^(?:(?:#{1,6}|[-*+•])(?:\s+|$)|>\s*|,\s*)+")
_CLOSING_HASHES = re.compile(r"\s+#+$")
# Numbers of list items are read out ("1. Preheat the oven."); "1)" becomes "1.".
_NUMBER_PAREN = re.compile(r"^(\d{1,3})\)(?=\s)")
_RULE = re.compile(r"^(?:[-*_=]\s*){3,}$")
_BORDER = string.whitespace + "|"
_PIPES = re.compile(r"(?:\s*\|)+\s*")  # table cell borders become commas
_TABLE_SEPARATOR = re.compile(r"^\|?[\s:|-]*-[\s:|-]*$")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"\b(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)[^\s<>\"'()\[\]]*")
_URL_PREFIX = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://)?(?:[^@/]*@)?")  # scheme, user
_URL_AFTER_HOST = re.compile(r"[/?#:]")  # path, query, fragment or port
# A bare domain such as "example.com/path?a=1": lowercase top-level domain of 2+ letters,
# so that "e.g.", "U.S." and "3.14" are left alone.
_BARE_DOMAIN = re.compile(
    r"(?<![\w@./-])((?:[A-Za-z0-9-]+\.)+[a-z]{2,})(?![\w@-])(?:/[^\s<>\"'()\[\]]*)?"
)
_TIMES = re.compile(r"(?<=\d)\s*[*×]\s*(?=\d)")  # "2 * 3", "2×3"
# Emphasis marks: every other asterisk, and underscores at the edge of a word (but not
# inside snake_case).
_EMPHASIS = re.compile(r"\*+|(?<!\w)_+|_+(?!\w)")
_PERCENT_NUMBER = re.compile(r"(\d+(?:[.,]\d+)*)\s*%")
_AMPERSAND = re.compile(r"\s*&\s*")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[.,;:!?](?:\s|$))")
_SENTENCE_END = ".!?;:,…-–—。！？；，、："  # a line ending in one of these already has its pause
_TRAILING_URL_PUNCTUATION = ".,;:!?"

_EMOJI_COMPONENTS = frozenset({0x200D, 0x20E3, 0xFE0E, 0xFE0F})  # ZWJ, keycap, selectors
_KEPT_SYMBOLS = frozenset("°")  # "So" but spoken fine ("25°C")


@dataclass(frozen=True)
class SymbolWords:
    """How one language says the symbols :func:`to_speakable` reads out."""

    times: str
    dot: str
    at: str
    percent: str  # "{} percent": where the number goes
    and_: str
    stop: str = "."  # what ends a line that has no mark of its own


SYMBOL_WORDS = {
    "en": SymbolWords("times", "dot", "at", "{} percent", "and"),
    "zh": SymbolWords("乘以", "点", "at", "百分之{}", "和", "。"),
    "ja": SymbolWords("かける", "ドット", "アット", "{}パーセント", "と", "。"),
    "de": SymbolWords("mal", "Punkt", "at", "{} Prozent", "und"),
    "fr": SymbolWords("fois", "point", "arobase", "{} pour cent", "et"),
    "es": SymbolWords("por", "punto", "arroba", "{} por ciento", "y"),
    "it": SymbolWords("per", "punto", "chiocciola", "{} per cento", "e"),
    "pt": SymbolWords("vezes", "ponto", "arroba", "{} por cento", "e"),
    "nl": SymbolWords("keer", "punt", "apenstaartje", "{} procent", "en"),
}


def to_speakable(text: str, language: str = "en") -> str:
    """Return ``text`` rewritten for TTS: no markdown, code, URLs or emoji; one line.
    ``language`` (ISO 639-1, or a voice's "zh_CN") picks the words for symbols."""
    words = SYMBOL_WORDS.get(language.split("_")[0].lower(), SYMBOL_WORDS["en"])
    text = _CODE_FENCE.sub(" ", text)
    text = "".join(ch for ch in text if not _is_pictographic(ch))
    text = text.replace("`", "")
    text = _IMAGE.sub("", text)
    text = _LINK.sub(r"\1", text).replace("[", "").replace("]", "")
    lines = (_speakable_line(line, words) for line in text.splitlines())
    text = " ".join(line for line in lines if line)
    return _SPACE_BEFORE_PUNCTUATION.sub("", text)


def _speakable_line(line: str, words: SymbolWords) -> str:
    """Clean one line and end it with punctuation, so the voice pauses after headers,
    list items and table rows as it does after sentences."""
    line = line.strip()
    if _RULE.match(line) or _TABLE_SEPARATOR.match(line):
        return ""
    line = _inline(_PIPES.sub(", ", line.strip(_BORDER)), words)
    marker = _LINE_MARKERS.match(line)
    if marker:
        line = line[marker.end() :]
        if "#" in marker.group():
            line = _CLOSING_HASHES.sub("", line)
    if _RULE.match(line) or _TABLE_SEPARATOR.match(line):
        return ""  # "## ---"
    line = _NUMBER_PAREN.sub(r"\1.", line)
    if line and line[-1] not in _SENTENCE_END:
        line += words.stop
    return line


def _inline(text: str, words: SymbolWords) -> str:
    """Clean markup and speak symbols within one line; collapse its whitespace."""
    text = _TIMES.sub(f" {words.times} ", text)
    # Removing one kind of mark can join two halves of another ("~*~" -> "~~"): until
    # nothing changes, so a second pass over the output finds nothing to remove.
    while True:
        cleaned = _EMPHASIS.sub("", text.replace("~~", ""))
        if cleaned == text:
            break
        text = cleaned
    text = _URL.sub(lambda m: _spoken_url(m, words), text)
    text = _EMAIL.sub(lambda m: _spoken_address(m.group(), words), text)
    text = text.replace("@", f" {words.at} ")
    text = _BARE_DOMAIN.sub(lambda m: _spoken_host(m.group(1), words), text)
    gap = "" if words.stop == "。" else " "  # CJK needs no space between words
    text = _PERCENT_NUMBER.sub(lambda m: words.percent.format(m.group(1)) + gap, text)
    text = _AMPERSAND.sub(f" {words.and_} ", text)
    return " ".join(text.split())


def _spoken_url(match: re.Match[str], words: SymbolWords) -> str:
    url = match.group()
    stripped = url.rstrip(_TRAILING_URL_PUNCTUATION)
    trailing = url[len(stripped) :]
    host = _URL_PREFIX.sub("", stripped)
    host = _URL_AFTER_HOST.split(host, maxsplit=1)[0]
    return _spoken_host(host, words) + trailing


def _spoken_host(host: str, words: SymbolWords) -> str:
    host = host.removeprefix("www.").strip(".")
    return f" {words.dot} ".join(part for part in host.split(".") if part)


def _spoken_address(address: str, words: SymbolWords) -> str:
    user, _, domain = address.partition("@")
    return f"{_spoken_host(user, words)} {words.at} {_spoken_host(domain, words)}"


def _is_pictographic(ch: str) -> bool:
    """Emoji, their modifiers and joiners, and other pictographic symbols ("So")."""
    cp = ord(ch)
    if cp in _EMOJI_COMPONENTS or 0x1F000 <= cp <= 0x1FAFF or 0xE0020 <= cp <= 0xE007F:
        return True
    return unicodedata.category(ch) == "So" and ch not in _KEPT_SYMBOLS
