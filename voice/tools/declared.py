"""Tools declared as JSON (a browser page's ``hello``), not as Python functions.

A page that can act (switch a light, open a panel) says what it can do as the
OpenAI-style declaration: a name, a description, and the JSON schema of the
parameters, an object whose properties are strings, integers, numbers or booleans
(``enum`` for a closed set). Each becomes the same :class:`Tool` a Python function
does, so the shortlist, the grammar and the conversation treat both alike; only the
run differs: the tool's ``remote`` sends the call to the page and returns the future
of its answer (voice.serve.pagetools).

Pure checks, no I/O: a declaration the assistant could never call right is refused
with a :class:`ToolError` naming the tool and what is wrong, and the others still
count (one typo must not cost a page all its tools).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from concurrent.futures import Future
from typing import Any

from voice.tools.schema import JsonValue, Param, Tool, ToolError, fits, valid_name

# Bounds on what a page may declare: each tool's texts are embedded when the session
# registers it, and its parameters make up the call's grammar and prompt.
MAX_TOOLS = 16
MAX_PARAMS = 8
MAX_CHOICES = 32
MAX_EXAMPLES = 12
MAX_TEXT = 400  # characters of a description or an example
MAX_CHOICE_TEXT = 40  # characters of one enum value (a grammar string holds as many)
TYPES = ("string", "integer", "number", "boolean")
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
}  # fmt: skip

# Sends a call to where the tool runs: (tool's name, call id, arguments) -> its result.
Dispatch = Callable[[str, int, dict[str, Any]], "Future[Any]"]


def _runs_remotely(**arguments: Any) -> Any:
    raise ToolError("this tool runs where it was declared; it is called through its remote.")


def _text(where: str, value: Any, what: str) -> str:
    if not isinstance(value, str) or not " ".join(value.split()):
        raise ToolError(f"{where}: {what} must be a non-empty string, not {value!r}.")
    text = " ".join(value.split())
    if len(text) > MAX_TEXT:
        raise ToolError(f"{where}: {what} is {len(text)} characters; keep it under {MAX_TEXT}.")
    return text


def _choices(where: str, kind: str, values: Any) -> tuple[JsonValue, ...]:
    if not isinstance(values, list) or not values or len(values) > MAX_CHOICES:
        raise ToolError(f"{where}: 'enum' must list 1 to {MAX_CHOICES} values, not {values!r}.")
    wanted = _PYTHON_TYPES[kind]
    out: list[JsonValue] = []
    for value in values:
        right = isinstance(value, wanted) and (kind == "boolean" or not isinstance(value, bool))
        if not right:
            raise ToolError(f"{where}: the enum value {value!r} is not of its type, {kind}.")
        if isinstance(value, str) and not 0 < len(value) <= MAX_CHOICE_TEXT:
            raise ToolError(
                f"{where}: the enum value {value!r} must have 1 to {MAX_CHOICE_TEXT} characters."
            )
        if value in out:
            raise ToolError(f"{where}: the enum value {value!r} is listed twice.")
        out.append(float(value) if kind == "number" else value)
    return tuple(out)


def _param(tool: str, name: Any, spec: Any, required: bool) -> Param:
    where = f"tool {tool}: parameter {name!r}"
    if not isinstance(name, str) or not valid_name(name):
        raise ToolError(f"{where}: a parameter's name must be letters, digits and underscores.")
    if not isinstance(spec, dict):
        raise ToolError(f'{where} must be a JSON schema object such as {{"type": "string"}}.')
    kind = spec.get("type")
    if kind not in TYPES:
        raise ToolError(
            f"{where} has the type {kind!r}, which a tool cannot take.",
            "Use string, integer, number or boolean, with 'enum' for a closed set.",
        )
    choices = _choices(where, kind, spec["enum"]) if "enum" in spec else ()
    if required or "default" not in spec:
        return Param(name, kind, choices, required=required)
    probe = Param(name, kind, choices)
    default = spec["default"]
    if default is not None and not fits(probe, default):
        raise ToolError(f"{where}: its default {default!r} does not fit its type or enum.")
    return Param(name, kind, choices, required=False, default=default)


def _params(tool: str, schema: Any) -> tuple[Param, ...]:
    if schema is None:
        return ()
    where = f"tool {tool}: 'parameters'"
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        got = schema.get("type") if isinstance(schema, dict) else schema
        raise ToolError(f"{where} must be a JSON schema of type 'object', not {got!r:.40}.")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or len(properties) > MAX_PARAMS:
        raise ToolError(f"{where}: 'properties' must map up to {MAX_PARAMS} names to schemas.")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ToolError(f"{where}: 'required' must be a list of parameter names.")
    unknown = sorted(set(required) - set(properties))
    if unknown:
        raise ToolError(f"{where}: 'required' names {', '.join(unknown)}, not in 'properties'.")
    params = tuple(_param(tool, n, s, n in required) for n, s in properties.items())
    rules = [p.name.lower() for p in params]  # grammar rules are lower-case
    if len(set(rules)) != len(rules):
        raise ToolError(f"{where}: two parameters differ only in case.")
    return params


def _name(data: dict[str, Any]) -> str:
    name = data.get("name")
    if not isinstance(name, str) or not valid_name(name):
        raise ToolError(
            f"a declared tool's name must be letters, digits and underscores (at most 64), "
            f"not {name!r}.",
            'Declare e.g. {"name": "switch_light", "description": "...", "parameters": {...}}.',
        )
    return name


def declared_tool(data: Any, dispatch: Dispatch) -> Tool:
    """The :class:`Tool` of one declaration (flat, or OpenAI's ``{"type": "function",
    "function": {...}}``), run through ``dispatch``; a ToolError naming it otherwise.
    ``time_limit_ms`` (optional): the tool's own limit (the server's is kept if shorter)."""
    if isinstance(data, dict) and isinstance(data.get("function"), dict):
        data = data["function"]
    if not isinstance(data, dict):
        raise ToolError(f"a declared tool must be a JSON object, not {data!r:.60}.")
    name = _name(data)
    description = _text(f"tool {name}", data.get("description"), "'description'")
    params = _params(name, data.get("parameters"))
    examples = data.get("examples", [])
    if not isinstance(examples, list) or len(examples) > MAX_EXAMPLES:
        raise ToolError(f"tool {name}: 'examples' must be a list of up to {MAX_EXAMPLES} strings.")
    said = tuple(_text(f"tool {name}", e, "each example") for e in examples)
    limit_s: float | None = None
    if "time_limit_ms" in data:
        limit = data["time_limit_ms"]
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
            raise ToolError(f"tool {name}: 'time_limit_ms' must be a positive number of ms.")
        limit_s = float(limit) / 1000.0
    remote = functools.partial(dispatch, name)
    return Tool(
        name, description, params, _runs_remotely, said, remote=remote, time_limit_s=limit_s
    )


def declared_tools(
    data: Any,
    dispatch: Dispatch,
    taken: Collection[str] = (),
) -> tuple[list[Tool], list[ToolError]]:
    """The tools of a list of declarations, and one error per declaration refused (a
    bad one, a name used twice or by one of ``taken``, the tools already there)."""
    if not isinstance(data, list):
        error = ToolError(
            f"'tools' must be a list of tool declarations, not {data!r:.60}.",
            "Leave it out to declare none.",
        )
        return [], [error]
    tools: list[Tool] = []
    errors: list[ToolError] = []
    names = {n.lower() for n in taken}
    for item in data:
        if len(tools) == MAX_TOOLS:
            errors.append(ToolError(f"more than {MAX_TOOLS} tools; the rest are left out."))
            break
        try:
            tool = declared_tool(item, dispatch)
        except ToolError as exc:
            errors.append(exc)
            continue
        if tool.name.lower() in names:
            errors.append(
                ToolError(f"tool {tool.name}: a tool of that name is already there; rename it.")
            )
            continue
        names.add(tool.name.lower())
        tools.append(tool)
    return tools, errors
