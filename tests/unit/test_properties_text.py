"""Properties on bad and odd input: the word normalisers, the chunker and the protocol.

These complement the examples and properties in ``test_agreement.py``,
``test_chunking.py``, ``test_speakable.py`` and ``test_protocol.py``: arbitrary
Unicode (control characters, every kind of whitespace and line break, combining
marks), hostile JSON (huge numbers, deep nesting, NaN) and byte-exact round trips.
"""

from __future__ import annotations

import itertools
import json
import re
import string
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from voice.audio.format import to_pcm16
from voice.conversation.turns import same_turn_text, split_words
from voice.listen.agreement import normalize_word
from voice.serve.protocol import (
    CLOSE_PROTOCOL_ERROR,
    DOWNLINK_HEADER,
    MAX_FRAME_MS,
    MAX_RATE,
    MAX_TEXT_BYTES,
    MIN_RATE,
    Hello,
    Played,
    ProtocolError,
    ProtocolViolation,
    downlink_frame,
    parse_audio,
    parse_downlink,
    parse_text,
)
from voice.speak.chunking import SentenceChunker
from voice.speak.speakable import to_speakable

FAST = settings(max_examples=100, deadline=None)
FASTER = settings(max_examples=50, deadline=None)

# -- strategies ---------------------------------------------------------------------------

# Every kind of whitespace Python knows (str.isspace / re's \s), line breaks included.
WHITESPACE = [ch for ch in map(chr, range(0x3001)) if ch.isspace()]
# ASCII punctuation that is not part of a word for normalize_word (its \w and "'" are).
PUNCTUATION = [ch for ch in string.punctuation if ch not in "'_"]
ODD_CHARS = st.characters(
    categories=["Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Pd", "Po", "So", "Lm", "Nl", "No"]
)

unicode_text = st.one_of(
    st.text(max_size=120),  # any code point but surrogates
    st.text(alphabet=ODD_CHARS, max_size=60),
    st.text(
        alphabet=st.one_of(
            st.sampled_from(WHITESPACE),
            st.sampled_from(PUNCTUATION),
            st.sampled_from(list("aZé'_0\u0307\u200b\u200dİßΣς")),
            ODD_CHARS,
        ),
        max_size=80,
    ),
)
ascii_word = st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=8)
whitespace_run = st.text(alphabet=st.sampled_from(WHITESPACE), min_size=1, max_size=4)


# -- normalize_word -------------------------------------------------------------------------


@FAST
@given(unicode_text)
def test_normalize_word_never_raises_and_is_idempotent(word: str) -> None:
    once = normalize_word(word)
    assert isinstance(once, str)
    assert normalize_word(once) == once


@FAST
@given(unicode_text)
def test_a_normalised_word_with_letters_is_lowercase_word_characters(word: str) -> None:
    out = normalize_word(word)
    if any(c.isalnum() for c in out):
        assert re.fullmatch(r"[\w']+", out)
        assert out == out.lower()
        assert not out.startswith("'") and not out.endswith("'")


@FAST
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=30))
def test_normalize_word_ignores_ascii_case(word: str) -> None:
    assert normalize_word(word.upper()) == normalize_word(word) == normalize_word(word.lower())


@st.composite
def decorated_word(draw: st.DrawFn) -> tuple[str, str]:
    """An ASCII word, and the same word with punctuation put anywhere in it."""
    word = draw(ascii_word)
    out = []
    for ch in word:
        out.append(draw(st.text(alphabet=st.sampled_from(PUNCTUATION), max_size=2)))
        out.append(ch)
    out.append(draw(st.text(alphabet=st.sampled_from([*PUNCTUATION, "'"]), max_size=3)))
    return word, "".join(out)


@FAST
@given(decorated_word())
def test_normalize_word_ignores_punctuation(case: tuple[str, str]) -> None:
    word, decorated = case
    assert normalize_word(decorated) == normalize_word(word) == word.lower()


# -- split_words and same_turn_text ---------------------------------------------------------


@FAST
@given(unicode_text)
def test_split_words_gives_clean_normalised_words(text: str) -> None:
    words = split_words(text)
    for word in words:
        assert word and not any(c.isspace() for c in word)
        assert any(c.isalnum() for c in word)
        assert normalize_word(word) == word


