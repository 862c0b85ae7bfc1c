"""The browser's playback worklet (web/playback-worklet.js), run in Node with the
AudioWorklet globals stubbed: its bookkeeping is pure logic on render quanta. The
whole page in a real browser is in tests/browser."""

from __future__ import annotations

from typing import Any

from harness import run_in_node

QUANTA_PER_S = 48000 // 128


def run_worklet(steps: list[list[Any]]) -> list[dict[str, Any]]:
    return list(run_in_node("worklet_harness.js", "playback-worklet.js", steps))


def audio(reply_id: int, seconds: float) -> list[Any]:
    return ["msg", {"type": "audio", "id": reply_id, "n": int(seconds * 16000)}]


def test_a_reply_is_started_played_and_reported() -> None:
    posted = run_worklet([audio(1, 0.5), ["run", QUANTA_PER_S]])
    assert [m["id"] for m in posted if m["type"] == "start"] == [1]
    played = [m["samples"] for m in posted if m["type"] == "played" and m["id"] == 1]
    assert played == sorted(played) and played[-1] == 8000


def test_a_new_session_starts_from_a_clean_slate() -> None:
    """After a reconnect the new session numbers its replies from 1 again: what the
    old session's replies 1-3 left behind (played in full, cleared, paused) must not
    drop, pause or miscount the new ones."""
    old_session = [
        audio(1, 0.5), ["run", QUANTA_PER_S],  # played in full
        audio(2, 0.5), ["run", 20], ["msg", {"type": "clear", "id": 2}],
        audio(3, 0.5), ["msg", {"type": "pause", "id": 3}], ["run", 20],
    ]  # fmt: skip
    before = len(run_worklet(old_session))
    new_session = [
        ["msg", {"type": "reset"}],
        audio(1, 0.2), audio(2, 0.2), audio(3, 0.2), ["run", QUANTA_PER_S],
    ]  # fmt: skip
    posted = run_worklet(old_session + new_session)[before:]
    assert [m["id"] for m in posted if m["type"] == "start"] == [1, 2, 3]
    last: dict[int, int] = {}
    for m in posted:
        if m["type"] == "played":
            last[m["id"]] = m["samples"]
    assert last == {1: 3200, 2: 3200, 3: 3200}  # counted from zero, each in full
