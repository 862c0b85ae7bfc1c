"""Shared fixtures: the corpus copy in tests/corpus and the real ASR engine (loaded once)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).parent / "corpus"


class LoudIsSpeech:
    """A fake VAD for scripted timelines: a frame is speech when it is loud."""

    def is_speech(self, frame: np.ndarray) -> bool:
        return bool(np.abs(frame).max() > 1000)

    def reset(self) -> None:
        pass


def manifest() -> dict[str, dict[str, object]]:
    rows = [json.loads(line) for line in (CORPUS / "manifest.jsonl").read_text().splitlines()]
    return {Path(str(r["file"])).stem: r for r in rows}


def clip(name: str, lead_s: float = 0.5, tail_s: float = 0.0) -> np.ndarray:
    """A corpus clip as 16 kHz float audio, with silence before (and optionally after) it."""
    from voice.audio import read_wav

    row = manifest()[name]
    audio = read_wav(CORPUS / str(row["file"]))
    return np.concatenate(
        [
            np.zeros(int(lead_s * 16000), np.float32),
            audio,
            np.zeros(int(tail_s * 16000), np.float32),
        ]
    )


def reference(name: str) -> str:
    return str(manifest()[name]["text_normalized"])


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from voice.listen.whisper import WhisperEngine

    return WhisperEngine()


class VoiceServer:
    """A real ``voice serve`` in a subprocess, on a free loopback port."""

    def __init__(self, max_sessions: int, env: dict[str, str], port: int = 0) -> None:
        import os
        import socket
        import subprocess
        import sys
        import time
        import urllib.request

        self.port = port
        if not port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/ws"
        cmd = [sys.executable, "-m", "voice.cli", "serve", "--port", str(self.port),
               "--max-sessions", str(max_sessions)]  # fmt: skip
        self.proc = subprocess.Popen(cmd, env={**os.environ, **env})
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("voice serve did not start") from None
                time.sleep(0.2)

    def health(self) -> dict[str, object]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/healthz", timeout=5) as response:
            return dict(json.loads(response.read()))

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Until every earlier connection's session is closed."""
        import time

        deadline = time.monotonic() + timeout_s
        while self.health()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except Exception:
            self.proc.kill()


# Greedy replies of bounded length: the same reply every run, so a barge-in scripted
# to land over a reply always finds one playing.
SERVER_ENV = {"VOICE_LLM_TEMPERATURE": "0", "VOICE_LLM_MAX_REPLY_TOKENS": "60"}
SERVER_MAX_SESSIONS = 3


@pytest.fixture(scope="session")
def voice_server():  # type: ignore[no-untyped-def]
    server = VoiceServer(SERVER_MAX_SESSIONS, SERVER_ENV)
    yield server
    server.stop()


class PulseRig:
    """A private PulseAudio with a virtual microphone and speaker (see ../shared/RIGS.md):
    ``play`` speaks a WAV into the microphone at real time, ``record`` captures what the
    program played. Start it before importing sounddevice in the process under test."""

    def __init__(self, folder: Path) -> None:
        import os
        import subprocess
        import time

        self.folder = folder
        runtime = folder / "pulse"
        runtime.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "XDG_RUNTIME_DIR": str(folder),
            "PULSE_RUNTIME_PATH": str(runtime),
            "PULSE_SERVER": f"unix:{runtime}/native",
            "HOME": str(folder),
        }
        subprocess.run(
            ["pulseaudio", "--daemonize=yes", "--exit-idle-time=-1", "--system=false", "-n",
             "-L", f"module-native-protocol-unix auth-anonymous=1 socket={runtime}/native",
             "-L", "module-null-sink sink_name=vspk rate=16000 channels=1",
             "-L", "module-null-sink sink_name=vmic_feed rate=16000 channels=1",
             "-L", "module-remap-source master=vmic_feed.monitor source_name=vmic"],
            env=self.env, check=True, timeout=30,
        )  # fmt: skip
        self._procs: list[subprocess.Popen[bytes]] = []
        self.pactl("set-default-sink", "vspk")
        self.pactl("set-default-source", "vmic")
        for source in ("vspk.monitor", "vmic"):  # keep-alive readers: idle sinks lag 2 s
            self._procs.append(
                subprocess.Popen(
                    ["parec", "-d", source, "--latency-msec=10", "--raw"],
                    env=self.env,
                    stdout=subprocess.DEVNULL,
                )
            )
        time.sleep(1.0)

    def pactl(self, *args: str) -> str:
        import subprocess

        done = subprocess.run(["pactl", *args], env=self.env, check=True, timeout=10,
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout

    def play(self, wav: Path) -> None:
        """Speak ``wav`` into the virtual microphone (blocks for its duration)."""
        import subprocess

        subprocess.run(["paplay", "-d", "vmic_feed", str(wav)], env=self.env, check=True,
                       timeout=120)  # fmt: skip

    def record(self, wav: Path):  # type: ignore[no-untyped-def]
        """Start recording the virtual speaker into ``wav``; stop with ``.send_signal(2)``."""
        import subprocess

        proc = subprocess.Popen(
            ["parec", "-d", "vspk.monitor", "--file-format=wav", "--rate=16000",
             "--channels=1", str(wav)], env=self.env,
        )  # fmt: skip
        self._procs.append(proc)
        return proc

    def stop(self) -> None:
        import subprocess

        for proc in self._procs:
            proc.terminate()
        subprocess.run(["pulseaudio", "--kill"], env=self.env, timeout=10, check=False)
