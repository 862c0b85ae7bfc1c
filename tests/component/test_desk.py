"""`voice listen` through a real audio path: PortAudio on a private PulseAudio with a
virtual microphone and speaker (../shared/RIGS.md). Corpus speech is played into the
microphone at real time; what `voice listen` plays is recorded from the speaker."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import PulseRig, clip

from voice.audio import read_wav, write_wav

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("pulseaudio") is None, reason="needs pulseaudio (.ci/run)"),
]

ENV = {"VOICE_LLM_TEMPERATURE": "0", "VOICE_LLM_MAX_REPLY_TOKENS": "60"}


class Listening:
    """`voice listen --json` in a subprocess; its events are collected as they come."""

    def __init__(self, rig: PulseRig, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voice.cli", "listen", "--json", *flags],
            env={**rig.env, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()
        self.wait(lambda: any("Listening" in line for line in self.errors), 90)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["type"] == kind]

    def wait(self, check: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if self.proc.poll() is not None:
                raise AssertionError(f"voice listen exited: {''.join(self.errors)}")
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        time.sleep(0.1)  # the readers drain the pipes
        return self.proc.returncode, "".join(self.errors)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pulse = PulseRig(tmp_path_factory.mktemp("pulse"))
    yield pulse
    pulse.stop()


def wav(tmp_path: Path, name: str, lead_s: float = 0.5, tail_s: float = 0.5) -> Path:
    path = tmp_path / f"{name}.wav"
    write_wav(path, clip(name, lead_s=lead_s, tail_s=tail_s), 16000)
    return path


def loud_seconds(audio: np.ndarray) -> float:
    return float((np.abs(audio) > 0.02).sum()) / 16000


def test_a_spoken_turn_gets_a_spoken_reply(rig: PulseRig, tmp_path: Path) -> None:
    listening = Listening(rig, "--echo", "headset")
    recording = rig.record(tmp_path / "speaker.wav")
    try:
        rig.play(wav(tmp_path, "cmu_arctic_axb_a0004"))
        listening.wait(lambda: listening.of("reply_end"), 60)
    finally:
        recording.send_signal(signal.SIGINT)
        recording.wait(10)
        code, err = listening.stop()
    (final,) = listening.of("final")
    assert "glad to see you" in final["text"].lower()
    (end,) = listening.of("reply_end")
    assert not end["interrupted"] and end["heard_text"] == end["text"].strip()
    assert code == 0 and "Traceback" not in err  # Ctrl-C exits cleanly
    played = read_wav(tmp_path / "speaker.wav")
    assert loud_seconds(played) > 0.5  # the reply really came out of the speaker


def test_speaking_over_the_reply_stops_it(rig: PulseRig, tmp_path: Path) -> None:
    listening = Listening(rig, "--echo", "headset")
    recording = rig.record(tmp_path / "speaker.wav")
    try:
        rig.play(wav(tmp_path, "ljspeech_LJ001-0008"))
        listening.wait(lambda: listening.of("playback_start"), 60)
        time.sleep(1.0)
        rig.play(wav(tmp_path, "speechcommands_stop_6a27a9bf", lead_s=0.0))
        listening.wait(lambda: listening.of("interrupted"), 20)
        time.sleep(2.0)
    finally:
        recording.send_signal(signal.SIGINT)
        recording.wait(10)
        listening.stop()
    assert listening.of("interrupted"), listening.events
    (end,) = [e for e in listening.of("reply_end") if e["reply_id"] == 1]
    assert end["interrupted"]
    played = read_wav(tmp_path / "speaker.wav")
    quiet_from = len(played) - int(1.5 * 16000)  # the last 1.5 s, well after the stop
    assert loud_seconds(played[quiet_from:]) < 0.05


def test_no_devices_is_a_clear_message_not_a_traceback(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PULSE_SERVER": f"unix:{tmp_path}/none"}  # no sound server there
    done = subprocess.run(
        [sys.executable, "-m", "voice.cli", "listen"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "device" in done.stderr and "voice devices" in done.stderr
