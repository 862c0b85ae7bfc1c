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

:func:`heap_usage` tells a leak from a heap that only keeps what was freed: a leak
grows the bytes held by live allocations (or Python's count of live blocks), while
kept free memory grows only the difference between the resident size and those.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import time
from dataclasses import dataclass
from typing import Any

MIN_INTERVAL_S = 5.0  # a trim walks the whole heap (~1 ms): not after every job

_libc: Any = None
_last = 0.0


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 and later): totals over every malloc arena."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                     "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    ]  # fmt: skip


def _load_libc() -> Any:
    """glibc through ctypes, or False elsewhere (where there is no ``malloc_trim``)."""
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim  # noqa: B018 (absent outside glibc)
        except (OSError, AttributeError):
            _libc = False
        else:
            if hasattr(_libc, "mallinfo2"):  # glibc 2.33 and later
                _libc.mallinfo2.restype = _MallInfo2
    return _libc


def release_freed_memory(now: float | None = None) -> bool:
    """Return freed heap to the system (glibc's ``malloc_trim``); rate-limited. True if
    a trim ran."""
    global _last
    now = time.monotonic() if now is None else now
    if now - _last < MIN_INTERVAL_S:
        return False
    _last = now
    libc = _load_libc()
    if not libc:
        return False
    libc.malloc_trim(0)
    return True


@dataclass(frozen=True)
class HeapUsage:
    """Where the process's heap stands now.

    Attributes:
        in_use_bytes: C heap held by live allocations (``malloc`` arenas and the large
            blocks glibc maps on their own); None where glibc's ``mallinfo2`` is absent.
        free_bytes: freed C heap that glibc keeps for reuse (what a trim could return,
            some of it already returned); None likewise.
        python_blocks: memory blocks Python's objects hold (``sys.getallocatedblocks``).
    """

    in_use_bytes: int | None
    free_bytes: int | None
    python_blocks: int


def heap_usage() -> HeapUsage:
    """The heap's live and kept-free bytes; walks every arena (well under a
    millisecond here), so it is for a metrics scrape, not for every frame."""
    libc = _load_libc()
    in_use = free = None
    if libc and hasattr(libc, "mallinfo2"):
        info = libc.mallinfo2()
        in_use, free = info.uordblks + info.hblkhd, info.fordblks
    return HeapUsage(in_use, free, sys.getallocatedblocks())
