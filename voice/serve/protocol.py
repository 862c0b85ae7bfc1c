"""The browser protocol, version 1: what may cross the WebSocket, and how to read it.

Pure functions, no I/O, so every malformed input can be tested without a
socket (``web/PROTOCOL.md`` is the reference for client authors).

- Text messages are JSON objects with a ``type``. The client sends ``hello``
  (first, optionally declaring the page's tools), ``played``, ``talk`` and
  ``tool_result`` (its answer to a call of one of its tools); the server sends
  ``ready``, the conversation core's events (same names and fields as
  :mod:`voice.events`), ``pause``, ``resume``, ``clear``, ``error`` and
  ``going_away`` (the server is draining: close code 1001 follows, reconnect at
  once).
- Binary messages carry PCM16 little-endian mono audio at the negotiated rate.
  Uplink frames are bare samples. Downlink frames start with a header of two
  little-endian uint32: the reply id and the frame's first sample within that
  reply, so a client can drop audio of a reply it was told to clear.

A mistake in one message is answered with an ``error`` and the session goes
on; :class:`ProtocolViolation` (a wrong protocol version, a flood of errors)
closes only that connection, with a standard close code.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import pcm16_to_float, to_pcm16
from voice.errors import VoiceError

PROTOCOL_VERSION = 1
FORMAT = "pcm16"
MIN_RATE = 8000
MAX_RATE = 48000
FRAME_MS = 20  # what clients should send; anything up to MAX_FRAME_MS is accepted
MAX_FRAME_MS = 200
MAX_TEXT_BYTES = 4096  # no client message needs more, but these two:
MAX_HELLO_BYTES = 32768  # a hello that declares the page's tools
MAX_RESULT_BYTES = 16384  # a tool's result (JSON a page computed)
MAX_MESSAGE_BYTES = 65536  # the WebSocket layer closes anything bigger (1009)
DOWNLINK_HEADER = struct.Struct("<II")

# Close codes (RFC 6455): only the connection at fault is closed.
CLOSE_PROTOCOL_ERROR = 1002  # unsupported protocol version
CLOSE_POLICY = 1008  # too many errors in a row, or no hello in time
CLOSE_TRY_AGAIN = 1013  # the server has its maximum number of sessions
CLOSE_GOING_AWAY = 1001  # the server is draining (after a going_away message)

Int16Array = npt.NDArray[np.int16]
Float32Array = npt.NDArray[np.float32]


class ProtocolError(VoiceError):
    """One bad message: answered with an ``error`` message; the session goes on."""

    code = "bad_message"


class ProtocolViolation(VoiceError):
    """The connection cannot go on: it is closed with ``close_code``."""

    def __init__(self, message: str, hint: str = "", *, code: str, close_code: int) -> None:
        super().__init__(message, hint, code=code)
        self.close_code = close_code


@dataclass(frozen=True)
class Hello:
    sample_rate: int
    # The conversation to go on with (a reconnect), as ``ready`` gave it; None: a new one.
    conversation_id: str | None = None
    # The page's tool declarations as sent (None: none); checked one by one when the
    # session registers them (voice.tools.declared), so one bad tool costs only itself.
    tools: Any = None


@dataclass(frozen=True)
class Played:
    """The client has played ``samples`` (at its rate) of reply ``reply_id`` in total."""

    reply_id: int
    samples: int


@dataclass(frozen=True)
class Talk:
    """Push-to-talk: the user pressed (``down``) or released the talk button. The first
    one puts the session in push-to-talk mode: the microphone counts only while the
    button is down, and releasing it ends the turn at once."""

    down: bool


@dataclass(frozen=True)
class ToolAnswer:
    """The page's answer to its tool's call ``call_id``: ``result`` (a string or any
    JSON), or ``error`` (what went wrong, said as the tool's failure)."""

    call_id: int
    result: Any = None
    error: str | None = None


ClientMessage = Hello | Played | Talk | ToolAnswer
KNOWN = "Known types: hello, played, talk, tool_result."


def _int_field(data: dict[str, Any], name: str, low: int, high: int) -> int:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(
            f"'{data.get('type')}' needs an integer '{name}'.",
            f'Send e.g. {{"type": "{data.get("type")}", "{name}": {low}, ...}}.',
            code="bad_field",
        )
    if not low <= value <= high:
        raise ProtocolError(
            f"'{name}' = {value} is out of range.",
            f"Use a value from {low} to {high}.",
            code="unsupported_rate" if name == "sample_rate" else "bad_field",
        )
    return value


def parse_text(raw: str | bytes) -> ClientMessage:
    """Decode one client text message, or raise :class:`ProtocolError` saying what is wrong."""
    if len(raw) > MAX_HELLO_BYTES:
        raise _too_large(len(raw), MAX_TEXT_BYTES)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # "[[[[...": too deep
        raise ProtocolError(
            f"text message is not JSON ({exc}).",
            'Send a JSON object such as {"type": "played", "reply_id": 1, "samples": 320}.',
            code="bad_json",
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise ProtocolError(
            "a message must be a JSON object with a string 'type'.",
            KNOWN,
            code="bad_message",
        )
    kind = data["type"]
    limit = {"hello": MAX_HELLO_BYTES, "tool_result": MAX_RESULT_BYTES}.get(kind, MAX_TEXT_BYTES)
    if len(raw) > limit:
        raise _too_large(len(raw), limit)
    if kind == "hello":
        version = data.get("protocol", PROTOCOL_VERSION)
        if version != PROTOCOL_VERSION:
            raise ProtocolViolation(
                f"protocol version {version!r} is not supported.",
                f"This server speaks version {PROTOCOL_VERSION}; update the client.",
                code="unsupported_protocol",
                close_code=CLOSE_PROTOCOL_ERROR,
            )
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise ProtocolError(
                f"audio format {fmt!r} is not supported.",
                f"Send '{FORMAT}' (16-bit little-endian mono).",
                code="unsupported_format",
            )
        conversation_id = data.get("conversation_id")
        if conversation_id is not None and not isinstance(conversation_id, str):
            raise ProtocolError(
                f"hello's 'conversation_id' must be the string 'ready' gave, not "
                f"{conversation_id!r}.",
                "Leave it out to start a new conversation.",
                code="bad_field",
            )
        rate = _int_field(data, "sample_rate", MIN_RATE, MAX_RATE)
        return Hello(rate, conversation_id or None, data.get("tools"))
    if kind == "played":
        return Played(
            _int_field(data, "reply_id", 0, 2**31 - 1), _int_field(data, "samples", 0, 2**31 - 1)
        )
    if kind == "talk":
        down = data.get("down")
        if not isinstance(down, bool):
            raise ProtocolError(
                f"talk needs 'down': true or false, not {down!r}.",
                'Send {"type": "talk", "down": true} when the button is pressed.',
                code="bad_field",
            )
        return Talk(down)
    if kind == "tool_result":
        return _tool_answer(data)
    raise ProtocolError(f"unknown message type {kind!r}.", KNOWN, code="unknown_type")


def _too_large(size: int, limit: int) -> ProtocolError:
    return ProtocolError(
        f"text message of {size} bytes is too long.",
        f"Keep JSON messages under {limit} bytes (a hello with tools: {MAX_HELLO_BYTES}).",
        code="message_too_large",
    )


def _tool_answer(data: dict[str, Any]) -> ToolAnswer:
    """``{"type": "tool_result", "call_id": N, "result": ...}`` or ``... "error": "..."}``."""
    example = '{"type": "tool_result", "call_id": 1, "result": "The light is on."}'
    call_id = data.get("call_id")
    if isinstance(call_id, bool) or not isinstance(call_id, int) or not 0 < call_id < 2**31:
        raise ProtocolError(
            f"tool_result needs the integer 'call_id' of the tool_call it answers, not "
            f"{call_id!r:.40}.",
            f"Send e.g. {example}.",
            code="bad_field",
        )
    has_result, has_error = "result" in data, "error" in data
    if has_result == has_error:
        raise ProtocolError(
            f"tool_result for call {call_id} needs either 'result' or 'error'"
            + (", not both." if has_result else "."),
            f"Send e.g. {example}, or an 'error' string when the tool failed.",
            code="bad_field",
        )
    if has_error:
        error = data["error"]
        if not isinstance(error, str) or not error.strip():
            raise ProtocolError(
                f"tool_result for call {call_id}: 'error' must be a non-empty string.",
                'Say what went wrong, e.g. "error": "the light is unplugged".',
                code="bad_field",
            )
        return ToolAnswer(call_id, error=error.strip())
    result = data["result"]
    if result is None:
        raise ProtocolError(
            f"tool_result for call {call_id}: 'result' is null.",
            'Send what the tool did, e.g. "result": "done".',
            code="bad_field",
        )
    return ToolAnswer(call_id, result)


def parse_audio(raw: bytes, sample_rate: int) -> Float32Array:
    """PCM16 little-endian mono bytes as float samples in [-1, 1)."""
    if len(raw) % 2:
        raise ProtocolError(
            f"audio frame of {len(raw)} bytes is not whole 16-bit samples.",
            "Send PCM16 mono: an even number of bytes.",
            code="odd_length",
        )
    limit = sample_rate * MAX_FRAME_MS // 1000
    if len(raw) // 2 > limit:
        raise ProtocolError(
            f"audio frame of {len(raw) // 2} samples is longer than {MAX_FRAME_MS} ms.",
            f"Send {FRAME_MS} ms frames ({sample_rate * FRAME_MS // 1000} samples).",
            code="frame_too_large",
        )
    return pcm16_to_float(raw)


def downlink_frame(reply_id: int, offset: int, audio: Float32Array) -> bytes:
    """One server audio frame: header (reply id, first sample's offset) and PCM16."""
    return DOWNLINK_HEADER.pack(reply_id, offset) + to_pcm16(audio)


def parse_downlink(raw: bytes) -> tuple[int, int, Float32Array]:
    """(reply id, offset, samples) of a server audio frame (for Python clients)."""
    if len(raw) < DOWNLINK_HEADER.size or (len(raw) - DOWNLINK_HEADER.size) % 2:
        raise ProtocolError(f"downlink frame of {len(raw)} bytes is malformed.", code="bad_frame")
    reply_id, offset = DOWNLINK_HEADER.unpack_from(raw)
    return reply_id, offset, pcm16_to_float(raw[DOWNLINK_HEADER.size :])


def message(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def error_message(error: VoiceError) -> str:
    return message("error", code=error.code, message=str(error))