@FAST
@given(unicode_text)
def test_split_words_is_idempotent(text: str) -> None:
    words = split_words(text)
    assert split_words(" ".join(words)) == words


@FAST
@given(unicode_text, unicode_text)
def test_same_turn_text_is_reflexive_and_symmetric(a: str, b: str) -> None:
    assert same_turn_text(a, a)
    assert same_turn_text(a, b) == same_turn_text(b, a)
    assert same_turn_text(a, " ".join(split_words(a)))


@st.composite
def messy_transcript(draw: st.DrawFn) -> tuple[list[str], str]:
    """ASCII words, and a transcript of them with any case, punctuation and whitespace."""
    words = draw(st.lists(ascii_word, max_size=12))
    parts = [draw(st.text(alphabet=st.sampled_from(WHITESPACE), max_size=3))]
    for word in words:
        cased = "".join(ch.upper() if draw(st.booleans()) else ch.lower() for ch in word)
        marks = st.text(alphabet=st.sampled_from(PUNCTUATION), max_size=2)
        decorated = "".join(draw(marks) + ch for ch in cased) + draw(marks)
        parts.append(decorated)
        parts.append(draw(whitespace_run))
        if draw(st.integers(0, 4)) == 0:  # a stand-alone mark: " - ", " ... "
            parts.append(draw(st.text(alphabet=st.sampled_from(PUNCTUATION), min_size=1)))
            parts.append(draw(whitespace_run))
    return words, "".join(parts)


@FAST
@given(messy_transcript())
def test_same_turn_text_ignores_case_punctuation_and_whitespace(
    case: tuple[list[str], str],
) -> None:
    words, messy = case
    plain = " ".join(words)
    assert split_words(messy) == [w.lower() for w in words]
    assert same_turn_text(plain, messy)
    assert same_turn_text(messy, plain.upper())


@FAST
@given(st.lists(ascii_word, max_size=8), st.lists(whitespace_run, min_size=9, max_size=9))
def test_split_words_ignores_the_kind_of_whitespace(words: list[str], runs: list[str]) -> None:
    spaced = runs[0] + "".join(w + r for w, r in zip(words, runs[1:], strict=False))
    assert split_words(spaced) == split_words(" ".join(words)) == [w.lower() for w in words]


@FAST
@given(unicode_text, ascii_word)
def test_another_word_is_another_turn(text: str, word: str) -> None:
    assert not same_turn_text(text, text + " " + word)
    assert not same_turn_text(text, word + " " + text)


# -- to_speakable on odd characters ---------------------------------------------------------


@FAST
@given(unicode_text)
def test_to_speakable_gives_one_line_with_single_spaces(text: str) -> None:
    out = to_speakable(text)
    assert len(out.splitlines()) <= 1
    assert all(ch == " " or not ch.isspace() for ch in out)
    assert "  " not in out and out == out.strip()
    assert to_speakable(out) == out


# -- the sentence chunker -------------------------------------------------------------------

_CHUNK_PIECES = [
    "Dr.", "e.g.", "No.", "1.", "3.14", "...", "…", ".", "!", "?", ",", ";", " - ", "`", "```",
    " ", "\n", "\r\n", "\r", "\u2028", "\x85", "\x1c", "\xa0", "\u3000", "\t", "\x00", "\u200b",
    "\ufeff", "Hello", "world", "Then", "é", "İ", "A", "x", "42", '"', ")",
]  # fmt: skip
chunk_text_strategy = st.one_of(
    st.lists(st.sampled_from(_CHUNK_PIECES), max_size=50).map("".join),
    unicode_text,
)
chunker_settings = st.fixed_dictionaries(
    {
        "first_chunk_min_chars": st.integers(0, 30),
        "min_chars": st.integers(0, 12),
        "first_chunk_max_chars": st.sampled_from([0, 10, 25]),
        "max_chars": st.integers(1, 40),
    }
)


@st.composite
def split_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(chunk_text_strategy)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


def _stream(chunker: SentenceChunker, deltas: list[str]) -> list[str]:
    return [c for d in deltas for c in chunker.push(d)] + chunker.flush()


