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
from voice.conversation.actions import Play


class Stream:
    def __init__(self, callback: Any, **options: Any) -> None:
        self.callback, self.active = callback, False

    def start(self) -> None:
        self.active = True

    def stop(self) -> None:
        self.active = False

    def abort(self) -> None:
        self.active = False

    def close(self) -> None:
        pass


class StuckStream(Stream):
    """A stream whose device failed: its abort never returns (PortAudio 19.6's ALSA
    error loop, which the abort waits on)."""

    released = threading.Event()

    def abort(self) -> None:
        self.released.wait()


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


def test_the_streams_close_and_nothing_is_left_open(audio: desk.DeskAudio) -> None:
    with audio:
        assert audio._in.active and audio._out.active
    assert not audio._in.active and not audio._out.active
    assert not desk.streams_left_open()


def test_a_stream_that_will_not_close_ends_the_session_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class StuckDevice(SoundDevice):
        InputStream = StuckStream

    monkeypatch.setattr(desk, "import_sounddevice", lambda: StuckDevice)
    monkeypatch.setattr(desk, "CLOSE_DEADLINE_S", 0.2)
    monkeypatch.setattr(desk, "_streams_left_open", 0)
    start = time.monotonic()
    try:
        with desk.DeskAudio(0, 1):
            pass
        assert time.monotonic() - start < 2.0  # the deadline, not the stuck abort
        assert desk.streams_left_open()  # the CLI ends its process without PortAudio's exit
    finally:
        StuckStream.released.set()


def test_the_cli_ends_its_process_itself_when_a_stream_was_left_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import voice.cli as cli

    exits: list[int] = []
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    monkeypatch.setattr(desk, "list_devices", lambda: [])
    assert cli.main(["devices"]) == 1 and exits == []  # nothing left open: a normal exit
    monkeypatch.setattr(desk, "_streams_left_open", 1)
    cli.main(["devices"])
    assert exits == [1]  # the same status, without PortAudio's clean-up


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


def steady(reference: desk.PlayedReference, frames: int, level: float = 0.0) -> list[int]:
    """Play and take ``frames`` frames (played two at a time, as PulseAudio's callback
    does); the backlog after each take."""
    left = []
    for k in range(frames):
        if k % 2 == 0:
            reference.add(np.full(640, level, np.float32))
        reference.take(320)
        left.append(reference.buffered)
    return left


def test_a_backlog_from_a_slow_start_is_dropped_in_quiet() -> None:
    """The speaker ran 10 frames before the mic's first: that backlog would put every
    reference 200 ms behind where it was; after a quiet second it is gone."""
    reference = desk.PlayedReference()
    reference.add(np.zeros(10 * 320, np.float32))
    before = steady(reference, desk.TRIM_WINDOW - 2)
    assert min(before) >= 9 * 320 and reference.trimmed == 0  # not judged before a second
    after = steady(reference, 100)
    assert reference.trimmed > 0
    assert max(after[-50:]) <= 2 * desk.REFERENCE_SLACK  # the floor, and no shortfall
    assert min(after[-50:]) >= 0


def test_the_reference_is_not_realigned_while_the_speaker_plays() -> None:
    reference = desk.PlayedReference()
    reference.add(np.full(10 * 320, 0.1, np.float32))
    steady(reference, 200, level=0.1)
    assert reference.trimmed == 0


def test_a_late_speaker_callback_is_waited_for_not_filled_with_silence(
    audio: desk.DeskAudio,
) -> None:
    """Filling a late reference with silence would shift all later references."""
    block = np.zeros((320, 1), np.float32)
    with audio:
        frames = audio.frames(lambda: True)
        audio._on_output(block, 320, None, None)
        audio._on_input(block, 320, None, None)
        assert not next(frames)[1].any()  # the first frame's reference: silence played
        audio._on_input(block, 320, None, None)
        audio.speaker.act(Play(1, 0, np.full(320, 0.5, np.float32)))
        late = threading.Timer(0.02, audio._on_output, (block, 320, None, None))
        late.start()
        _, reference = next(frames)  # its reference comes 20 ms after the mic's block
    assert np.allclose(reference, 0.5)


