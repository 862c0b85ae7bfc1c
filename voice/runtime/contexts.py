"""The server's LLM contexts: one lent to each session, made only as many as it may hold.

A context is a llama.cpp KV cache and its compute buffers (tens of MB that stay
allocated for the context's life), so the pool is what bounds the server's memory
as users come and go. A session that closes gives its context back only once the
engine thread has finished with it (at most one job later); a user who reconnects
in that gap used to get a brand-new context, and the soak found the server holding
one more than its maximum of sessions. Now, when every context that may exist is
lent, borrowing waits briefly for the one on its way back instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

RETURN_WAIT_S = 2.0  # a closed session's last job is one LLM step or one sentence of speech


class ContextPool(Generic[T]):
    """Contexts made by ``make`` on demand, at most ``limit`` of them (``first``, if given,
    is one of them already made) unless one lent is not back within ``return_wait_s``."""

    def __init__(
        self,
        make: Callable[[], T],
        limit: int,
        first: T | None = None,
        return_wait_s: float = RETURN_WAIT_S,
    ) -> None:
        self._make = make
        self.limit = max(1, limit)
        self.return_wait_s = return_wait_s
        self._idle: list[T] = [] if first is None else [first]
        self.made = len(self._idle)
        self._returned = threading.Condition()

    def preload(self, count: int) -> None:
        """Make contexts ahead of the first sessions (each takes a fraction of a second)."""
        while self.made < min(count, self.limit):
            context = self._make()
            with self._returned:
                self._idle.append(context)
                self.made += 1

    def borrow(self) -> T:
        """An idle context, a new one while fewer than ``limit`` exist, or else the next one
        given back (blocking up to ``return_wait_s``, then making one over the limit)."""
        with self._returned:
            if not self._idle and self.made >= self.limit:
                self._returned.wait_for(lambda: bool(self._idle), self.return_wait_s)
            if self._idle:
                return self._idle.pop()
            if self.made >= self.limit:
                log.warning("no LLM context came back within %.1f s: making one more than "
                            "the %d sessions need", self.return_wait_s, self.limit)  # fmt: skip
            self.made += 1
        try:
            return self._make()
        except BaseException:
            with self._returned:
                self.made -= 1
            raise

    def give_back(self, context: T) -> None:
        with self._returned:
            self._idle.append(context)
            self._returned.notify()
