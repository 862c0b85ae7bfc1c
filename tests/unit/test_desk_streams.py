"""The desk transport's device streams with a stand-in for sounddevice: what it does
when a callback stops (pure bookkeeping; the real PortAudio on virtual PulseAudio
devices is in tests/component/test_desk.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

import voice.transports.desk as desk


class Stream:
    def __init__(self, callback: Any, **options: Any) -> None:
        self.callback, self.active = callback, False

    def start(self) -> None:
        self.active = True

    def stop(self) -> None:
        self.active = False

    def close(self) -> None:
        pass


class SoundDevice:
    InputStream = OutputStream = Stream

    @staticmethod
    def query_devices(device: int) -> dict[str, float]:
        return {"default_samplerate": 16000.0}


@pytest.fixture
def audio(monkeypatch: pytest.MonkeyPatch) -> desk.DeskAudio:
    monkeypatch.setattr(desk, "import_sounddevice", lambda: SoundDevice)
    monkeypatch.setattr(desk, "NO_INPUT_S", 0.3)
    return desk.DeskAudio(0, 1)


def microphone(audio: desk.DeskAudio, seconds: float, speaker_dies_at: float) -> None:
    """The input callback at real time; the output callback only until it 'dies'."""
    start = time.monotonic()
    while (now := time.monotonic() - start) < seconds:
        audio._on_input(np.zeros((320, 1), np.float32), 320, None, None)
        if now < speaker_dies_at:
            audio._on_output(np.zeros((320, 1), np.float32), 320, None, None)
        time.sleep(0.02)


def test_a_speaker_that_stops_playing_is_a_clear_error(audio: desk.DeskAudio) -> None:
    with audio:
        threading.Thread(target=microphone, args=(audio, 3.0, 0.5), daemon=True).start()
        frames = 0
        with pytest.raises(desk.DeviceError, match="speaker stopped"):
            for _ in audio.frames(lambda: True):
                frames += 1
    assert frames > 10  # it ran while the speaker played


def test_the_echo_reference_does_not_lag_without_bound() -> None:
    """A speaker clock faster than the mic's: played audio piles up in the reference."""
    reference = desk.PlayedReference()
    for k in range(100):  # two seconds played, none taken yet
        reference.add(np.full(320, k, np.float32))
    assert reference.buffered == desk.MAX_REFERENCE_LAG
    oldest_kept = (100 * 320 - desk.MAX_REFERENCE_LAG) // 320
    assert reference.take(320)[0] == oldest_kept  # the newest were kept
    reference.take(desk.MAX_REFERENCE_LAG)
    assert not reference.take(320).any()  # a shortfall is silence
