"""The tool calls of a streamed OpenAI chat completion, put together from its chunks.

A server streams a call in pieces: ``delta.tool_calls[i]`` carries an ``index``, the
``id`` and ``function.name`` (usually once, first) and ``function.arguments`` as
fragments of one JSON string, split anywhere (inside a key, a string, a number).
Servers differ in the details, so the rules are lenient where the meaning is clear
and strict where a guess could change the call:

- a missing ``index``: the entry continues the call of its ``id``, or a new one when
  the ``id`` is new, or the last call when it has neither;
- ``name``: llama-cpp-python's server repeats the whole name in every chunk, OpenAI
  sends it once; a fragment equal to (or extending) the name so far replaces it,
  anything else is appended;
- ``arguments`` as an object (not the usual string): taken as its JSON;
- a chunk that is not the shape of a chat-completion chunk (not JSON, a
  ``tool_calls`` that is not a list, an ``index`` that is not a number, ...) is a
  :class:`MalformedStreamError`: skipping it could drop a fragment of the arguments
  and leave valid JSON with another meaning ("12" read as "2").

Pure logic (no I/O): the HTTP backend feeds it parsed chunks (voice.think.http).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from voice.errors import VoiceError

log = logging.getLogger(__name__)


class MalformedStreamError(VoiceError):
    """A streamed chunk the server sent is not what the OpenAI format allows."""

    code = "llm_bad_stream"


@dataclass
class StreamedCall:
    """One tool call as far as it has arrived."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""  # a JSON object's text, once complete

    def as_text(self) -> str:
        """The call as ``{"name": ..., "arguments": "<json>"}``: what
        voice.tools.grammar.parse_call reads (it parses the arguments string)."""
        return json.dumps({"name": self.name, "arguments": self.arguments})


def _bad(problem: str, chunk: object) -> MalformedStreamError:
    return MalformedStreamError(
        f"the LLM server sent a malformed stream chunk ({problem}): {str(chunk)[:120]}",
        "Check that llm.url is an OpenAI-compatible server with tool support "
        "(llama.cpp's llama-server needs --jinja).",
    )


def _text(part: dict[str, Any], key: str, chunk: object) -> str | None:
    """``part[key]``: text, or absent (None); anything else is a malformed chunk."""
    value = part.get(key)
    if value is not None and not isinstance(value, str):
        raise _bad(f"a {key} that is not text", chunk)
    return value


class ToolCallStream:
    """Feed it every chunk (``add``); then ``call()`` is the first call, if any, and
    ``text`` whatever the model wrote in words instead."""

    def __init__(self) -> None:
        self.calls: dict[int, StreamedCall] = {}
        self.text = ""
        self.finish_reason = ""

    def add(self, chunk: object) -> None:
        """One parsed ``data:`` payload of the stream."""
        if not isinstance(chunk, dict):
            raise _bad("not an object", chunk)
        if "error" in chunk and "choices" not in chunk:  # an error reported mid-stream
            error = chunk["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise VoiceError(
                f"the LLM server failed mid-reply: {str(message)[:200]}",
                "Check the server's log; the next turn retries.",
                code="llm_server_error",
            )
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise _bad("no choices list", chunk)
        for choice in choices:  # an empty list: a usage-only chunk at the end
            if not isinstance(choice, dict):
                raise _bad("a choice that is not an object", chunk)
            if choice.get("index", 0) != 0:
                continue  # only one completion is asked for (n = 1)
            self._choice(choice, chunk)

    def _choice(self, choice: dict[str, Any], chunk: object) -> None:
        delta = choice.get("delta") or {}  # a last chunk may carry only finish_reason
        if not isinstance(delta, dict):
            raise _bad("a delta that is not an object", chunk)
        content = _text(delta, "content", chunk)
        if content is not None:
            self.text += content
        entries = delta.get("tool_calls")
        if entries is not None:
            if not isinstance(entries, list):
                raise _bad("tool_calls that is not a list", chunk)
            for entry in entries:
                self._entry(entry, chunk)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.finish_reason = reason

    def _slot(self, entry: dict[str, Any], chunk: object) -> StreamedCall:
        index = entry.get("index")
        call_id = _text(entry, "id", chunk)
        if index is None:
            if call_id:
                known = next((c for c in self.calls.values() if c.id == call_id), None)
                if known is not None:
                    return known
                index = len(self.calls)
            else:
                index = max(self.calls, default=0)
        elif not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise _bad("an index that is not a whole number", chunk)
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = StreamedCall(index)
        if call_id:
            if not call.id:
                call.id = call_id
            elif call.id != call_id:
                raise _bad(f"call {index} changed its id", chunk)
        return call

    def _entry(self, entry: object, chunk: object) -> None:
        if not isinstance(entry, dict):
            raise _bad("a tool call that is not an object", chunk)
        call = self._slot(entry, chunk)
        function = entry.get("function")
        if function is None:
            return
        if not isinstance(function, dict):
            raise _bad("a function that is not an object", chunk)
        name = _text(function, "name", chunk)
        if name is not None:
            if name.startswith(call.name) and call.name:
                call.name = name  # the whole name again (llama-cpp-python's server)
            else:
                call.name += name
        arguments = function.get("arguments")
        if arguments is None:
            return
        if isinstance(arguments, dict):  # a server that sends the object itself
            call.arguments = json.dumps(arguments)
        elif isinstance(arguments, str):
            call.arguments += arguments
        else:
            raise _bad("arguments that are neither text nor an object", chunk)

    def call(self) -> StreamedCall | None:
        """The first call (by index); None when the model answered in words. A call
        with no name is a MalformedStreamError: it can be no tool."""
        if not self.calls:
            return None
        first = self.calls[min(self.calls)]
        if len(self.calls) > 1:
            log.info("the server made %d tool calls; only the first is used", len(self.calls))
        if not first.name:
            raise _bad("a tool call with no function name", {"id": first.id})
        return first
