"""Giving freed memory back to the system, so a server's size follows its load.

glibc keeps memory that was freed (audio windows, mel features, sentence
audio: many large, differently sized buffers from several threads) for reuse
instead of returning it, and with several malloc arenas the kept memory only
grows: measured, 400 sessions opening and closing on fake engines left 290 MB
of resident heap, of which ``malloc_trim(0)`` gave back 270 MB; Whisper passes
over windows of every length left 140 MB that a trim returns. The engine
threads (a session's, and the server's hub, whose idle also follows every
session that closed) trim whenever they fall idle, at most every few seconds
(a trim takes about 1 ms here), so a long-running process's memory follows
what it is using now, not the most it ever used. Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from typing import Any

MIN_INTERVAL_S = 5.0  # a trim walks the whole heap (~1 ms): not after every job

_libc: Any = None
_last = 0.0


def release_freed_memory(now: float | None = None) -> bool:
    """Return freed heap to the system (glibc's ``malloc_trim``); rate-limited. True if
    a trim ran."""
    global _libc, _last
    now = time.monotonic() if now is None else now
    if now - _last < MIN_INTERVAL_S:
        return False
    _last = now
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim  # noqa: B018 (absent outside glibc)
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    _libc.malloc_trim(0)
    return True
