"""How many threads an engine may start: never more than the CPUs this process may run on.

llama.cpp runs each step on an OpenMP team whose threads wait for each other at every
layer by spinning. Given more threads than CPUs (a kiosk box pinned to one core, a
container with ``--cpuset-cpus``, ``taskset``, one test worker per core), a thread
spins while the one it waits for cannot run: on one core, two threads made each token
a fifth slower than one (`voice bench reply`, docs/performance.md).
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs the scheduler lets this process use (its affinity, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def thread_budget(wanted: int) -> int:
    """``wanted`` threads, but at most one a usable CPU (and at least one)."""
    return max(1, min(wanted, usable_cpus()))


def keep_blas_to(threads: int = 1) -> None:
    """NumPy's BLAS on at most ``threads`` threads in this process from now on.

    Why: OpenBLAS starts a thread per CPU and, for a product it judges big enough (the
    mel filterbank in front of every Whisper pass), wakes them all; they spin on after
    it while CTranslate2's own team needs the same cores. `voice bench asr` on two
    CTranslate2 threads, 2 AVX2 cores: a real-time factor of 0.499 with BLAS as it
    starts, 0.389 with BLAS on one thread (docs/performance.md). No product of ours
    gains from BLAS threads: the sentence encoder's float32 pass holds itself to one."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:  # without it BLAS keeps its own thread count
        return
    threadpool_limits(limits=thread_budget(threads), user_api="blas")
