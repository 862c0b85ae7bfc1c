"""Tools a browser page declares as JSON (voice.tools.declared): the Tool they become,
the declarations refused and why; the page's answers (protocol's tool_result and
voice.serve.pagetools): settled, late, unknown, malformed."""

from __future__ import annotations

import json
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from voice.conversation import toolcalls
from voice.serve.pagetools import PageToolFailed, PageTools
from voice.serve.protocol import (
    MAX_TEXT_BYTES,
    Hello,
    ProtocolError,
    ToolAnswer,
    parse_text,
)
from voice.tools import ToolError
from voice.tools.choose import Call
from voice.tools.declared import MAX_TOOLS, declared_tool, declared_tools
from voice.tools.grammar import call_grammar, parse_call

LIGHT: dict[str, Any] = {
    "name": "switch_light",
    "description": "Switch the light in the room on or off.",
    "parameters": {
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": ["on", "off"], "description": "on or off"},
            "room": {"type": "string", "enum": ["kitchen", "hall"], "default": "hall"},
            "brightness": {"type": "number"},
            "blink": {"type": "boolean"},
            "times": {"type": "integer", "enum": [1, 2, 3]},
        },
        "required": ["state", "times"],
    },
    "examples": ["turn the light on", "lights off please"],
}

SENT: list[tuple[str, int, dict[str, Any]]] = []


def dispatch(name: str, call_id: int, arguments: dict[str, Any]) -> Future[Any]:
    SENT.append((name, call_id, arguments))
    future: Future[Any] = Future()
    future.set_result(f"{name} done")
    return future


def test_a_declaration_becomes_a_tool_like_a_python_one() -> None:
    tool = declared_tool(LIGHT, dispatch)
    assert tool.name == "switch_light" and tool.examples == (
        "turn the light on",
        "lights off please",
    )
    assert tool.parameters() == {
        "type": "object",
        "properties": {
            "state": {"type": "string", "enum": ["on", "off"]},
            "room": {"type": "string", "enum": ["kitchen", "hall"], "default": "hall"},
            "brightness": {"type": "number", "default": None},
            "blink": {"type": "boolean", "default": None},
            "times": {"type": "integer", "enum": [1, 2, 3]},
        },
        "required": ["state", "times"],
        "additionalProperties": False,
    }
    assert tool.check_arguments({"state": "on", "times": 2}) == {
        "state": "on", "room": "hall", "brightness": None, "blink": None, "times": 2,
    }  # fmt: skip
    with pytest.raises(ToolError, match="expected one of 'on', 'off'"):
        tool.check_arguments({"state": "dim", "times": 1})
    # Its calls are made under the same grammar and parsed the same way.
    grammar = call_grammar([tool])
    assert '"\\"kitchen\\""' in grammar and "call-switch-light" in grammar
    raw = json.dumps(
        {"name": "switch_light", "arguments": {"state": "off", "room": "kitchen", "times": 1}}
    )
    assert parse_call(raw, [tool])[1]["room"] == "kitchen"
    # The OpenAI form is the same tool; no parameters is a tool that takes none.
    wrapped = declared_tool({"type": "function", "function": LIGHT}, dispatch)
    assert wrapped.parameters() == tool.parameters()
    bare = declared_tool({"name": "ring", "description": "Ring the bell."}, dispatch)
    assert bare.params == () and bare.time_limit_s is None


def test_its_run_goes_through_the_dispatch_with_the_call_id() -> None:
    tool = declared_tool({**LIGHT, "time_limit_ms": 1500}, dispatch)
    assert tool.time_limit_s == 1.5
    run = toolcalls.start(Call(tool, {"state": "on", "times": 1}, 0.9), call_id=7)
    assert SENT[-1] == ("switch_light", 7, {"state": "on", "times": 1})
    assert run.future.result() == "switch_light done"
    # Its own limit holds when it is under the server's, never over it.
    assert toolcalls.time_limit_s(run.call, 5.0) == 1.5
    assert toolcalls.time_limit_s(run.call, 1.0) == 1.0


