"""Sample-rate conversion and downmixing.

A real band-limited resampler (soxr) is used: linear interpolation aliases,
which both Whisper and listeners hear. :class:`Resampler` keeps filter state
between chunks so a live stream resampled 20 ms at a time has no clicks at
chunk edges.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import soxr

from voice.errors import AudioFormatError

Float32Array = npt.NDArray[np.float32]


def to_mono(audio: npt.NDArray[np.floating]) -> Float32Array:
    """Average the channels of a (samples, channels) array; pass mono through."""
    arr = np.asarray(audio, dtype=np.float32)
    if arr.ndim == 1:
        return arr
    if arr.ndim != 2:
        raise AudioFormatError(f"expected 1 or 2 dimensions of audio, got {arr.ndim}")
    mono: Float32Array = arr.mean(axis=1, dtype=np.float32)
    return mono


def _check_rate(rate: int) -> None:
    if not 1000 <= rate <= 384_000:
        raise AudioFormatError(
            f"unsupported sample rate {rate} Hz",
            "Use a rate between 1 kHz and 384 kHz (8, 16, 44.1 and 48 kHz are typical).",
        )


def resample(audio: npt.NDArray[np.floating], from_rate: int, to_rate: int) -> Float32Array:
    """Resample a whole mono signal at once (files, synthesis output)."""
    _check_rate(from_rate)
    _check_rate(to_rate)
    arr = np.asarray(audio, dtype=np.float32)
    if from_rate == to_rate or arr.size == 0:
        return arr
    out = soxr.resample(arr, from_rate, to_rate, quality="HQ")
    return np.asarray(out, dtype=np.float32)


class Resampler:
    """Streaming resampler for live audio that arrives in small chunks."""

    def __init__(self, from_rate: int, to_rate: int) -> None:
        _check_rate(from_rate)
        _check_rate(to_rate)
        self.from_rate = from_rate
        self.to_rate = to_rate
        self._stream = (
            None
            if from_rate == to_rate
            else soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32", quality="HQ")
        )

    def process(self, chunk: npt.NDArray[np.floating], last: bool = False) -> Float32Array:
        arr = np.asarray(chunk, dtype=np.float32)
        if self._stream is None:
            return arr
        return np.asarray(self._stream.resample_chunk(arr, last=last), dtype=np.float32)
