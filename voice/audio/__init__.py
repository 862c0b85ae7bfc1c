"""Audio primitives: the internal format, conversion, resampling and WAV I/O.

Inside voice, audio is always 16 kHz mono. Positions are counted in samples
of that stream (audio time), never in wall-clock seconds, so the same code runs
faster than real time on files and at real time on devices.
"""

from voice.audio.format import (
    FRAME_MS,
    FRAME_SAMPLES,
    SAMPLE_RATE,
    float_to_pcm16,
    ms_to_samples,
    pcm16_to_float,
    samples_to_ms,
)
from voice.audio.resample import Resampler, resample, to_mono
from voice.audio.wav import read_wav, write_wav

__all__ = [
    "FRAME_MS",
    "FRAME_SAMPLES",
    "SAMPLE_RATE",
    "Resampler",
    "float_to_pcm16",
    "ms_to_samples",
    "pcm16_to_float",
    "read_wav",
    "resample",
    "samples_to_ms",
    "to_mono",
    "write_wav",
]
