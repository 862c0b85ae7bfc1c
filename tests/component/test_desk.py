"""`voice listen` through a real audio path: PortAudio on a private PulseAudio with a
virtual microphone and speaker (../shared/RIGS.md). Corpus speech is played into the
microphone at real time; what `voice listen` plays is recorded from the speaker."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import clip

from voice.audio import read_wav, write_wav
from voice.bench.pulse import ListenProcess, PulseRig

pytestmark = [
    pytest.mark.slow,
    pytest.mark.alone,
    pytest.mark.skipif(shutil.which("pulseaudio") is None, reason="needs pulseaudio (.ci/run)"),
]

ENV = {"VOICE_LLM_TEMPERATURE": "0", "VOICE_LLM_MAX_REPLY_TOKENS": "60"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pulse = PulseRig(tmp_path_factory.mktemp("pulse"))
    yield pulse
    pulse.stop()


def wav(tmp_path: Path, name: str, lead_s: float = 0.5, tail_s: float = 0.5) -> Path:
    path = tmp_path / f"{name}.wav"
    write_wav(path, clip(name, lead_s=lead_s, tail_s=tail_s), 16000)
    return path


def story(listening: ListenProcess) -> str:
    """What happened, short enough to survive pytest's report: turn-taking events with
    their audio times and texts, and the echo and xrun figures ``voice listen`` printed."""
    kinds = ("speech_start", "speech_end", "final", "reply_start", "playback_start",
             "paused", "resumed", "interrupted", "reply_end")  # fmt: skip
    lines = [
        f"{e.get('audio_ms')} {e['type']} {e.get('text', '')}".strip()
        for e in listening.events
        if e["type"] in kinds
    ]
    figures = [line.strip() for line in listening.errors]
    return "\n".join(lines + [line for line in figures if line.startswith(("echo:", "devices:"))])


def loud_seconds(audio: np.ndarray) -> float:
    return float((np.abs(audio) > 0.02).sum()) / 16000


def test_a_spoken_turn_gets_a_spoken_reply(rig: PulseRig, tmp_path: Path) -> None:
    listening = ListenProcess(rig, ENV, "--echo", "headset")
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
    listening = ListenProcess(rig, ENV, "--echo", "headset")
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
    assert loud_seconds(played[quiet_from:]) < 0.05, story(listening)


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


@pytest.mark.parametrize("echo", ["cancel", "headset"])
def test_on_speakers_the_reply_does_not_interrupt_itself_with_echo_cancellation(
    rig: PulseRig, tmp_path: Path, echo: str
) -> None:
    loop = rig.loop_speaker_into_mic()
    try:
        listening = ListenProcess(rig, ENV, "--echo", echo)
        rig.play(wav(tmp_path, "ljspeech_LJ001-0008"))
        listening.wait(lambda: listening.of("reply_end"), 60)
        listening.stop()
    finally:
        rig.pactl("unload-module", loop)
    (end, *_) = listening.of("reply_end")
    if echo == "cancel":
        assert not end["interrupted"] and not listening.of("interrupted"), story(listening)
    else:  # the comparison: without cancellation it hears itself
        print(
            "headset mode on speakers:",
            [
                e["type"]
                for e in listening.events
                if e["type"] in ("paused", "interrupted", "resumed")
            ],
        )


def test_on_speakers_the_user_still_barges_in_through_the_echo(
    rig: PulseRig, tmp_path: Path
) -> None:
    loop = rig.loop_speaker_into_mic()
    try:
        listening = ListenProcess(rig, ENV, "--echo", "cancel")
        rig.play(wav(tmp_path, "ljspeech_LJ001-0008"))
        listening.wait(lambda: listening.of("playback_start"), 60)
        time.sleep(1.0)
        # A real utterance at a normal level (about 2 dB above the echo here); a quiet
        # "stop" 10 dB under the echo is lost in it (see `voice bench desk`).
        rig.play(wav(tmp_path, "cmu_arctic_axb_a0005", lead_s=0.0))
        listening.wait(lambda: listening.of("interrupted"), 20)
        _, err = listening.stop()
    finally:
        rig.pactl("unload-module", loop)
    assert listening.of("interrupted"), listening.events
    assert "after cancellation" in err  # the echo figures are reported on exit
    assert "\ndevices: " in err  # and the devices' xruns (or that there were none)
    # Stopped mid-reply, the open generation is closed before the process exits (it
    # used to race the interpreter's shutdown of the model thread: a traceback).
    assert "Traceback" not in err, err


def test_a_sound_server_that_goes_away_mid_run_is_a_clear_message(tmp_path: Path) -> None:
    doomed = PulseRig(tmp_path / "doomed")
    try:
        listening = ListenProcess(doomed, ENV, "--echo", "headset")
    finally:
        doomed.stop()  # as if the device were unplugged
    try:
        code = listening.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        listening.proc.send_signal(signal.SIGUSR1)  # every thread's stack, to stderr
        time.sleep(1.0)
        listening.proc.kill()
        pytest.fail("voice listen did not exit:\n" + "".join(listening.errors))
    time.sleep(0.2)
    err = "".join(listening.errors)
    assert code == 2 and "Traceback" not in err, err
    # Whichever stream notices first names itself: the microphone, or the speaker (seen
    # once in a full run here, when a block was still queued from the microphone).
    stopped = "microphone stopped delivering audio" in err or "speaker stopped playing" in err
    assert stopped and "voice devices" in err, err
