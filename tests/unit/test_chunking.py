"""Tests for voice.speak.chunking: sentence chunking of a streamed LLM reply."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice.speak.chunking import SentenceChunker


def chunk_text(text: str, **settings_: int) -> list[str]:
    """Chunks for ``text`` pushed as one delta."""
    chunker = SentenceChunker(**settings_)
    return chunker.push(text) + chunker.flush()


def chunk_deltas(deltas: list[str], **settings_: int) -> list[str]:
    chunker = SentenceChunker(**settings_)
    chunks: list[str] = []
    for delta in deltas:
        chunks += chunker.push(delta)
    return chunks + chunker.flush()


def spoken(text: str, **settings_: int) -> list[str]:
    """Chunks stripped of surrounding whitespace, streamed one character at a time."""
    return [chunk.strip() for chunk in chunk_deltas(list(text), **settings_)]


# -- sentence ends ---------------------------------------------------------------------


def test_splits_at_sentence_ends_keeping_whitespace_on_the_left_chunk() -> None:
    assert chunk_text("Hello there. What is up? I am fine!") == [
        "Hello there. ",
        "What is up? ",
        "I am fine!",
    ]


def test_punctuation_combos_and_paragraph_breaks() -> None:
    assert spoken("Really?! I had no idea!!! Wow, great...\n\nNext paragraph here") == [
        "Really?!",
        "I had no idea!!!",
        "Wow, great...",
        "Next paragraph here",
    ]
    assert chunk_text("First line here\nSecond line here") == [
        "First line here\n",
        "Second line here",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Dr. Smith met Mr. Jones and Mrs. Lee and Ms. Park today.",
        "Prof. Adams lives on Baker St. Paris is far away from there.",
        "It was cats vs. dogs, e.g. Rex and Tom, i.e. the usual pair.",
        "She moved to the U.S. Army base and then to the U.K. Office later.",
        "Born on Jan. 5 and married on Sept. 9 and Dec. 12 in that year.",
        "The book by J. K. Rowling was a big success everywhere.",
        "See item No. 5 in the list for more details about it.",
        "We meet at 10 a.m. tomorrow and leave at 4 p.m. sharp.",
    ],
)
def test_no_split_after_abbreviations_and_initials(text: str) -> None:
    assert chunk_text(text, first_chunk_min_chars=1000) == [text]
    assert chunk_text("A first sentence here. " + text) == ["A first sentence here. ", text]


@pytest.mark.parametrize(
    "text",
    [
        "Pi is about 3.14 and e is about 2.718 in value.",
        "The meeting is at 10:30 and ends at 11:45 today.",
        "Version v1.2.3 fixed it and v2.0.1 broke it again.",
        "About 1,000,000 people came, then 2,500 more arrived there.",
        "Visit example.com/path?a=1&b=2 or www.x.org/y.html today.",
        "Write to a.b@c.org or to first.last@mail.example.co.uk please.",
        "I waited... what was that noise outside the house?",
        "I thought… maybe it was nothing at all, honestly.",
    ],
)
def test_no_split_inside_numbers_urls_or_before_lowercase(text: str) -> None:
    assert chunk_text(text, first_chunk_min_chars=1000) == [text]


def test_ellipsis_before_uppercase_may_end_a_sentence() -> None:
    assert spoken("I wonder about it... Then it hit me.") == [
        "I wonder about it...",
        "Then it hit me.",
    ]


def test_sentence_final_abbreviations_end_before_an_uppercase_word() -> None:
    assert spoken(
        "We bought apples, pears, etc. Then we went home.", first_chunk_min_chars=999
    ) == [
        "We bought apples, pears, etc.",
        "Then we went home.",
    ]
    assert spoken("Call me at 9 p.m. Tomorrow works too.") == [
        "Call me at 9 p.m.",
        "Tomorrow works too.",
    ]


def test_no_as_a_word_still_ends_a_sentence() -> None:
    assert spoken("Can I go there? No. You have to stay home.") == [
        "Can I go there?",
        "No. You have to stay home.",
    ]


def test_plain_words_and_numbers_before_a_period_do_end_a_sentence() -> None:
    assert spoken("The answer is 42. The question is unknown.") == [
        "The answer is 42.",
        "The question is unknown.",
    ]
    assert spoken("Go to example.com. It has the details.") == [
        "Go to example.com.",
        "It has the details.",
    ]
    assert spoken("Pi is roughly 3.14. That is enough here.") == [
        "Pi is roughly 3.14.",
        "That is enough here.",
    ]


def test_closing_quotes_and_brackets_stay_with_their_sentence() -> None:
    assert chunk_text('He said "Hi." Then left.') == ['He said "Hi." ', "Then left."]
    assert spoken("It is done (mostly.) Next one now.") == ["It is done (mostly.)", "Next one now."]
    assert spoken("This is **very important.** Remember it.") == [
        "This is **very important.**",
        "Remember it.",
    ]
    assert spoken("She asked ‘why?’ Nobody knew.") == ["She asked ‘why?’", "Nobody knew."]


def test_question_in_quotes_followed_by_lowercase_continues() -> None:
    text = 'He asked "Why?" and then he left the room.'
    assert chunk_text(text) == [text]


def test_numbered_list_marker_at_line_start_is_not_a_sentence_end() -> None:
    text = "Steps:\n1. Preheat the oven.\n2. Bake it.\n"
    assert spoken(text, min_chars=0) == ["Steps:", "1. Preheat the oven.", "2. Bake it."]


def test_a_number_mid_line_does_end_a_sentence() -> None:
    assert spoken("Count with me now. 2. Then three.", min_chars=0) == [
        "Count with me now.",
        "2.",
        "Then three.",
    ]


# -- first chunk, clause boundaries ------------------------------------------------------


def test_first_chunk_may_end_at_a_clause_boundary_once_long_enough() -> None:
    text = "Well, I think the answer to that question is, basically, yes, it is."
    assert spoken(text) == [
        "Well, I think the answer to that question is,",
        "basically, yes, it is.",
    ]


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("Here is the thing you asked about; it is simple.", "Here is the thing you asked about;"),
        (
            "There are three options to consider: red, green.",
            "There are three options to consider:",
        ),
        ("That was a long and hard day - but a good one.", "That was a long and hard day -"),
        ("That was a long and hard day — but a good one.", "That was a long and hard day —"),
    ],
)
def test_first_chunk_clause_marks(text: str, first: str) -> None:
    assert spoken(text)[0] == first


def test_clause_boundaries_need_first_chunk_min_chars() -> None:
    assert spoken("Well, yes. Sure thing, my friend, it works.") == [
        "Well, yes.",
        "Sure thing, my friend, it works.",
    ]
    assert spoken("Okay, so, well, fine then.", first_chunk_min_chars=5) == [
        "Okay,",
        "so, well, fine then.",
    ]


def test_no_clause_split_inside_numbers_or_after_eg() -> None:
    assert spoken("Roughly 1,000,000,000 dollars: that is the cost.") == [
        "Roughly 1,000,000,000 dollars:",
        "that is the cost.",
    ]
    text = "Bring fruit e.g., apples and pears; or i.e., nothing."
    assert spoken(text, first_chunk_min_chars=10) == [
        "Bring fruit e.g., apples and pears;",
        "or i.e., nothing.",
    ]


def test_bullet_dash_at_line_start_is_not_a_clause_boundary() -> None:
    assert spoken("- an item of the list that is long\n- another", min_chars=0) == [
        "- an item of the list that is long",
        "- another",
    ]


def test_only_the_first_chunk_ends_at_clauses() -> None:
    text = "This is the first sentence. Later on, after a while, we continue here."
    assert spoken(text) == [
        "This is the first sentence.",
        "Later on, after a while, we continue here.",
    ]


# -- min_chars, max_chars ----------------------------------------------------------------


def test_short_chunks_are_merged_with_the_next() -> None:
    assert spoken("Hi. Ok. Yes, this is long enough. No.") == [
        "Hi. Ok. Yes, this is long enough.",
        "No.",
    ]
    assert spoken("Hi. Ok.", min_chars=0) == ["Hi.", "Ok."]


def test_long_run_splits_at_last_whitespace_before_max_chars() -> None:
    text = " ".join(["word"] * 30)  # 149 characters, no boundary
    chunks = chunk_text(text, max_chars=50)
    assert "".join(chunks) == text
    assert [len(c.strip()) for c in chunks[:-1]] == [49, 49]
    assert all(c.endswith("word ") for c in chunks[:-1])


def test_long_run_prefers_a_late_clause_boundary() -> None:
    text = "aaaa bbbb cccc dddd eeee ffff, gggg hhhh iiii jjjj kkkk llll mmmm"
    assert chunk_text(text, max_chars=40, first_chunk_min_chars=999) == [
        "aaaa bbbb cccc dddd eeee ffff, ",
        "gggg hhhh iiii jjjj kkkk llll mmmm",
    ]


def test_long_run_without_whitespace_is_cut_hard() -> None:
    text = "x" * 120
    assert chunk_text(text, max_chars=50) == ["x" * 50, "x" * 50, "x" * 20]


def test_abbreviation_just_before_max_chars_is_held_until_the_next_character() -> None:
    chunker = SentenceChunker(max_chars=30)
    assert chunker.push("aaaa bbbb cccc dddd eeee Dr.") == []
    assert chunker.push(" ") == []
    assert chunker.push("S") == []  # not a sentence end; still within max_chars
    assert chunker.push("mith and more text") == ["aaaa bbbb cccc dddd eeee Dr. "]


# -- code fences -------------------------------------------------------------------------


def test_code_fences_form_their_own_chunk_and_are_never_split() -> None:
    code = "```python\nx = 1. Then\nprint(x)\n\nmore. Code\n```\n"
    text = "Here:\n" + code + "That was it. Done now."
    assert chunk_text(text) == ["Here:\n", code, "That was it. ", "Done now."]


def test_code_fence_is_exempt_from_max_chars() -> None:
    code = "```\n" + "y = 2\n" * 40 + "```\n"
    assert chunk_text(code + "After it.", max_chars=20) == [code, "After it."]


def test_unclosed_fence_is_held_until_flush() -> None:
    chunker = SentenceChunker()
    assert chunker.push("Look:\n```\nsome code. More code.\n") == ["Look:\n"]
    assert chunker.flush() == ["```\nsome code. More code.\n"]


def test_backticks_mid_line_are_not_a_fence() -> None:
    assert spoken("Say this now. ```not a fence``` and more. The end.") == [
        "Say this now.",
        "```not a fence``` and more.",
        "The end.",
    ]


def test_fence_end_waits_for_the_whitespace_and_backticks_that_follow() -> None:
    chunker = SentenceChunker()
    assert chunker.push("```\nx = 1\n```") == []
    assert chunker.push("`") == []  # the closing run may be longer than three
    assert chunker.push("\n") == []
    assert chunker.push("Next one.") == ["```\nx = 1\n````\n"]
    assert chunker.flush() == ["Next one."]


def test_a_possible_fence_at_a_line_start_is_held_even_past_max_chars() -> None:
    chunker = SentenceChunker(max_chars=2)
    assert chunker.push("``") == []  # could be "```" (never split) or "``x" (cut at 2)
    assert chunker.push("`\nlong code line\n```\n") == []
    assert chunker.push("ok") == ["```\nlong code line\n```\n"]
    chunker = SentenceChunker(max_chars=2)
    assert chunker.push("``") == []
    assert chunker.push("xy") == ["``"]


def test_first_chunk_rule_still_applies_after_a_leading_code_block() -> None:
    text = "```\ncode\n```\nWell, here is a long enough clause, and more."
    assert spoken(text)[:2] == ["```\ncode\n```", "Well, here is a long enough clause,"]


# -- streaming behaviour -----------------------------------------------------------------


def test_emits_as_soon_as_the_next_non_space_character_arrives() -> None:
    chunker = SentenceChunker()
    assert chunker.push("Hello there") == []
    assert chunker.push(".") == []
    assert chunker.push(" ") == []
    assert chunker.push("W") == ["Hello there. "]
    assert chunker.push("orld") == []
    assert chunker.flush() == ["World"]


def test_holds_back_an_abbreviation_until_it_can_decide() -> None:
    chunker = SentenceChunker()
    assert chunker.push("I went to see Dr") == []
    assert chunker.push(".") == []
    assert chunker.push(" ") == []
    assert chunker.push("Smith today. And") == ["I went to see Dr. Smith today. "]
    assert chunker.flush() == ["And"]


def test_flush_emits_the_tail_and_resets() -> None:
    chunker = SentenceChunker()
    assert chunker.push("Well, this is the first reply. Tail") == [
        "Well, this is the first reply. "
    ]
    assert chunker.flush() == ["Tail"]
    assert chunker.flush() == []
    # A new stream: the first-chunk clause rule applies again.
    assert chunker.push("Okay, here is a second reply, with clauses") == [
        "Okay, here is a second reply, "
    ]


def test_empty_and_whitespace_only_streams() -> None:
    assert chunk_text("") == []
    assert chunk_text("  \n ") == ["  \n "]


def test_rejects_invalid_settings() -> None:
    with pytest.raises(ValueError):
        SentenceChunker(max_chars=0)
    with pytest.raises(ValueError):
        SentenceChunker(min_chars=-1)


# -- properties --------------------------------------------------------------------------

_PIECES = [
    "Dr.", "Mr.", "e.g.", "U.S.", "etc.", "No.", "J.", "a.m.", "Jan.", "1.", "3.14", "10:30",
    "1,000", "v1.2.3", "example.com/a?b=1", "a.b@c.org", "...", "…", ".", "!", "?", "?!",
    ",", ";", ":", " - ", " — ", "-", '"', "'", "”", ")", "(", "**", "`", "```", "``",
    " ", "  ", "\n", "\n\n", "\t", "Hello", "world", "Then", "it", "x", "A", "b", "42",
]  # fmt: skip

_MARKDOWN_PIECES = ["```", "`", "\n", " ", "\n\n", "x", "Hi.", "- ", "1. ", "#", "Ok,", "A"]

tricky_text = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=60).map("".join),
    st.lists(st.sampled_from(_MARKDOWN_PIECES), max_size=30).map("".join),
    st.text(alphabet=st.sampled_from(list("aZ .!?…,;:-—\"')`\n1@/")), max_size=200),
    st.text(max_size=100),
)
chunker_settings = st.fixed_dictionaries(
    {
        "first_chunk_min_chars": st.integers(0, 30),
        "min_chars": st.integers(0, 12),
        "first_chunk_max_chars": st.sampled_from([0, 10, 25, 40]),
        "max_chars": st.integers(1, 60),
    }
)


@st.composite
def text_and_deltas(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(tricky_text)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=20)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(text_and_deltas(), chunker_settings)
def test_chunks_concatenate_to_the_input(
    case: tuple[str, list[str]], settings_: dict[str, int]
) -> None:
    text, deltas = case
    chunks = chunk_deltas(deltas, **settings_)
    assert "".join(chunks) == text
    assert all(chunks)


@settings(max_examples=300, deadline=None)
@given(text_and_deltas(), chunker_settings)
def test_chunks_do_not_depend_on_how_the_stream_is_split(
    case: tuple[str, list[str]], settings_: dict[str, int]
) -> None:
    text, deltas = case
    whole = chunk_text(text, **settings_)
    assert chunk_deltas(deltas, **settings_) == whole
    assert chunk_deltas(list(text), **settings_) == whole


@settings(max_examples=200, deadline=None)
@given(tricky_text.filter(lambda t: "`" not in t), chunker_settings)
def test_chunks_respect_max_chars_outside_code(text: str, settings_: dict[str, int]) -> None:
    for chunk in chunk_text(text, **settings_):
        assert len(chunk.strip()) <= settings_["max_chars"]


@settings(max_examples=200, deadline=None)
@given(tricky_text)
def test_every_chunk_but_the_first_starts_with_a_non_space(text: str) -> None:
    chunks = chunk_text(text)
    assert all(not chunk[0].isspace() for chunk in chunks[1:])


def test_first_chunk_max_chars_cuts_early_before_a_joining_word() -> None:
    chunker = SentenceChunker(first_chunk_max_chars=40)
    text = "Paris has been the capital of France for a very long time and it is lovely. Yes."
    chunks = [c for ch in text for c in chunker.push(ch)] + chunker.flush()
    assert "".join(chunks) == text
    assert len(chunks[0]) <= 40
    assert chunks[0] == "Paris has been the capital of France "  # before "for", not mid-phrase
    assert chunks[1].startswith("for a very long time and it is lovely.")