def _with(**changes: Any) -> dict[str, Any]:
    return {**LIGHT, **changes}


def _params(**props: Any) -> dict[str, Any]:
    return _with(parameters={"type": "object", "properties": props})


@pytest.mark.parametrize(
    ("declaration", "says"),
    [
        ("switch_light", "must be a JSON object"),
        (_with(name="switch light"), "letters, digits and underscores"),
        (_with(name=7), "letters, digits and underscores"),
        (_with(description=""), "tool switch_light: 'description' must be a non-empty string"),
        (_with(description="x" * 500), "keep it under 400"),
        (_with(parameters={"type": "array"}), "must be a JSON schema of type 'object'"),
        (_params(level={"type": "array"}), "parameter 'level' has the type 'array'"),
        (_params(level={"type": "object"}), "which a tool cannot take"),
        (_params(level="string"), "must be a JSON schema object"),
        (_params(**{"my level": {"type": "string"}}), "letters, digits and underscores"),
        (_params(level={"type": "string", "enum": []}), "'enum' must list 1 to 32 values"),
        (_params(level={"type": "string", "enum": ["a", 1]}), "value 1 is not of its type, string"),
        (_params(level={"type": "integer", "enum": [True]}), "True is not of its type, integer"),
        (_params(level={"type": "string", "enum": ["a", "a"]}), "'a' is listed twice"),
        (_params(level={"type": "integer", "default": "high"}), "default 'high' does not fit"),
        (_params(Level={"type": "string"}, level={"type": "string"}), "differ only in case"),
        (
            _with(parameters={"type": "object", "properties": {}, "required": ["state"]}),
            "'required' names state, not in 'properties'",
        ),
        (_with(examples="turn it on"), "'examples' must be a list"),
        (_with(examples=["ok", 3]), "each example must be a non-empty string"),
        (_with(time_limit_ms=0), "'time_limit_ms' must be a positive number"),
        (_with(time_limit_ms="soon"), "'time_limit_ms' must be a positive number"),
    ],
)
def test_a_bad_declaration_is_refused_naming_the_tool_and_the_fault(
    declaration: Any, says: str
) -> None:
    with pytest.raises(ToolError) as caught:
        declared_tool(declaration, dispatch)
    assert says in str(caught.value), str(caught.value)
    assert caught.value.code == "bad_tool"
    if isinstance(declaration, dict) and declaration.get("name") == "switch_light":
        assert "tool switch_light" in str(caught.value)  # named, so the page finds it


def test_one_bad_declaration_costs_only_itself() -> None:
    tools, errors = declared_tools(
        [
            LIGHT,
            _with(name="dim", description=""),
            _with(name="SWITCH_LIGHT"),  # grammar rules are lower-case: a clash
            _with(name="sell"),  # the session has a tool of that name already
            {"name": "ring", "description": "Ring the bell."},
        ],
        dispatch,
        taken=["sell"],
    )
    assert [t.name for t in tools] == ["switch_light", "ring"]
    messages = [str(e) for e in errors]
    assert len(messages) == 3
    assert "tool dim:" in messages[0]
    assert "tool SWITCH_LIGHT: a tool of that name is already there" in messages[1]
    assert "tool sell:" in messages[2]
    assert declared_tools({"name": "x"}, dispatch)[1][0].message.startswith("'tools' must be")
    many = [{"name": f"t{i}", "description": "Do a thing."} for i in range(MAX_TOOLS + 3)]
    tools, errors = declared_tools(many, dispatch)
    assert len(tools) == MAX_TOOLS and "more than 16 tools" in str(errors[0])


# -- the page's side of a call ----------------------------------------------------------------


