"""Telling broken audio from sound: checks a transport runs on what a client sends.

Only one mistake is common and silent enough to need one: PCM16 sent big-endian.
Swapped bytes turn speech into loud broadband hiss that voice activity
detection takes for speech and Whisper turns into hallucinated words, so the
user gets replies to things they never said. Sound sampled at 16 kHz changes
little from one sample to the next (most of its energy is low in the band);
byte-swapped sound is close to white. So: if the samples as sent look white and
the same bytes swapped look like sound, the client has the byte order wrong.
White noise looks white either way, silence cannot tell, and neither is flagged.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice.audio.format import float_to_pcm16

Int16Array = npt.NDArray[np.int16]

MIN_LEVEL = 200.0  # mean |sample|: quieter audio is not judged
WHITE = 1.5  # roughness of the samples as sent at or above which they look white
SMOOTH = 0.6  # ... and of the swapped samples at or below which they look like sound


def roughness(samples: npt.NDArray[np.float64]) -> float:
    """Mean squared first difference over the variance: 2(1 - lag-1 correlation). About
    2 for white noise, well under 1 for speech and music at 16 kHz."""
    centred = samples - samples.mean()
    variance = float(np.mean(centred * centred))
    if variance <= 0.0:
        return 0.0
    step = np.diff(centred)
    return float(np.mean(step * step)) / variance


def looks_byte_swapped(pcm: Int16Array) -> bool | None:
    """True if ``pcm`` (as decoded little-endian) is sound sent big-endian, False if
    it is not, None if it is too quiet or short to tell."""
    if len(pcm) < 1600:
        return None
    as_sent = pcm.astype(np.float64)
    swapped = pcm.byteswap().astype(np.float64)
    if np.mean(np.abs(as_sent)) < MIN_LEVEL or not np.any(swapped != swapped[0]):
        return None  # quiet as sent (swapped speech is loud hiss), or constant
    return roughness(as_sent) >= WHITE and roughness(swapped) <= SMOOTH


class ByteOrderWatch:
    """Looks at a connection's first loud half second of audio, once: ``add`` returns
    True (once) if it was sent with the wrong byte order."""

    def __init__(self, window: int = 8000, give_up_after: int = 30 * 16000) -> None:
        self.window = window
        self.give_up_after = give_up_after  # samples seen without a loud window
        self._loud: list[Int16Array] = []
        self._have = 0
        self._seen = 0
        self.verdict: bool | None = None

    def add(self, audio: npt.NDArray[np.float32]) -> bool:
        if self.verdict is not None or self._seen > self.give_up_after:
            return False
        self._seen += len(audio)
        pcm = float_to_pcm16(audio)
        if np.mean(np.abs(pcm.astype(np.float64))) < MIN_LEVEL:
            return False
        self._loud.append(pcm)
        self._have += len(pcm)
        if self._have < self.window:
            return False
        self.verdict = looks_byte_swapped(np.concatenate(self._loud))
        self._loud = []
        return bool(self.verdict)
