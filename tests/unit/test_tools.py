"""Tools from Python functions (voice.tools): the JSON schema from type hints, the
errors of a signature that cannot be a tool, the call grammar and the call parsing."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

from voice.tools import Toolbox, ToolError, make_tool
from voice.tools.choose import named_first, narrowed, said_numbers, settled
from voice.tools.grammar import call_grammar, parse_call
from voice.tools.intent import not_asking


def sell(item: Literal["sword", "axe"], quantity: int = 1) -> str:
    """Sell the player an item from the smithy."""
    return f"sold {quantity} {item}"


async def switch(on: bool, brightness: float = 0.5, room: str = "hall") -> None:
    """Switch the light."""


def test_schema_from_type_hints() -> None:
    tool = make_tool(sell)
    assert tool.name == "sell" and tool.description == "Sell the player an item from the smithy."
    assert tool.parameters() == {
        "type": "object",
        "properties": {
            "item": {"type": "string", "enum": ["sword", "axe"]},
            "quantity": {"type": "integer", "default": 1},
        },
        "required": ["item"],
        "additionalProperties": False,
    }
    light = make_tool(switch)
    assert light.is_async and not tool.is_async
    props = light.parameters()["properties"]
    assert [props[k]["type"] for k in ("on", "brightness", "room")] == [
        "boolean", "number", "string",
    ]  # fmt: skip
    assert light.openai()["function"]["name"] == "switch"


def no_hint(item) -> None:  # type: ignore[no-untyped-def]
    """Has no hints."""


def star_args(*items: str) -> None:
    """Takes *args."""


def listed(items: list[str]) -> None:
    """Takes a list."""


def undocumented(item: str) -> None:
    pass


def mixed(v: Literal["a", 1]) -> None:  # type: ignore[valid-type]
    """Mixed literal."""


def bad_default(n: int = "x") -> None:  # type: ignore[assignment]
    """A default of the wrong type."""


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (no_hint, "'item' has no type hint"),
        (star_args, "'items' is *args"),
        (listed, "'items' has the type list"),
        (undocumented, "has no docstring"),
        (mixed, "must list values of one type"),
        (bad_default, "its default 'x'"),
        (42, "is not a function"),
    ],
)
def test_a_bad_signature_is_refused_at_registration(fn: Any, words: str) -> None:
    with pytest.raises(ToolError) as caught:
        Toolbox([fn])
    assert words in str(caught.value)
    assert caught.value.code == "bad_tool"


def test_two_tools_of_one_name_are_refused() -> None:
    with pytest.raises(ToolError, match="two tools are named 'sell'"):
        Toolbox([sell, sell])


def test_arguments_are_checked_and_defaults_filled() -> None:
    tool = make_tool(sell)
    assert tool.check_arguments({"item": "axe"}) == {"item": "axe", "quantity": 1}
    for bad, words in [
        ({"item": "bow"}, "one of 'sword', 'axe'"),
        ({"item": "axe", "quantity": "2"}, "a JSON integer"),
        ({"item": "axe", "quantity": True}, "a JSON integer"),
        ({"quantity": 2}, "needs its argument 'item'"),
        ({"item": "axe", "price": 3}, "no parameter price"),
    ]:
        with pytest.raises(ToolError, match=words):
            tool.check_arguments(bad)


def test_grammar_lists_each_tool_and_its_closed_sets() -> None:
    grammar = call_grammar([make_tool(sell), make_tool(switch)])
    assert grammar.startswith("root ::= call-sell | call-switch\n")
    assert 'sell-item ::= "\\"sword\\"" | "\\"axe\\""' in grammar
    assert "sell-quantity ::= integer" in grammar
    assert "switch-on ::= boolean" in grammar and "string ::=" in grammar
    with pytest.raises(ToolError):
        call_grammar([])


def test_the_grammar_is_one_llama_cpp_accepts() -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    llama_cpp.LlamaGrammar.from_string(call_grammar([make_tool(sell), make_tool(switch)]))


def test_parse_call() -> None:
    tools = [make_tool(sell)]
    call = '{"name": "sell", "arguments": {"item": "sword", "quantity": 2}}'
    tool, args = parse_call(call, tools)
    assert tool.name == "sell" and args == {"item": "sword", "quantity": 2}
    # an OpenAI server's arguments come as a JSON string
    text = json.dumps({"name": "sell", "arguments": json.dumps({"item": "axe"})})
    assert parse_call(text, tools)[1] == {"item": "axe", "quantity": 1}
    for bad, words in [
        ("sell sword", "not JSON"),
        ('{"arguments": {}}', "names no tool"),
        ('{"name": "steal", "arguments": {}}', "'steal', which is not a tool"),
        ('{"name": "sell", "arguments": [1]}', "not an object"),
    ]:
        with pytest.raises(ToolError, match=words):
            parse_call(bad, tools)


def test_the_words_narrow_closed_sets_and_counts() -> None:
    assert said_numbers("I'll buy two swords") == [2]
    assert said_numbers("give me 3 of them") == [3]
    tool = narrowed(make_tool(sell), "I'll buy two swords")
    assert [p.choices for p in tool.params] == [("sword",), (2,)]
    # nothing named: the closed set stays whole, the count takes its default
    tool = narrowed(make_tool(sell), "what do you sell")
    assert [p.choices for p in tool.params] == [("sword", "axe"), (1,)]


def give(item: Literal["potion", "apple"]) -> str:
    """Give the player a potion or an apple."""
    return f"given {item}"


def repair(item: Literal["sword", "axe"]) -> str:
    """Repair the player's weapon."""
    return f"repaired {item}"