@FAST
@given(split_text(), chunker_settings)
def test_chunks_of_any_split_rebuild_odd_unicode_input(
    case: tuple[str, list[str]], settings_: dict[str, int]
) -> None:
    text, deltas = case
    chunks = _stream(SentenceChunker(**settings_), deltas)
    assert "".join(chunks) == text
    assert all(chunks)
    assert chunks == _stream(SentenceChunker(**settings_), [text])
    assert all(not chunk[0].isspace() for chunk in chunks[1:])


@FAST
@given(chunk_text_strategy, chunk_text_strategy, chunker_settings)
def test_pushed_chunks_hold_whatever_comes_next(
    head: str, tail: str, settings_: dict[str, int]
) -> None:
    """What push() hands out is never revised by text that has not arrived yet."""
    early = SentenceChunker(**settings_).push(head)
    whole = _stream(SentenceChunker(**settings_), [head + tail])
    assert whole[: len(early)] == early


@FASTER
@given(chunk_text_strategy, split_text(), chunker_settings)
def test_a_flushed_chunker_is_as_good_as_new(
    first: str, second: tuple[str, list[str]], settings_: dict[str, int]
) -> None:
    text, deltas = second
    used = SentenceChunker(**settings_)
    _stream(used, [first])
    assert _stream(used, deltas) == _stream(SentenceChunker(**settings_), [text])


# -- the protocol decoder -------------------------------------------------------------------

