"""A tool the assistant can call, made from a plain Python function.

The function is the whole declaration, as a game or kiosk developer writes it:
its name is the tool's name, its docstring the description, its type hints the
parameters (``str``, ``int``, ``float``, ``bool``, ``Literal[...]`` for a closed set),
a default makes a parameter optional. Anything else (no hint, ``*args``, a list, a
class) is refused when the tool is registered, with one error naming the function
and the parameter: a tool that the model can never call right is better found at
start-up than in the middle of a conversation.

The JSON schema is the OpenAI ``parameters`` object, so one declaration serves the
embedded backend's grammar (voice.tools.grammar), an HTTP server's ``tools`` and a
browser client.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal

from voice.errors import VoiceError

JsonValue = str | int | float | bool
_SIMPLE: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True)
class Say:
    """What a tool returns to have its words said as they are, with no model turn
    (``return Say("Here's your sword. That's ten gold.")``)."""

    text: str


class ToolError(VoiceError):
    """A function that cannot be a tool, or a call that does not fit its tool."""

    code = "bad_tool"


@dataclass(frozen=True)
class Param:
    """One parameter: its JSON type, its closed set of values (a ``Literal``), its
    default (``required`` is False when it has one)."""

    name: str
    type: str  # "string" | "integer" | "number" | "boolean"
    choices: tuple[JsonValue, ...] = ()
    required: bool = True
    default: JsonValue | None = None

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.choices:
            out["enum"] = list(self.choices)
        if not self.required:
            out["default"] = self.default
        return out


@dataclass(frozen=True)
class Tool:
    """A callable the assistant may use: ``fn`` with what the model is told of it.

    ``examples``: a few things a user says that need this tool ("I'll take two
    swords"); they help tell its calls apart from small talk (voice.tools.choose).

    ``remote``: a tool that runs elsewhere (one a browser page declared,
    voice.tools.declared): called with the call's id and its arguments, it sends the
    call there and returns the future of its result, instead of ``fn`` being run.
    ``time_limit_s``: the tool's own limit, under the ``[tools]`` one (None: that one)."""

    name: str
    description: str
    params: tuple[Param, ...]
    fn: Callable[..., Any]
    examples: tuple[str, ...] = ()
    is_async: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    remote: Callable[[int, dict[str, Any]], Future[Any]] | None = None
    time_limit_s: float | None = None

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (an OpenAI function's ``parameters``)."""
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
            "additionalProperties": False,
        }

    def openai(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters(),
            },
        }

    def check_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` with defaults filled in, or a ToolError saying what is wrong."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise ToolError(f"{self.name}() has no parameter {', '.join(unknown)}.")
        out: dict[str, Any] = {}
        for param in self.params:
            if param.name not in arguments:
                if param.required:
                    raise ToolError(f"{self.name}() needs its argument {param.name!r}.")
                out[param.name] = param.default
                continue
            value = arguments[param.name]
            if not fits(param, value):
                raise ToolError(
                    f"{self.name}({param.name}={value!r}): expected {_describe(param)}."
                )
            out[param.name] = float(value) if param.type == "number" else value
        return out


def fits(param: Param, value: Any) -> bool:
    """Whether ``value`` (as JSON gives it) is a value of ``param``."""
    if param.choices:
        return any(value == c and type(value) is type(c) for c in param.choices)
    if param.type == "boolean":
        return isinstance(value, bool)
    if param.type == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if param.type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str)


def valid_name(name: str) -> bool:
    """Whether ``name`` can be a tool's or a parameter's name (an identifier, as a
    grammar rule and a Python function need)."""
    return bool(_NAME.match(name))


def _describe(param: Param) -> str:
    if param.choices:
        return "one of " + ", ".join(repr(c) for c in param.choices)
    return f"a JSON {param.type}"


def _param(fn_name: str, parameter: inspect.Parameter, hint: Any) -> Param:
    where = f"tool {fn_name}(): parameter {parameter.name!r}"
    if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
        raise ToolError(
            f"{where} is *args or **kwargs; a tool takes named parameters only.",
            "Declare each argument with a type hint, e.g. def sell(item: str, quantity: int = 1).",
        )
    if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
        raise ToolError(f"{where} is positional-only; the model passes arguments by name.")
    if hint is inspect.Parameter.empty:
        raise ToolError(
            f"{where} has no type hint.",
            "Give it one of str, int, float, bool or Literal[...] (a closed set).",
        )
    choices: tuple[JsonValue, ...] = ()
    if typing.get_origin(hint) is Literal:
        choices = tuple(typing.get_args(hint))
        kinds = {type(c) for c in choices}
        if not choices or len(kinds) != 1 or next(iter(kinds)) not in _SIMPLE:
            raise ToolError(
                f"{where}: Literal{list(choices)!r} must list values of one type "
                "(str, int, float or bool)."
            )
        json_type = _SIMPLE[next(iter(kinds))]
    elif hint in _SIMPLE:
        json_type = _SIMPLE[hint]
    else:
        raise ToolError(
            f"{where} has the type {getattr(hint, '__name__', hint)!s}, which a tool cannot take.",
            "Use str, int, float, bool or Literal[...] (a closed set of values).",
        )
    if parameter.default is inspect.Parameter.empty:
        return Param(parameter.name, json_type, choices)
    default = parameter.default
    probe = Param(parameter.name, json_type, choices)
    if default is not None and not fits(probe, default):
        raise ToolError(f"{where}: its default {default!r} is not {_describe(probe)}.")
    return Param(parameter.name, json_type, choices, required=False, default=default)


def make_tool(
    fn: Callable[..., Any] | Tool,
    name: str | None = None,
    description: str | None = None,
    examples: Sequence[str] = (),
) -> Tool:
    """The :class:`Tool` of ``fn`` (a Tool is returned as it is), or a ToolError."""
    if isinstance(fn, Tool):
        return fn
    if not callable(fn):
        raise ToolError(f"{fn!r} is not a function; a tool is a function with type hints.")
    tool_name = str(name or getattr(fn, "__name__", ""))
    if not _NAME.match(tool_name):
        raise ToolError(
            f"{tool_name!r} cannot be a tool's name.",
            "Use letters, digits and underscores (the function's own name, or name=...).",
        )
    doc = description if description is not None else inspect.getdoc(fn)
    text = " ".join((doc or "").split())
    if not text:
        raise ToolError(
            f"tool {tool_name}() has no docstring.",
            "Say in one sentence what it does: the model chooses tools by what they say.",
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # an unresolvable forward reference
        raise ToolError(f"tool {tool_name}(): its type hints cannot be read: {exc}.") from None
    signature = inspect.signature(fn)
    params = tuple(
        _param(tool_name, p, hints.get(p.name, inspect.Parameter.empty))
        for p in signature.parameters.values()
    )
    is_async = inspect.iscoroutinefunction(fn)
    return Tool(tool_name, text, params, fn, tuple(examples), is_async)


class Toolbox:
    """The tools of one assistant, by name; registering a second one of a name is an
    error (the model could not tell them apart)."""

    def __init__(self, tools: Sequence[Callable[..., Any] | Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for fn in tools:
            self.add(fn)

    def add(self, fn: Callable[..., Any] | Tool, examples: Sequence[str] = ()) -> Tool:
        tool = make_tool(fn, examples=examples)
        if tool.name in self._tools:
            raise ToolError(f"two tools are named {tool.name!r}; give one another name.")
        self._tools[tool.name] = tool
        return tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __iter__(self) -> typing.Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __bool__(self) -> bool:
        return bool(self._tools)
