"""The tools one page declared: their calls out to the page, its answers back in.

The session runs a page's tool like any other (voice.conversation.toolcalls): it
starts the call, polls its future, and gives up on it at the time limit or on a
barge-in by cancelling the future. Here the future is only a promise of the page's
answer: starting the call registers it, the session's own ``tool_call`` event is
the request (the server adds ``time_limit_ms`` to it on the way out, so the page
knows to answer), and the page's ``tool_result`` message settles it.

A call over before the page answered (timed out, cancelled) is forgotten, and its
late answer is ignored without an error: the page could not have known. An answer
to a call never made is the page's mistake, and gets one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, InvalidStateError
from typing import Any

from voice.serve.protocol import ProtocolError, ToolAnswer
from voice.tools.schema import ToolError

REMEMBERED = 256  # calls whose late answers are still recognised (and ignored)


class PageToolFailed(ToolError):
    """The page answered its tool's call with an error: the tool failed."""

    code = "tool_failed"


class PageTools:
    """Calls in flight to one page's tools, by the session's call id. Thread-safe: the
    session starts and cancels calls on the engine thread or the event loop's."""

    def __init__(self) -> None:
        # The session's [tools] limit (a tool may ask for less), once its tools are chosen.
        self.time_limit_s = 0.0
        self.limits: dict[str, float] = {}  # tool name -> its limit, for time_limit_ms
        self._lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        self._made: OrderedDict[int, str] = OrderedDict()  # call id -> tool name
        self._closed = False

    def dispatch(self, name: str, call_id: int, arguments: dict[str, Any]) -> Future[Any]:
        """Register the call; its future is settled by :meth:`answer` (or cancelled by
        the session). ``arguments`` go to the page in the ``tool_call`` event."""
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                future.set_exception(ToolError("the page has gone."))
                return future
            self._pending[call_id] = future
            self._made[call_id] = name
            while len(self._made) > REMEMBERED:
                self._made.popitem(last=False)
        future.add_done_callback(lambda _: self._forget(call_id, future))
        return future

    def _forget(self, call_id: int, future: Future[Any]) -> None:
        with self._lock:
            if self._pending.get(call_id) is future:
                del self._pending[call_id]

    def request(self, event: dict[str, Any]) -> dict[str, Any]:
        """The ``tool_call`` event as the page gets it: a call of one of its own tools
        carries ``time_limit_ms`` (answer within it); any other event is unchanged."""
        call_id = event.get("call_id")
        with self._lock:
            name = self._made.get(call_id) if isinstance(call_id, int) else None
        if event.get("type") != "tool_call" or name is None:
            return event
        limit_s = min(self.time_limit_s, self.limits.get(name, self.time_limit_s))
        return {**event, "time_limit_ms": round(limit_s * 1000)}

    def answer(self, answer: ToolAnswer) -> bool:
        """Settle the call the page answered. True: it was waiting; False: it was over
        already (a late answer, ignored). A call never made is a ProtocolError."""
        with self._lock:
            future = self._pending.pop(answer.call_id, None)
            made = answer.call_id in self._made
        if future is None:
            if made:
                return False
            raise ProtocolError(
                f"tool_result for call {answer.call_id}, which was never made.",
                "Answer the call_id of a tool_call this connection received.",
                code="unknown_call",
            )
        try:
            if answer.error is not None:
                future.set_exception(PageToolFailed(answer.error))
            else:
                future.set_result(answer.result)
        except InvalidStateError:  # cancelled meanwhile (a barge-in, the time limit)
            return False
        return True

    def close(self) -> None:
        """The connection is over: every call still waiting is cancelled."""
        with self._lock:
            self._closed = True
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            future.cancel()