def test_a_late_block_keeps_its_place_while_the_speaker_plays() -> None:
    """Handing out silence for a late block must not shift every later reference."""
    reference = desk.PlayedReference()
    reference.add(np.arange(1, 641, dtype=np.float32))
    reference.take(320)
    reference.take(320)
    assert not reference.take(320).any()  # samples 641-960 are late: silence for now
    reference.add(np.arange(641, 1281, dtype=np.float32))  # they come, with the next
    assert reference.take(320)[0] == 961  # the next frame gets what it would have


def test_once_the_speaker_has_played_the_alignment_is_final() -> None:
    """The canceller keeps its filter from reply to reply: a realignment in a quiet
    spell would leak the next reply's echo."""
    reference = desk.PlayedReference()
    reference.add(np.full(320, 0.1, np.float32))
    reference.take(320)  # a reply (a greeting) played
    reference.add(np.zeros(10 * 320, np.float32))
    steady(reference, 3 * desk.TRIM_WINDOW)
    assert reference.trimmed == 0
    reference.take(20 * 320)  # short for good, in quiet
    reference.add(np.arange(1, 641, dtype=np.float32))
    assert not reference.take(320).any()  # still skipped: the alignment is kept


def test_xruns_are_counted_by_kind_and_reported(audio: desk.DeskAudio) -> None:
    assert "no overflows or underflows" in audio.devices_summary()
    block = np.zeros((320, 1), np.float32)
    audio._on_input(block, 320, None, "input overflow")
    audio._on_input(block, 320, None, "input overflow")
    audio._on_output(block, 320, None, "output underflow, priming output")
    summary = audio.devices_summary()
    assert summary.startswith("devices: ")
    assert "; 2 x input overflow, 1 x output underflow, 1 x priming output (" in summary
    assert "echo" in summary  # says why it matters


def six_frames(audio: desk.DeskAudio) -> None:
    """Take six frames from the streams, the callbacks run at real time meanwhile."""
    with audio:
        threading.Thread(target=microphone, args=(audio, 0.3, 1.0), daemon=True).start()
        for frames, _ in enumerate(audio.frames(lambda: True)):
            if frames == 5:
                break


def test_each_frame_feeds_the_drift_measure_and_its_skew_reaches_the_reference(
    audio: desk.DeskAudio,
) -> None:
    assert "too little echo (0 lags) to compare the clocks" in audio.devices_summary()
    audio.drift.skew = 1e-4  # as if measured: nothing plays here, so it stays
    six_frames(audio)
    assert audio.reference.skew == 1e-4
    assert audio.drift._at == 6 * 320  # every frame was seen


def test_with_the_correction_off_the_drift_is_measured_but_not_made_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(desk, "import_sounddevice", lambda: SoundDevice)
    audio = desk.DeskAudio(0, 1, correct_drift=False)
    audio.drift.skew = 1e-4
    six_frames(audio)
    assert audio.reference.skew == 0.0 and audio.drift._at == 6 * 320


def test_the_bench_reads_the_drift_from_the_devices_line(audio: desk.DeskAudio) -> None:
    from voice.bench.desk import DEVICES, DRIFT

    audio.drift.skew, audio.reference.drift_corrected = -73e-6, -48
    audio.drift._lags = [(float(t), 1000.0) for t in range(0, 40, 2)]  # 20 lags over 38 s
    line = audio.devices_summary()
    found = DRIFT.search(line)
    assert found and found.groups() == ("-73", "20", "-48"), line
    assert DEVICES.search(line)


def test_where_nothing_is_cancelled_no_drift_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(desk, "import_sounddevice", lambda: SoundDevice)
    audio = desk.DeskAudio(0, 1, measure_drift=False)
    six_frames(audio)
    assert audio.drift is None and audio.reference.skew == 0.0
    assert "drift not measured (nothing is cancelled)" in audio.devices_summary()
