"""The shared playback queue and the played-samples ledger (pure logic)."""

from __future__ import annotations

import numpy as np

from voice.conversation.actions import Clear, Pause, Play, Resume
from voice.transports.playback import PlaybackQueue, PlayedLedger


def tone(n: int, value: float = 0.5) -> np.ndarray:
    return np.full(n, value, np.float32)


def test_replies_play_in_order_and_are_counted() -> None:
    queue = PlaybackQueue()
    queue.act(Play(1, 0, tone(300, 0.1)))
    queue.act(Play(2, 0, tone(300, 0.2)))
    out, moved = queue.take(400)
    assert moved == {1: 300, 2: 100}
    assert np.allclose(out[:300], 0.1) and np.allclose(out[300:], 0.2)
    out, moved = queue.take(400)
    assert moved == {2: 200} and np.allclose(out[200:], 0.0) and queue.idle
    assert queue.played == {1: 300, 2: 300}


def test_pause_holds_resume_continues_clear_drops_even_late_audio() -> None:
    queue = PlaybackQueue()
    queue.act(Play(1, 0, tone(500)))
    queue.take(100)
    queue.act(Pause(1))
    out, moved = queue.take(100)
    assert not moved and not out.any()
    queue.act(Resume(1))
    assert queue.take(100)[1] == {1: 100}
    queue.act(Clear(1))
    assert queue.idle
    assert queue.act(Play(1, 1, tone(100))) == 0  # a late chunk of a cleared reply
    assert queue.idle and queue.played == {1: 200}


def test_the_ledger_maps_output_samples_to_the_sessions_count() -> None:
    ledger = PlayedLedger()
    ledger.queued(1, 16000, 44100)
    ledger.queued(1, 8000, 22049)  # resampling rounded one sample away
    assert ledger.to16(1, 0) == 0
    assert ledger.to16(1, 44100) == round(44100 * 24000 / 66149)
    assert ledger.to16(1, 66149) == 24000  # all played is all played
    assert ledger.to16(7, 100) == 0  # a reply it never saw
