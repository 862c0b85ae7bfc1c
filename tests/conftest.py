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
