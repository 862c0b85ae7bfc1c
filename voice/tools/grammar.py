"""A GBNF grammar for a call to one of some tools, and the parsing of what it made.

llama.cpp samples only tokens the grammar allows, so a model held to this grammar
can write nothing but ``{"name": "<one of the tools>", "arguments": {...}}`` with
every parameter in its declared order and a value of its type (a ``Literal``'s values
as alternatives). A call is then always a known tool with valid arguments, and no
JSON ever reaches the reply's text: the call is made apart from the reply.

Strings are kept short and on one line (a tool's argument is an item's name, not
prose), which also bounds how long a call can take to sample.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from voice.tools.schema import Param, Tool, ToolError

MAX_STRING = 40  # characters of a string argument
_PRIMITIVES = {
    "string": f'"\\"" [^"\\\\\\n\\x00-\\x1f]{{1,{MAX_STRING}}} "\\""',
    "integer": '"-"? [0-9] [0-9]{0,5}',
    "number": '"-"? [0-9] [0-9]{0,5} ("." [0-9]{1,4})?',
    "boolean": '"true" | "false"',
}


def _literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return json.dumps(text)


def _rule_name(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9]", "-", name).lower()


def _value(param: Param) -> str:
    if param.choices:
        return " | ".join(_literal(json.dumps(c)) for c in param.choices)
    return param.type


def call_grammar(tools: Sequence[Tool]) -> str:
    """The GBNF of a call to one of ``tools`` (one at least)."""
    if not tools:
        raise ToolError("a call grammar needs one tool at least.")
    lines = ["root ::= " + " | ".join(f"call-{_rule_name(t.name)}" for t in tools)]
    used: set[str] = set()
    for tool in tools:
        parts = [_literal('{"name": ' + json.dumps(tool.name) + ', "arguments": {')]
        for i, param in enumerate(tool.params):
            key = ("" if i == 0 else ", ") + json.dumps(param.name) + ": "
            rule = f"{_rule_name(tool.name)}-{_rule_name(param.name)}"
            parts += [_literal(key), rule]
            lines.append(f"{rule} ::= {_value(param)}")
            if not param.choices:
                used.add(param.type)
        parts.append(_literal("}}"))
        lines.insert(1, f"call-{_rule_name(tool.name)} ::= " + " ".join(parts))
    lines += [f"{kind} ::= {_PRIMITIVES[kind]}" for kind in sorted(used)]
    return "\n".join(lines) + "\n"


def parse_call(text: str, tools: Sequence[Tool]) -> tuple[Tool, dict[str, Any]]:
    """The tool and checked arguments of a call the grammar made (or any JSON of the
    same shape, from a server); a ToolError when it names no tool or does not fit."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError(f"the tool call is not JSON ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ToolError(f"the tool call names no tool: {text[:80]!r}")
    by_name = {t.name: t for t in tools}
    tool = by_name.get(data["name"])
    if tool is None:
        raise ToolError(f"the model called {data['name']!r}, which is not a tool here.")
    arguments = data.get("arguments", {})
    if isinstance(arguments, str):  # OpenAI servers send the arguments as a JSON string
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolError(f"{tool.name}()'s arguments are not JSON ({exc.msg}).") from None
    if not isinstance(arguments, dict):
        raise ToolError(f"{tool.name}()'s arguments are not an object: {arguments!r}")
    return tool, tool.check_arguments(arguments)
