"""`voice transcribe` as a user runs it: a subprocess on a stereo 44.1 kHz file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import clip

from voice.audio import resample, write_wav


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voice.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_transcribe_json_on_stereo_44k(tmp_path: Path) -> None:
    mono = resample(clip("librispeech_1089-134691-0000", tail_s=1.0), 16000, 44100)
    write_wav(tmp_path / "stereo.wav", np.stack([mono, mono * 0.5], axis=1), 44100)
    result = run_cli("transcribe", str(tmp_path / "stereo.wav"), "--json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "speech_start" and kinds[-1] == "final" and "speech_end" in kinds
    for event in events:
        assert {"type", "text", "audio_ms", "compute_ms"} <= event.keys()
    assert "could wait no longer" in events[-1]["text"].lower()
    assert [e["audio_ms"] for e in events] == sorted(e["audio_ms"] for e in events)


def test_bad_input_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "x.wav").write_text("not audio")
    result = run_cli("transcribe", str(tmp_path / "x.wav"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "16-bit PCM" in result.stderr
    result = run_cli("transcribe", "--asr-model", str(tmp_path), "--json")
    assert result.returncode == 2 and "model.bin" in result.stderr
