"""Readiness and drain bookkeeping (pure logic; the real drain is in
tests/component/test_serve_drain.py)."""

from __future__ import annotations

import asyncio
import time
from http import HTTPStatus

from voice.serve.lifecycle import Lifecycle


def test_ready_until_full_or_draining() -> None:
    life = Lifecycle(drain_s=5)
    status, body = life.readiness({"sessions": 1, "sessions_opening": 0, "max_sessions": 2})
    assert status == HTTPStatus.OK and body["status"] == "ready"
    status, body = life.readiness({"sessions": 1, "sessions_opening": 1, "max_sessions": 2})
    assert status == HTTPStatus.SERVICE_UNAVAILABLE and body["status"] == "full"
    assert "2 sessions" in body["reason"]
    assert life.begin_drain() and not life.begin_drain()  # the second is no new drain
    status, body = life.readiness({"sessions": 0, "max_sessions": 2})
    assert status == HTTPStatus.SERVICE_UNAVAILABLE and body["status"] == "draining"
    assert 0 < body["drain_s_left"] <= 5


def test_drained_when_the_last_connection_closes_or_at_the_deadline() -> None:
    async def main() -> tuple[float, float]:
        life = Lifecycle(drain_s=30)
        life.opened()
        life.opened()
        life.begin_drain()
        waiting = asyncio.create_task(life.drained())
        life.closed()
        await asyncio.sleep(0.05)
        assert not waiting.done()
        started = time.monotonic()
        life.closed()
        await asyncio.wait_for(waiting, 2)
        closed_s = time.monotonic() - started
        stuck = Lifecycle(drain_s=0.1)
        stuck.opened()  # a connection that never closes
        stuck.begin_drain()
        started = time.monotonic()
        await stuck.drained(grace_s=0.1)
        return closed_s, time.monotonic() - started

    closed_s, stuck_s = asyncio.run(main())
    assert closed_s < 1.0 and 0.15 <= stuck_s < 2.0