def test_words_that_settle_every_argument_need_no_model() -> None:
    tool = narrowed(make_tool(sell), "two axes please")
    assert all(settled(p) for p in tool.params)
    tool = narrowed(make_tool(sell), "what do you sell")  # which item: the model decides
    assert not all(settled(p) for p in tool.params)
    # the sentence that asks says no item: the turn around it does
    tool = narrowed(make_tool(repair), "Can you fix it?", "My sword is blunt. Can you fix it?")
    assert tool.params[0].choices == ("sword",)
    # a singular names a plural value, a plural a singular one
    assert narrowed(make_tool(give), "an apple").params[0].choices == ("apple",)


def test_the_tool_whose_values_or_name_the_words_say_is_preferred() -> None:
    tools = [narrowed(make_tool(f), "could I have an apple") for f in (sell, give)]
    assert [t.name for t in named_first(tools, "could I have an apple")] == ["give"]
    tools = [narrowed(make_tool(f), "sell me a sword") for f in (repair, sell)]
    assert [t.name for t in named_first(tools, "sell me a sword")] == ["sell"]
    tools = [narrowed(make_tool(f), "my sword is blunt") for f in (repair, sell)]
    assert [t.name for t in named_first(tools, "my sword is blunt")] == ["repair", "sell"]


@pytest.mark.parametrize(
    "words",
    ["no thanks, I don't need any potions", "I already have a sword", "who made this axe",
     "the cafe was really lovely", "is an axe better than a sword", "thanks for fixing it"],
)  # fmt: skip
def test_talk_about_a_tools_things_is_not_a_request(words: str) -> None:
    assert not_asking(words)


@pytest.mark.parametrize(
    "words", ["I'll buy two swords", "could I have a potion please", "where is the cafe",
              "what's on this weekend", "fix my sword please"],
)  # fmt: skip
def test_requests_are_not_taken_for_talk(words: str) -> None:
    assert not not_asking(words)


def test_the_transcript_records_calls_and_results(tmp_path: Any) -> None:
    from voice.conversation.transcript import TranscriptWriter, read_transcript
    from voice.events import ToolCall, ToolResult

    writer = TranscriptWriter(tmp_path, "s1")
    writer.observe(
        ToolCall(audio_ms=1.0, reply_id=1, call_id=1, name="sell", arguments={"item": "axe"},
                 choose_ms=5.0)
    )  # fmt: skip
    writer.observe(
        ToolResult(audio_ms=2.0, reply_id=1, call_id=1, name="sell", status="ok", result="Sold.",
                   run_ms=1.0)
    )  # fmt: skip
    writer.close()
    records = [
        {k: v for k, v in r.items() if k != "t"}
        for r in read_transcript(writer.path)
        if r["type"].startswith("tool")
    ]
    assert records == [
        {"type": "tool_call", "name": "sell", "arguments": {"item": "axe"}},
        {"type": "tool_result", "name": "sell", "status": "ok", "result": "Sold."},
    ]


class _TopicEmbedder:
    """Swords, greetings and anything else on three axes: enough for the focus logic."""

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        rows = []
        for text in texts:
            low = text.lower()
            things = sum(low.count(w) for w in ("sword", "buy", "sell"))
            row = np.array([things, low.count("hello"), 0.1], np.float32)
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


def test_a_greeting_before_a_request_does_not_hide_it() -> None:
    from voice.tools.choose import Chooser

    chooser = Chooser([make_tool(sell)], _TopicEmbedder())
    said = "Hello there. Hello, hello. I'll buy two swords."
    assert not chooser.shortlist(said).candidates  # as a whole: more greeting than request
    text, short = chooser.focus(said)
    assert text == "I'll buy two swords." and [t.name for t in short.candidates] == ["sell"]
    assert not chooser.focus("Hello there. Hello.")[1].candidates
