"""What was last worked out for a text, kept by the text.

Embedding a sentence is most of what a knowledge lookup or a tool shortlist costs, and
the same words come back within a turn: the speculative reply and the reply it becomes,
the session's check and the engine's job, two sessions asking alike. Both keep their
last results here rather than embedding the words again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class RecentByText(Generic[T]):
    """The last ``size`` results by text, least recently used dropped first. Safe to
    share between threads; a result is worked out outside the lock (two threads asking
    the same new text may both work it out, and agree)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[str, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str, make: Callable[[str], T]) -> T:
        with self._lock:
            if text in self._kept:
                self._kept.move_to_end(text)
                return self._kept[text]
        result = make(text)
        with self._lock:
            self._kept[text] = result
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return result
