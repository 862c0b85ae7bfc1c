"""Wake phrases said by every voice at hand, and the noise to bury them in.

No recording of "Hey Jarvis" ships here, so the wake benchmark and tests make their
own: the bundled Piper voice at several paces and pitches (one voice file, several
speakers), and espeak-ng's English voices when ``espeak-ng`` is installed (a
formant synthesiser: a very different sound from Piper's). Mixing with the noise
corpus at a given SNR uses the speech's active level, not its mean over the padding.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE
from voice.audio.wav import read_wav

Float32Array = npt.NDArray[np.float32]

# (speaking_rate, pitch) of the bundled voice: slower and faster, deeper and higher.
PIPER_STYLES = ((1.0, 1.0), (0.8, 1.0), (1.25, 1.0), (1.0, 0.85), (1.0, 1.2), (0.9, 0.9))
ESPEAK_VOICES = ("en-us", "en-gb", "en-us+f3", "en-gb-scotland", "en-029", "en-us+m3")


@dataclass(frozen=True)
class Said:
    """One phrase by one voice: ``audio`` at 16 kHz."""

    voice: str
    text: str
    audio: Float32Array


class Voices:
    """Says texts in every available voice (Piper always; espeak-ng if installed)."""

    def __init__(self, piper_styles: tuple[tuple[float, float], ...] = PIPER_STYLES,
                 espeak_voices: tuple[str, ...] = ESPEAK_VOICES) -> None:  # fmt: skip
        from voice.speak.tts import PiperTts, TtsConfig

        self._piper = {
            style: PiperTts(TtsConfig(speaking_rate=style[0], pitch=style[1], threads=1))
            for style in piper_styles
        }
        self._espeak = espeak_voices if shutil.which("espeak-ng") else ()

    @property
    def names(self) -> list[str]:
        piper = [f"piper x{rate:g} pitch {pitch:g}" for rate, pitch in self._piper]
        return piper + [f"espeak-ng {v}" for v in self._espeak]

    def say(self, text: str) -> Iterator[Said]:
        for (rate, pitch), tts in self._piper.items():
            yield Said(f"piper x{rate:g} pitch {pitch:g}", text, tts.synthesize_all(text))
        for voice in self._espeak:
            yield Said(f"espeak-ng {voice}", text, espeak(text, voice))


def espeak(text: str, voice: str) -> Float32Array:
    """``text`` said by espeak-ng's ``voice``, at 16 kHz."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "said.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(out), text], check=True,
                       capture_output=True)  # fmt: skip
        return read_wav(out)


def active_rms(audio: Float32Array) -> float:
    """The RMS of the loudest 20 ms frames (those within 30 dB of the peak frame): the
    level of the speech itself, whatever silence surrounds it."""
    frame = SAMPLE_RATE // 50
    n = len(audio) // frame
    if n == 0:
        return float(np.sqrt(np.mean(audio**2))) if len(audio) else 0.0
    energy = np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1)
    loud = energy[energy >= energy.max() * 1e-3]
    return float(np.sqrt(np.mean(loud)))


def mix(speech: Float32Array, noise: Float32Array, snr_db: float, offset: int = 0) -> Float32Array:
    """``speech`` with ``noise`` (looped from ``offset``) under it at ``snr_db``."""
    if not len(noise):
        return speech
    idx = (np.arange(len(speech)) + offset) % len(noise)
    bed = noise[idx]
    gain = active_rms(speech) / max(active_rms(bed), 1e-9) / (10 ** (snr_db / 20))
    return np.clip(speech + gain * bed, -1.0, 1.0).astype(np.float32)


def padded(audio: Float32Array, lead_s: float = 0.5, tail_s: float = 1.0) -> Float32Array:
    return np.concatenate(
        [np.zeros(int(lead_s * SAMPLE_RATE), np.float32), audio,
         np.zeros(int(tail_s * SAMPLE_RATE), np.float32)]
    )  # fmt: skip