def test_hello_carries_the_declarations_and_may_be_longer_than_other_messages() -> None:
    tools = [_with(name=f"tool_{i}", description="d" * 300) for i in range(12)]
    hello = {"type": "hello", "protocol": 1, "sample_rate": 16000, "tools": tools}
    raw = json.dumps(hello)
    assert len(raw) > MAX_TEXT_BYTES
    parsed = parse_text(raw)
    assert isinstance(parsed, Hello) and parsed.tools == tools
    assert parse_text(json.dumps({**hello, "tools": None})) == Hello(16000)
    long_played = json.dumps({"type": "played", "reply_id": 1, "samples": 1, "x": "y" * 5000})
    with pytest.raises(ProtocolError) as caught:
        parse_text(long_played)
    assert caught.value.code == "message_too_large"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"call_id": 3, "result": "The light is on."}, ToolAnswer(3, "The light is on.")),
        ({"call_id": 3, "result": {"on": True}}, ToolAnswer(3, {"on": True})),
        ({"call_id": 3, "error": " unplugged "}, ToolAnswer(3, error="unplugged")),
        ({"result": "x"}, "'call_id'"),
        ({"call_id": "3", "result": "x"}, "'call_id'"),
        ({"call_id": True, "result": "x"}, "'call_id'"),
        ({"call_id": 0, "result": "x"}, "'call_id'"),
        ({"call_id": 3}, "needs either 'result' or 'error'."),
        ({"call_id": 3, "result": "x", "error": "y"}, "not both"),
        ({"call_id": 3, "error": ""}, "'error' must be a non-empty string"),
        ({"call_id": 3, "error": {"why": 1}}, "'error' must be a non-empty string"),
        ({"call_id": 3, "result": None}, "'result' is null"),
    ],
)
def test_a_tool_result_is_read_or_refused_clearly(message: dict[str, Any], expected: Any) -> None:
    raw = json.dumps({"type": "tool_result", **message})
    if isinstance(expected, ToolAnswer):
        assert parse_text(raw) == expected
        return
    with pytest.raises(ProtocolError) as caught:
        parse_text(raw)
    assert caught.value.code == "bad_field" and expected in str(caught.value)


def test_answers_settle_calls_late_ones_are_ignored_unknown_ones_refused() -> None:
    page = PageTools()
    page.time_limit_s, page.limits = 5.0, {"switch_light": 1.5}
    light = page.dispatch("switch_light", 1, {"state": "on"})
    assert page.request({"type": "tool_call", "call_id": 1, "name": "switch_light"}) == {
        "type": "tool_call", "call_id": 1, "name": "switch_light", "time_limit_ms": 1500,
    }  # fmt: skip
    # A call of a tool the server's application declared is not the page's to answer.
    other = {"type": "tool_call", "call_id": 9, "name": "sell"}
    assert page.request(other) == other
    assert page.answer(ToolAnswer(1, "The light is on.")) is True
    assert light.result() == "The light is on."
    assert page.answer(ToolAnswer(1, "again")) is False  # already answered: ignored
    # An error answer is the tool's failure; a cancelled call's answer is ignored.
    failing = page.dispatch("switch_light", 2, {"state": "off"})
    page.answer(ToolAnswer(2, error="the bulb is gone"))
    with pytest.raises(PageToolFailed, match="the bulb is gone"):
        failing.result()
    cut = page.dispatch("switch_light", 3, {"state": "off"})
    assert cut.cancel()  # a barge-in, or the time limit
    assert page.answer(ToolAnswer(3, "late")) is False
    with pytest.raises(ProtocolError) as caught:
        page.answer(ToolAnswer(99, "made up"))
    assert caught.value.code == "unknown_call" and "99" in str(caught.value)
    # The connection closes: what still waits is cancelled, later calls fail at once.
    waiting = page.dispatch("switch_light", 4, {})
    page.close()
    with pytest.raises(CancelledError):
        waiting.result()
    with pytest.raises(ToolError):
        page.dispatch("switch_light", 5, {}).result()
