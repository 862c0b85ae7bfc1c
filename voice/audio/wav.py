"""WAV file reading and writing, to and from the internal format.

Only the standard library's ``wave`` is used, so reading a file needs no
native audio library. Integer PCM of 8, 16, 24 and 32 bits is read; anything
else (float or compressed WAV) gets an error that says how to convert it.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, to_pcm16
from voice.audio.resample import resample, to_mono
from voice.errors import AudioFormatError

Float32Array = npt.NDArray[np.float32]

_CONVERT_HINT = (
    "Convert it to 16-bit PCM WAV, e.g. `sox in.wav -b 16 out.wav` "
    "or `ffmpeg -i in -c:a pcm_s16le out.wav`."
)


def _decode(raw: bytes, width: int, channels: int) -> Float32Array:
    if width == 1:  # 8-bit WAV is unsigned
        data = (np.frombuffer(raw, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        data = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        ints = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        ints = np.where(ints >= 1 << 23, ints - (1 << 24), ints)
        data = ints.astype(np.float32) / float(1 << 23)
    elif width == 4:
        data = np.frombuffer(raw, dtype="<i4").astype(np.float32) / float(1 << 31)
    else:
        raise AudioFormatError(f"unsupported sample width of {width} bytes.", _CONVERT_HINT)
    return data.reshape(-1, channels) if channels > 1 else data


def read_wav_native(path: str | Path) -> tuple[Float32Array, int]:
    """Read a WAV as float32 (samples,) or (samples, channels) at its own rate."""
    try:
        with wave.open(str(path), "rb") as wf:
            channels, width, rate = wf.getnchannels(), wf.getsampwidth(), wf.getframerate()
            raw = wf.readframes(wf.getnframes())
    except FileNotFoundError:
        raise AudioFormatError(f"audio file not found: {path}", "Check the path.") from None
    except (wave.Error, EOFError) as exc:
        why = str(exc) or "the file ends before its header does"  # EOFError says nothing
        raise AudioFormatError(f"cannot read {path} as PCM WAV ({why}).", _CONVERT_HINT) from exc
    if channels < 1 or rate <= 0:
        raise AudioFormatError(f"{path} has a broken header.", _CONVERT_HINT)
    return _decode(raw, width, channels).astype(np.float32, copy=False), rate


def read_wav(path: str | Path, rate: int = SAMPLE_RATE) -> Float32Array:
    """Read any PCM WAV as mono float32 at ``rate`` (downmixed, resampled)."""
    audio, native_rate = read_wav_native(path)
    return resample(to_mono(audio), native_rate, rate)


def write_wav(path: str | Path, audio: npt.NDArray[np.floating], rate: int = SAMPLE_RATE) -> None:
    """Write float audio, mono (samples,) or multi-channel (samples, channels), as PCM16."""
    arr = np.asarray(audio, dtype=np.float32)
    channels = 1 if arr.ndim == 1 else arr.shape[1]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as wf:
        wf.setnchannels(channels)
        wf.setsampwidth(2)
        wf.setframerate(rate)
        wf.writeframes(to_pcm16(arr))
