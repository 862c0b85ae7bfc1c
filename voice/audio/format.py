"""The internal audio format and conversions between sample encodings.

16 kHz is what Whisper and webrtcvad want; 20 ms frames are the unit the VAD
classifies and transports send, so everything downstream agrees on one clock.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
FRAME_MS = 20
FRAME_SAMPLES = SAMPLE_RATE * FRAME_MS // 1000

Float32Array = npt.NDArray[np.float32]
# -46 dBFS: below any speech sound, above a synthesizer's near-silence and dither.
ONSET_LEVEL = 0.005
Int16Array = npt.NDArray[np.int16]


def ms_to_samples(ms: float, rate: int = SAMPLE_RATE) -> int:
    return round(ms * rate / 1000.0)


def samples_to_ms(samples: int, rate: int = SAMPLE_RATE) -> float:
    return samples * 1000.0 / rate


def pcm16_to_float(pcm: npt.NDArray[np.int16] | bytes) -> Float32Array:
    """PCM16 (array or little-endian bytes) to float32 in [-1, 1)."""
    if isinstance(pcm, bytes | bytearray | memoryview):
        pcm = np.frombuffer(pcm, dtype="<i2")
    return (pcm.astype(np.float32) / 32768.0).astype(np.float32, copy=False)


def float_to_pcm16(audio: npt.NDArray[np.floating]) -> Int16Array:
    """float in [-1, 1] to PCM16, clipping rather than wrapping around on overload."""
    scaled = np.clip(np.asarray(audio, dtype=np.float32) * 32768.0, -32768.0, 32767.0)
    pcm: Int16Array = np.round(scaled).astype(np.int16)
    return pcm


def to_pcm16(audio: npt.NDArray[np.floating]) -> bytes:
    """Float samples as PCM16 little-endian bytes: the WebSocket protocol's wire format
    both ways, and what WebRTC's echo canceller takes (so it lives here, below both)."""
    return float_to_pcm16(audio).astype("<i2").tobytes()


def sound_onset(audio: npt.NDArray[np.floating], level: float = ONSET_LEVEL) -> int:
    """The index of the first sample louder than ``level`` (full scale 1.0): where the
    sound begins; ``len(audio)`` when none is."""
    loud = np.abs(np.asarray(audio, dtype=np.float32)) > level
    return int(np.argmax(loud)) if loud.any() else len(audio)


SILENCE_DB = -180.0  # the level of no sound at all: finite, so it compares and averages


def level_db(audio: npt.NDArray[np.floating]) -> float:
    """The level of the sound in dBFS: RMS with the mean taken out, since a DC offset
    (a cheap microphone, a bad driver) is no sound; silence is ``SILENCE_DB``."""
    if not len(audio):
        return SILENCE_DB
    samples = np.asarray(audio, dtype=np.float64)
    rms = float(np.sqrt(np.mean(np.square(samples - samples.mean()))))
    return 20.0 * float(np.log10(max(rms, 1e-9)))


def burst_level_db(frame: npt.NDArray[np.floating]) -> float:
    """The level of the louder half of ``frame``: a plosive's release lasts 5-30 ms and
    often straddles two 20 ms frames, so each frame's RMS dilutes it by up to 3 dB. The
    release of the final "p" of "stop" sits ~30 dB under its vowel, right at the limit
    of what still counts as speech; measured whole-frame, it fell under in 1 of 20 frame
    phases, and Whisper, without it, heard "start"."""
    half = len(frame) // 2
    if not half:
        return level_db(frame)
    return max(level_db(frame[:half]), level_db(frame[half:]))