KNOWN_CODES = {
    "message_too_large", "bad_json", "bad_message", "unknown_type", "unsupported_rate",
    "bad_field", "unsupported_format",
}  # fmt: skip

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**300), max_value=10**300),  # far past int64
    st.floats(allow_nan=True, allow_infinity=True),  # json.dumps writes NaN and Infinity
    st.text(max_size=20),
    st.sampled_from(["hello", "played", "pcm16", "", "ready"]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
field_value = st.one_of(
    st.integers(-5, 2**31 + 5),
    st.sampled_from([8000, 16000, 48000, 2**31 - 1, 2**31, 2**63, -(2**63), 1, 0]),
    json_value,
)


@st.composite
def hostile_message(draw: st.DrawFn) -> str:
    """A JSON object that looks like a client message, with any values in its fields."""
    fields = {
        name: draw(field_value)
        for name in ["protocol", "sample_rate", "format", "reply_id", "samples"]
        if draw(st.booleans())
    }
    fields.update(draw(st.dictionaries(st.text(max_size=6), json_value, max_size=3)))
    if draw(st.booleans()):
        fields["type"] = draw(st.sampled_from(["hello", "played", "error", ""]) | json_value)
    return json.dumps(fields)


def deep(opener: str, closer: str, depth: int) -> str:
    return opener * depth + closer * depth


raw_json_text = st.one_of(
    hostile_message(),
    json_value.map(json.dumps),
    st.integers(1, 4090).map(lambda n: "1" * n),  # huge literals, under the size limit
    st.integers(1, 4000).map(lambda n: '{"type": "played", "reply_id": 1' + "0" * n + "}"),
    st.sampled_from(["NaN", "-Infinity", "1e999", "-1e999", "1e-999", '"\\ud800"', "\ufeff{}"]),
    st.integers(1, 2000).map(lambda n: deep("[", "]", n)),
    st.integers(1, 1000).map(lambda n: deep('{"a":', "}", n)[:-n] + "1" + "}" * n),
    st.integers(1, 1000).map(lambda n: '{"type": "hello", "protocol": ' + deep("[", "]", n) + "}"),
    st.integers(1, 1000).map(lambda n: '{"type": "hello", "format": ' + deep("[", "]", n) + "}"),
    st.integers(1, 2000).map(lambda n: "[" * n),  # unterminated
)


def check_parse(raw: str | bytes) -> Hello | Played | None:
    try:
        return parse_text(raw)
    except ProtocolViolation as exc:
        assert exc.code == "unsupported_protocol" and exc.close_code == CLOSE_PROTOCOL_ERROR
        assert str(exc)
    except ProtocolError as exc:
        assert exc.code in KNOWN_CODES and str(exc)
    return None


@settings(max_examples=200, deadline=None)
@given(raw_json_text)
def test_hostile_json_is_decoded_or_refused_with_a_protocol_error(raw: str) -> None:
    check_parse(raw)


@FAST
@given(raw_json_text, st.sampled_from(["utf-8", "utf-16", "utf-32", "latin-1"]))
def test_hostile_json_bytes_in_any_encoding_are_decoded_or_refused(raw: str, enc: str) -> None:
    check_parse(raw.encode(enc, errors="replace"))


@pytest.mark.parametrize("depth", [10, 500, 990, 1000, 2000, MAX_TEXT_BYTES // 2])
def test_deeply_nested_json_is_a_bad_json_error(depth: int) -> None:
    """Nesting past Python's recursion limit used to escape as a RecursionError."""
    for raw in ("[" * depth, deep("[", "]", depth)):
        check_parse(raw)
    if depth >= 1000:
        with pytest.raises(ProtocolError) as caught:
            parse_text(deep("[", "]", depth))
        assert caught.value.code == "bad_json"


@FAST
@given(
    st.integers(MIN_RATE, MAX_RATE),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.dictionaries(st.text(max_size=6), json_value, max_size=3),
)
def test_valid_messages_parse_whatever_else_they_carry(
    rate: int, reply_id: int, samples: int, extra: dict[str, Any]
) -> None:
    hello = {**extra, "type": "hello", "protocol": 1, "sample_rate": rate, "format": "pcm16"}
    played = {**extra, "type": "played", "reply_id": reply_id, "samples": samples}
    assume(len(json.dumps(hello)) <= MAX_TEXT_BYTES and len(json.dumps(played)) <= MAX_TEXT_BYTES)
    assert parse_text(json.dumps(hello)) == Hello(rate)
    assert parse_text(json.dumps(played).encode()) == Played(reply_id, samples)


@FAST
@given(
    st.sampled_from(["sample_rate", "reply_id", "samples"]),
    st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=2**31),
        st.floats(allow_nan=True),
        st.booleans(),
        st.text(max_size=5),
        st.none(),
    ),
)
def test_out_of_range_or_mistyped_fields_are_refused(name: str, value: Any) -> None:
    kind = "hello" if name == "sample_rate" else "played"
    message = {"type": kind, "sample_rate": 16000, "reply_id": 1, "samples": 1, name: value}
    with pytest.raises(ProtocolError) as caught:
        parse_text(json.dumps(message))
    assert caught.value.code in ("bad_field", "unsupported_rate")


@FAST
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 2**32 - 1),
    hnp.arrays(np.float32, st.integers(0, 960), elements=st.floats(-1.5, 1.5, width=32)),
)
def test_downlink_frames_round_trip(reply_id: int, offset: int, audio: np.ndarray) -> None:
    got_id, got_offset, back = parse_downlink(downlink_frame(reply_id, offset, audio))
    assert (got_id, got_offset) == (reply_id, offset)
    assert back.dtype == np.float32 and back.shape == audio.shape
    expected = np.clip(audio, -1.0, 32767 / 32768)
    assert np.all(np.abs(back - expected) <= 0.5 / 32768 + 1e-9)


@FAST
@given(st.binary(max_size=4000))
def test_any_downlink_bytes_decode_exactly_or_are_a_bad_frame(raw: bytes) -> None:
    try:
        reply_id, offset, audio = parse_downlink(raw)
    except ProtocolError as exc:
        assert exc.code == "bad_frame"
        assert len(raw) < DOWNLINK_HEADER.size or len(raw) % 2
    else:
        assert downlink_frame(reply_id, offset, audio) == raw  # byte-exact


@FAST
@given(st.binary(max_size=4000), st.integers(MIN_RATE, MAX_RATE))
def test_uplink_audio_decodes_byte_exactly_or_is_refused(raw: bytes, rate: int) -> None:
    try:
        audio = parse_audio(raw, rate)
    except ProtocolError as exc:
        assert exc.code in ("odd_length", "frame_too_large")
        assert len(raw) % 2 or len(raw) // 2 > rate * MAX_FRAME_MS // 1000
    else:
        assert to_pcm16(audio) == raw
        assert np.all(np.isfinite(audio)) and np.all((audio >= -1.0) & (audio < 1.0))
