"""Tests for voice.speak.speakable: making reply text fit for TTS."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voice.speak.speakable import to_speakable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Title", "Title."),
        ("### A smaller header ###", "A smaller header."),
        ("Some **bold** and __strong__ words.", "Some bold and strong words."),
        ("Some *italic* and _emphasised_ words.", "Some italic and emphasised words."),
        ("***Both*** at once.", "Both at once."),
        ("~~Old~~ new plan.", "Old new plan."),
        ("Run `pip install x` now.", "Run pip install x now."),
        ("> Quoted wisdom here.", "Quoted wisdom here."),
    ],
)
def test_markdown_formatting_is_removed(text: str, expected: str) -> None:
    assert to_speakable(text) == expected


def test_snake_case_is_kept_and_multiplication_is_spoken() -> None:
    assert to_speakable("Set my_var_name to 2 * 3 or 2×3.") == (
        "Set my_var_name to 2 times 3 or 2 times 3."
    )


def test_fenced_code_blocks_are_dropped() -> None:
    text = "Try this:\n```python\nprint('**hi**')  # 🎉\n```\nThat prints hi."
    assert to_speakable(text) == "Try this: That prints hi."
    assert to_speakable("Before. ```inline fence``` after.") == "Before. after."
    assert to_speakable("Unclosed:\n```\ncode to the end") == "Unclosed:"
    assert to_speakable("Four ````\nx = 1\n```` backticks.") == "Four backticks."


def test_list_items_become_sentences() -> None:
    text = "Options:\n- red\n* green\n+ blue!\n• three"
    assert to_speakable(text) == "Options: red. green. blue! three."


def test_numbered_items_keep_their_numbers() -> None:
    assert to_speakable("1. Preheat the oven\n2) Bake it") == "1. Preheat the oven. 2. Bake it."


def test_nested_and_combined_line_markers() -> None:
    assert to_speakable("  - nested item\n    - deeper item") == "nested item. deeper item."
    assert to_speakable("## 1. Introduction") == "1. Introduction."
    assert to_speakable("> - quoted item") == "quoted item."
    assert to_speakable("- **Bold item**") == "Bold item."


def test_clause_chunks_keep_their_final_mark() -> None:
    # The chunker's first chunk may end at a clause boundary; its pause must stay a pause.
    assert to_speakable("Sure, here is what you asked for, ") == "Sure, here is what you asked for,"
    assert to_speakable("That was a long day - ") == "That was a long day -"
    assert to_speakable("Here it is: ") == "Here it is:"


def test_plain_lines_get_a_pause_between_them() -> None:
    assert (
        to_speakable("Ingredients\nflour, sugar and eggs") == "Ingredients. flour, sugar and eggs."
    )
    assert to_speakable("One line.\n\nAnother line?") == "One line. Another line?"


def test_numbers_and_dashes_that_are_not_markers_are_kept() -> None:
    assert to_speakable("-5 degrees outside.") == "-5 degrees outside."
    assert to_speakable("2024 was a good year.") == "2024 was a good year."


def test_horizontal_rules_and_tables() -> None:
    assert to_speakable("Above.\n---\n***\nBelow.") == "Above. Below."
    table = "| Name | Age |\n|------|:---:|\n| Ann | 30 |\n| Bob | 41 |"
    assert to_speakable(table) == "Name, Age. Ann, 30. Bob, 41."


def test_links_keep_their_text_and_images_are_dropped() -> None:
    assert to_speakable("See [the docs](https://docs.example.com/a?b=1).") == "See the docs."
    assert to_speakable("Look ![a cat](cat.png) here.") == "Look here."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Go to https://www.example.com/path?a=1 now.", "Go to example dot com now."),
        ("Go to http://example.com.", "Go to example dot com."),
        (
            "Open https://user@host.example.org:8080/x, please.",
            "Open host dot example dot org, please.",
        ),
        ("Visit www.python.org today.", "Visit python dot org today."),
        ("Visit example.com/path?a=1 today.", "Visit example dot com today."),
        ("Mail a.b@c.org today.", "Mail a dot b at c dot org today."),
    ],
)
def test_urls_and_emails_are_spoken_as_domains(text: str, expected: str) -> None:
    assert to_speakable(text) == expected


def test_abbreviations_numbers_and_versions_are_not_taken_for_domains() -> None:
    text = "Dr. Smith, e.g. in the U.S., at 3.14 with v1.2.3 and 10:30 a.m."
    assert to_speakable(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Great job 🎉!", "Great job!"),
        ("Thumbs 👍🏽 up.", "Thumbs up."),
        ("Love ❤️ it.", "Love it."),
        ("Family 👨‍👩‍👧 time.", "Family time."),
        ("Flag 🇺🇸 here.", "Flag here."),
        ("Stars ★★★ and ✅ done.", "Stars and done."),
        ("It is 25°C outside.", "It is 25°C outside."),
    ],
)
def test_emoji_and_pictographs_are_removed(text: str, expected: str) -> None:
    assert to_speakable(text) == expected


def test_symbols_are_spoken() -> None:
    assert to_speakable("R&D and salt & pepper.") == "R and D and salt and pepper."
    assert to_speakable("Up 50% then 3.5 % more.") == "Up 50 percent then 3.5 percent more."
    assert to_speakable("Get 50%off now.") == "Get 50 percent off now."
    assert to_speakable("Ping @alice about it.") == "Ping at alice about it."


def test_whitespace_collapses_to_one_line() -> None:
    assert to_speakable("  Hello \t there.\r\n\n  How   are you?  ") == "Hello there. How are you?"
    assert to_speakable("") == ""
    assert to_speakable(" \n\t ") == ""
    assert to_speakable("🎉🎉") == ""


# -- properties --------------------------------------------------------------------------


def is_pictographic(ch: str) -> bool:
    cp = ord(ch)
    if 0x1F000 <= cp <= 0x1FAFF or cp in (0x200D, 0xFE0F, 0x20E3):
        return True
    return unicodedata.category(ch) == "So" and ch != "°"


_MARKDOWN = [
    "#", "## ", "- ", "* ", "1. ", "> ", "**", "*", "_", "__", "`", "```", "~~", "|", "---",
    "[", "]", "(", ")", "![", "](", "http://", "https://x.io/a?b=1", "www.", "example.com",
    "a.b@c.org", "&", "%", "50", ".", ",", "!", "?", " ", "\n", "\t", "word", "A", "x_y",
    "🎉", "👍🏽", "❤️", "°", "e.g.", "3.14",
]  # fmt: skip

markdownish = st.one_of(
    st.lists(st.sampled_from(_MARKDOWN), max_size=40).map("".join),
    st.text(max_size=200),
)


@settings(max_examples=400, deadline=None)
@given(markdownish)
def test_output_is_a_clean_single_line_without_emoji(text: str) -> None:
    out = to_speakable(text)
    assert not any(is_pictographic(ch) for ch in out)
    assert "\n" not in out
    assert "`" not in out
    assert "**" not in out
    assert out == out.strip()
    assert "  " not in out


@settings(max_examples=400, deadline=None)
@given(markdownish)
def test_to_speakable_is_idempotent(text: str) -> None:
    once = to_speakable(text)
    assert to_speakable(once) == once


@pytest.mark.parametrize(
    "text",
    # Inputs where one cleaning step used to expose markup for another.
    ["#- * .", "|## #", "## ,#", "[](\n)", "a.b@c.orga.b@c.org", "_http://", "50%50http://",
     "0\nx", "**- x**", "1) - item", "`# not a header`", "## ---"],
)  # fmt: skip
def test_idempotent_on_former_counterexamples(text: str) -> None:
    once = to_speakable(text)
    assert to_speakable(once) == once


def test_stage_directions_are_dropped_across_deltas() -> None:
    from voice.speak.directions import StageDirections

    directions = StageDirections()
    deltas = ["(smil", "ing warmly) Oh", ", *laughs* I am", " **very** glad [sighs]."]
    assert "".join(directions.push(d) for d in deltas) == " Oh,  I am very glad ."


@pytest.mark.parametrize(
    ("deltas", "expected"),
    [
        # An unclosed mark is text, given back at the end of the line or the reply.
        (["Tickets cost 2 * 5 euros (children", " free. The exit is on the left."],
         "Tickets cost 2 * 5 euros (children free. The exit is on the left."),
        (["* Apples\n* Pe", "ars\n* Plums"], "* Apples\n* Pears\n* Plums"),
        (["A 5* hotel."], "A 5* hotel."),
        (["(this aside goes on and on, far longer than any gesture a model would write"
          " down) and ends"],
         "(this aside goes on and on, far longer than any gesture a model would write"
         " down) and ends"),
        (["Bring [a", " torch\nand rope]."], "Bring [a torch\nand rope]."),
        # Short closed ones are still gestures.
        (["Well *shrugs* fine (smiles)."], "Well  fine ."),
    ],
)  # fmt: skip
def test_what_only_looks_like_a_direction_is_given_back(deltas: list[str], expected: str) -> None:
    from voice.speak.directions import StageDirections

    directions = StageDirections()
    text = "".join(directions.push(d) for d in deltas) + directions.flush()
    assert text == expected
