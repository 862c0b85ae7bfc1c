"""Piper TTS on the bundled voice: real synthesis, checked by ear (our own Whisper).

Timing assertions are ratios measured within one run (first chunk vs whole synthesis,
fast vs normal pace), never absolute times, so a loaded machine cannot fail them.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from voice.audio import read_wav
from voice.audio.format import sound_onset
from voice.errors import ModelNotFoundError, VoiceError
from voice.speak.tts import PiperTts, TtsConfig
from voice.stats import wer

SAY = "The weather is mild today. Please bring a warm coat for the evening."
THREE = (
    "Good morning. The weather today is mild, with a light breeze from the west. "
    "Later this afternoon there may be a few showers near the coast."
)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "voice.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def tts() -> PiperTts:
    return PiperTts(TtsConfig(output_rate=16000))


@pytest.fixture(scope="module")
def said(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`voice say` run once as a user would: the WAV it wrote and its summary line."""
    folder = tmp_path_factory.mktemp("say")
    result = run_cli("say", SAY, cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "say.wav", result.stdout


def test_say_is_understood_by_our_own_ears(said: tuple[Path, str], engine) -> None:  # type: ignore[no-untyped-def]
    path, _ = said
    heard = " ".join(engine.transcribe(read_wav(path), final=True).words)
    assert wer([(SAY, heard)]) <= 15.0, heard


def test_say_writes_a_valid_wav_at_the_voice_rate(said: tuple[Path, str]) -> None:
    path, stdout = said
    with wave.open(str(path), "rb") as wf:
        assert (wf.getnchannels(), wf.getsampwidth(), wf.getframerate()) == (1, 2, 22050)
        duration = wf.getnframes() / wf.getframerate()
    assert 2.0 < duration < 10.0
    line = stdout.strip()
    assert "\n" not in line and "say.wav" in line
    assert f"{duration:.2f} s" in line and "first audio" in line and "RTF" in line


def test_say_without_text_is_one_clear_line(tmp_path: Path) -> None:
    result = run_cli("say", "  ", "-o", str(tmp_path / "x.wav"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "empty" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.wav").exists()


def test_first_chunk_arrives_long_before_the_end(tts: PiperTts) -> None:
    start = time.perf_counter()
    stamps = []
    for chunk in tts.synthesize(THREE):
        assert chunk.dtype == np.float32 and chunk.ndim == 1 and chunk.size > 0
        stamps.append(time.perf_counter() - start)
    assert len(stamps) == 3  # one chunk per sentence, each handed out when rendered
    assert stamps[0] < 0.5 * stamps[-1], stamps


def test_cancel_stops_after_the_current_chunk(tts: PiperTts) -> None:
    full = tts.synthesize_all(THREE)
    stop = threading.Event()
    chunks = []
    for chunk in tts.synthesize(THREE, cancel=stop):
        chunks.append(chunk)
        stop.set()
    assert len(chunks) == 1
    assert sum(c.size for c in chunks) < 0.5 * full.size
    # A callable works too, and a cancel set before the start produces nothing.
    assert tts.synthesize_all(THREE, cancel=lambda: True).size == 0


def test_abort_cuts_a_sentence_short_from_another_thread(tts: PiperTts) -> None:
    import threading
    import time

    text = " ".join(["This one long sentence keeps the voice busy for quite a while"] * 4) + "."
    started = time.perf_counter()
    tts.synthesize_all(text)
    whole = time.perf_counter() - started

    done = threading.Event()

    def keep_aborting() -> None:  # from 30 ms on, whenever a model run is in progress
        time.sleep(0.03)
        while not done.is_set():
            tts.abort()
            time.sleep(0.005)

    aborter = threading.Thread(target=keep_aborting)
    started = time.perf_counter()
    aborter.start()
    try:
        with pytest.raises(Exception, match=r"(?i)terminate"):
            tts.synthesize_all(text)
        aborted = time.perf_counter() - started
    finally:
        done.set()
        aborter.join()
    assert aborted < whole / 2  # measured in the same run: it stopped, not finished
    assert tts.synthesize_all("Still fine.").size > 0  # the next run is unaffected


def test_each_sentence_starts_at_its_sound(tts: PiperTts) -> None:
    """Piper opens a sentence with up to ~80 ms of near-silence; the user would wait
    through it after the reply began to play. Cut to ``lead_in_ms`` before the sound,
    and nothing of the sound is lost."""
    as_rendered = PiperTts(TtsConfig(output_rate=16000, lead_in_ms=-1))
    texts = ("Hello there, how can I help?", "I think so.", "The capital is Paris.")
    rendered = [sound_onset(next(iter(as_rendered.synthesize(text)))) for text in texts]
    assert max(rendered) > 30 * 16, rendered  # what the user waited through before
    for text in texts:
        first = next(iter(tts.synthesize(text)))
        assert sound_onset(first) <= 10 * 16, text  # lead_in_ms = 10 at 16 kHz
        assert len(first) > 16000 * 0.3, text  # the sentence itself is all there


def test_faster_rate_gives_shorter_audio(tts: PiperTts) -> None:
    fast = PiperTts(TtsConfig(speaking_rate=1.5, output_rate=16000))
    normal_s = tts.synthesize_all(THREE).size / 16000
    fast_s = fast.synthesize_all(THREE).size / 16000
    assert 0.5 < fast_s / normal_s < 0.85, (fast_s, normal_s)


def test_only_speakable_text_is_spoken(tts: PiperTts) -> None:
    assert tts.sample_rate == 22050 and tts.output_rate == 16000
    assert tts.synthesize_all("```python\nprint('hi')\n```").size == 0
    assert tts.synthesize_all("").size == 0


def test_missing_or_broken_voice_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"nope\.onnx"):
        PiperTts(TtsConfig(voice=str(tmp_path / "nope.onnx")))
    (tmp_path / "lonely.onnx").write_bytes(b"x")
    with pytest.raises(ModelNotFoundError, match=r"lonely\.onnx\.json"):
        PiperTts(TtsConfig(voice=str(tmp_path / "lonely.onnx")))
    (tmp_path / "lonely.onnx.json").write_text("{}")
    with pytest.raises(VoiceError) as info:
        PiperTts(TtsConfig(voice=str(tmp_path / "lonely.onnx")))
    assert info.value.code == "model_load_failed"
