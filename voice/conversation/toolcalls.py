"""Running the tool calls of a conversation, off the engine thread.

A sync tool runs on a small shared thread pool, an async one on a shared event
loop thread: the engine thread never waits on a game's or a kiosk's code. The
session polls its call (on every frame and every job it hands out) and decides on
audio time what the user hears: nothing yet, the filler after ``filler_after_ms``,
the apology when the call raised or ran past ``time_limit_s``. A barge-in cancels
an async call (its task is cancelled) and drops a sync one's result (a thread
cannot be stopped; what it returns is thrown away): a call never stays pending.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from voice.tools.choose import Call
from voice.tools.schema import Say

_POOL: ThreadPoolExecutor | None = None
_LOOP: asyncio.AbstractEventLoop | None = None
_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tool")
        return _POOL


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="tool-loop", daemon=True).start()
            _LOOP = loop
        return _LOOP


@dataclass
class ToolRun:
    """One call in flight (or over)."""

    call_id: int
    call: Call
    future: Future[Any]
    started: float = field(default_factory=time.monotonic)  # wall clock: tools run on it
    filler_said: bool = False

    @property
    def elapsed_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000

    def cancel(self) -> None:
        """An async tool's task is cancelled; a sync one that has started cannot be, and
        its result will be ignored."""
        self.future.cancel()


def start(call: Call, call_id: int) -> ToolRun:
    tool, arguments = call.tool, dict(call.arguments)
    if tool.remote is not None:  # it runs where it was declared (a browser page)
        future: Future[Any] = tool.remote(call_id, arguments)
    elif tool.is_async:
        future = asyncio.run_coroutine_threadsafe(tool.fn(**arguments), _loop())
    else:
        future = _pool().submit(tool.fn, **arguments)
    return ToolRun(call_id, call, future)


def time_limit_s(call: Call, limit_s: float) -> float:
    """How long ``call`` may run: the ``[tools]`` limit, or the tool's own if shorter."""
    own = call.tool.time_limit_s
    return limit_s if own is None else min(limit_s, own)


def result_text(value: Any) -> str:
    """What a tool returned, as the model reads it."""
    if isinstance(value, Say):
        return value.text
    if value is None:
        return "done"
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def describe(call: Call) -> str:
    """The call in words for the model's prompt and history: no JSON, no braces (the
    model must never learn to speak them)."""
    args = ", ".join(f"{k} {v}" for k, v in call.arguments.items())
    return f"{call.tool.name.replace('_', ' ')}" + (f" ({args})" if args else "")


def result_prompt(system_prompt: str, call: Call, result: str) -> str:
    """The persona's prompt with what the tool just did, for the model to tell."""
    return (
        f"{system_prompt} You just did this for the user: {describe(call)}. "
        f"The outcome: {result}. Tell the user in one short sentence."
    ).strip()
