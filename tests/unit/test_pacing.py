"""Downlink pacing: real time plus a small lead, and nothing stale after a clear."""

from __future__ import annotations

import numpy as np

from voice.serve.pacing import Pacer

RATE = 16000


def seconds(s: float) -> np.ndarray:
    return np.full(int(s * RATE), 0.1, dtype=np.float32)


def sent_s(frames: list[tuple[int, int, np.ndarray]]) -> float:
    return sum(len(f) for _, _, f in frames) / RATE


def test_a_reply_goes_out_at_real_time_after_a_small_lead() -> None:
    pacer = Pacer(RATE, lead_ms=200)
    pacer.add(1, seconds(3.0))
    first = pacer.due(0.0)
    assert abs(sent_s(first) - 0.2) < 0.021  # the lead, at once
    total = sent_s(first)
    for step in range(1, 101):  # one second, in 10 ms ticks
        total += sent_s(pacer.due(step * 0.01))
    assert abs(total - 1.2) < 0.021  # real time since then, plus the lead
    offsets = [offset for _, offset, _ in pacer.due(1.5)]
    assert offsets == sorted(offsets)


def test_offsets_count_samples_within_each_reply() -> None:
    pacer = Pacer(RATE, lead_ms=1000)
    pacer.add(1, seconds(0.1))
    pacer.add(1, seconds(0.1))
    pacer.add(2, seconds(0.05))
    frames = pacer.due(0.0)
    assert [(r, o) for r, o, _ in frames][-1] == (2, 640)
    assert pacer.queued_samples(1) == 3200


def test_pause_holds_the_audio_and_resume_continues_it() -> None:
    pacer = Pacer(RATE, lead_ms=100)
    pacer.add(1, seconds(2.0))
    pacer.due(0.0)
    pacer.pause(1, 0.05)
    assert pacer.due(1.0) == []
    pacer.resume(1, 1.05)
    # The client stood still while paused: it gets real time since resuming, not a burst.
    assert abs(sent_s(pacer.due(1.10)) - 0.1) < 0.021


def test_a_paused_reply_lets_the_sender_sleep() -> None:
    """While paused nothing is due, so the hint must not be "now" (a busy loop that
    took the event loop's thread for the whole pause)."""
    pacer = Pacer(RATE, lead_ms=100)
    pacer.add(1, seconds(2.0))
    pacer.due(0.0)
    assert pacer.next_due_in(0.5) == 0.0  # playing, and behind: send now
    pacer.pause(1, 0.5)
    assert pacer.next_due_in(1.5) >= 0.02


def test_clear_drops_the_reply_and_the_next_starts_with_a_fresh_lead() -> None:
    pacer = Pacer(RATE, lead_ms=200)
    pacer.add(1, seconds(2.0))
    pacer.due(0.0)
    pacer.clear(1, 0.1)
    assert pacer.idle and pacer.due(0.2) == []
    pacer.add(2, seconds(1.0))
    frames = pacer.due(0.3)
    assert {r for r, _, _ in frames} == {2}
    assert abs(sent_s(frames) - 0.2) < 0.021


def test_a_client_that_ran_dry_gets_a_new_lead() -> None:
    pacer = Pacer(RATE, lead_ms=200)
    pacer.add(1, seconds(0.1))
    pacer.due(0.0)
    pacer.add(1, seconds(1.0))  # the next sentence, 2 s later
    assert abs(sent_s(pacer.due(2.0)) - 0.2) < 0.021
