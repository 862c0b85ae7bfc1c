"""The thread budget: never more threads than the CPUs the process may run on."""

from __future__ import annotations

import os

import pytest

from voice.cpus import keep_blas_to, thread_budget, usable_cpus


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_kept_to_one_core_starts_one_thread_an_engine() -> None:
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(before)})
        assert usable_cpus() == 1
        assert thread_budget(2) == 1 and thread_budget(1) == 1
    finally:
        os.sched_setaffinity(0, before)
    assert usable_cpus() == len(before)
    assert thread_budget(len(before) + 3) == len(before)
    assert thread_budget(0) == 1  # at least one, whatever a setting says


def test_numpy_blas_is_held_to_one_thread() -> None:
    """Whisper's engine holds BLAS to one thread (its threads spun on the cores
    CTranslate2 needed); the limit stays for the process."""
    import numpy as np

    threadpoolctl = pytest.importorskip("threadpoolctl")
    keep_blas_to(1)
    np.ones((64, 64)) @ np.ones((64, 64))
    blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert blas and all(i["num_threads"] == 1 for i in blas), blas
