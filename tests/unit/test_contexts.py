"""The LLM context pool: never more contexts than sessions, however users come and go."""

from __future__ import annotations

import threading
import time

import pytest

from voice.runtime.contexts import ContextPool


def counting_pool(limit: int, wait_s: float = 2.0) -> tuple[ContextPool[int], list[int]]:
    made: list[int] = []

    def make() -> int:
        made.append(len(made))
        return made[-1]

    return ContextPool(make, limit, first=None, return_wait_s=wait_s), made


def test_contexts_are_made_on_demand_up_to_the_limit_and_reused() -> None:
    pool, made = counting_pool(2)
    a, b = pool.borrow(), pool.borrow()
    assert (a, b) == (0, 1) and pool.made == 2
    pool.give_back(a)
    assert pool.borrow() == a and len(made) == 2


def test_preload_makes_no_more_than_the_limit_and_counts_the_first() -> None:
    pool = ContextPool(lambda: "new", 3, first="loaded")
    pool.preload(5)
    assert pool.made == 3
    assert sorted(pool.borrow() for _ in range(3)) == ["loaded", "new", "new"]


def test_when_all_are_lent_a_borrower_waits_for_the_one_coming_back() -> None:
    """A user reconnecting while their old session is being finished gets its context."""
    pool, made = counting_pool(1)
    lent = pool.borrow()
    threading.Timer(0.1, pool.give_back, (lent,)).start()
    t0 = time.monotonic()
    assert pool.borrow() == lent
    assert 0.05 < time.monotonic() - t0 < 1.5
    assert made == [0]


def test_a_context_that_never_comes_back_costs_one_more_not_a_hang() -> None:
    pool, made = counting_pool(1, wait_s=0.05)
    pool.borrow()
    assert pool.borrow() == 1 and pool.made == 2 and made == [0, 1]


def test_a_failed_make_is_not_counted() -> None:
    calls = []

    def make() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise MemoryError("no room for the KV cache")
        return 7

    pool = ContextPool(make, 1)
    with pytest.raises(MemoryError):
        pool.borrow()
    assert pool.made == 0
    assert pool.borrow() == 7 and pool.made == 1
