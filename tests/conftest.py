"""Shared fixtures: the corpus copy in tests/corpus and the real ASR engine (loaded once)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from voice.bench.serve import ServerProcess as VoiceServer  # a real `voice serve`

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


# Greedy replies of bounded length: the same reply every run, so a barge-in scripted
# to land over a reply always finds one playing.
# Replies of up to five sentences (a spoken reply's default is two), so speech over
# one finds it still playing.
SERVER_ENV = {
    "VOICE_LLM_TEMPERATURE": "0",
    "VOICE_LLM_MAX_REPLY_TOKENS": "60",
    "VOICE_LLM_REPLY_SENTENCES": "5",
    "VOICE_LLM_REPLY_MAX_CHARS": "480",
    "VOICE_LLM_REPLY_MAX_AUDIO_S": "30",  # a long reply, as a "long" persona gets
}
SERVER_MAX_SESSIONS = 3


@pytest.fixture(scope="session")
def voice_server():  # type: ignore[no-untyped-def]
    server = VoiceServer(SERVER_MAX_SESSIONS, SERVER_ENV)
    yield server
    server.stop()


def _own_core() -> None:
    """Under ``pytest -n 2`` each worker keeps to a CPU of its own (``gw0`` the first,
    ``gw1`` the second), and every engine then starts one thread (``voice.cpus``):
    two workers' two-thread llama.cpp and Piper teams no longer wait at their
    barriers for threads the other worker's are keeping off the cores."""
    import os

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[int(worker[2:]) % len(cpus)]})


_own_core()
