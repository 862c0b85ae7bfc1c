"""Audio core: conversions, resampling, downmixing, WAV I/O and its errors."""

import wave
from pathlib import Path

import numpy as np
import pytest

from voice.audio import Resampler, float_to_pcm16, pcm16_to_float, read_wav, resample, write_wav
from voice.audio.format import sound_onset
from voice.audio.wav import read_wav_native
from voice.errors import AudioFormatError


def tone(freq: float, rate: int, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def dominant_frequency(audio: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.argmax(spectrum) * rate / len(audio))


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_resample_keeps_pitch_and_length(rate: int) -> None:
    out = resample(tone(440, rate), rate, 16000)
    assert abs(len(out) - 16000) <= 2
    assert abs(dominant_frequency(out, 16000) - 440) < 3


def test_downsampling_removes_content_above_the_new_nyquist() -> None:
    out = resample(tone(12000, 48000), 48000, 16000)  # 12 kHz cannot exist at 16 kHz
    assert np.sqrt(np.mean(out[1000:-1000] ** 2)) < 0.01  # linear interpolation would alias it


def test_streaming_resampler_matches_whole_signal() -> None:
    signal = tone(300, 48000)
    resampler = Resampler(48000, 16000)
    pieces = [resampler.process(signal[i : i + 960]) for i in range(0, len(signal), 960)]
    pieces.append(resampler.process(np.zeros(0, np.float32), last=True))
    streamed = np.concatenate(pieces)
    whole = resample(signal, 48000, 16000)
    n = min(len(streamed), len(whole)) - 200
    assert abs(len(streamed) - len(whole)) <= 2
    assert np.corrcoef(streamed[200:n], whole[200:n])[0, 1] > 0.999


def test_pcm16_round_trip_and_clipping() -> None:
    x = np.array([0.0, 0.5, -0.5, 2.0, -2.0], np.float32)
    pcm = float_to_pcm16(x)
    assert pcm.tolist()[3:] == [32767, -32768]
    assert np.allclose(pcm16_to_float(pcm)[:3], x[:3], atol=1e-4)
    assert np.allclose(pcm16_to_float(pcm.tobytes()), pcm16_to_float(pcm))


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_wav_widths_read_back(tmp_path: Path, width: int) -> None:
    signal = tone(440, 16000, 0.2)
    path = tmp_path / f"w{width}.wav"
    scale = {1: 127, 2: 32767, 3: 8388607, 4: 2147483647}[width]
    ints = np.round(signal * scale).astype(np.int64)
    if width == 1:
        raw = (ints + 128).astype(np.uint8).tobytes()
    elif width == 3:
        raw = b"".join(int(v).to_bytes(3, "little", signed=True) for v in ints)
    else:
        raw = ints.astype({2: "<i2", 4: "<i4"}[width]).tobytes()
    with wave.open(str(path), "wb") as wf:
        wf.setnchannels(1)
        wf.setsampwidth(width)
        wf.setframerate(16000)
        wf.writeframes(raw)
    back = read_wav(path)
    assert np.max(np.abs(back - signal)) < 0.02


def test_stereo_is_downmixed_and_resampled(tmp_path: Path) -> None:
    left, right = tone(440, 44100), np.zeros(44100, np.float32)
    write_wav(tmp_path / "s.wav", np.stack([left, right], axis=1), 44100)
    native, rate = read_wav_native(tmp_path / "s.wav")
    assert native.shape == (44100, 2) and rate == 44100
    mono = read_wav(tmp_path / "s.wav")
    assert abs(len(mono) - 16000) <= 2
    assert 0.2 < np.max(np.abs(mono)) < 0.3  # the average of the two channels


def test_unreadable_files_give_clear_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really a wav")
    with pytest.raises(AudioFormatError, match="16-bit PCM"):
        read_wav(bad)
    with pytest.raises(AudioFormatError, match="not found"):
        read_wav(tmp_path / "missing.wav")
    (tmp_path / "text.wav").write_text("hello")  # too short for a header: says so
    with pytest.raises(AudioFormatError, match=r"PCM WAV \(the file ends before"):
        read_wav(tmp_path / "text.wav")
    with pytest.raises(AudioFormatError, match="sample rate"):
        resample(np.zeros(10, np.float32), 0, 16000)


def test_byte_swapped_speech_is_told_from_speech_noise_and_silence() -> None:
    from conftest import clip

    from voice.audio.checks import looks_byte_swapped
    from voice.audio.format import float_to_pcm16

    speech = float_to_pcm16(clip("cmu_arctic_axb_a0004", lead_s=0.0)[:16000])
    assert looks_byte_swapped(speech) is False
    assert looks_byte_swapped(speech.byteswap()) is True
    softer = float_to_pcm16(clip("cmu_arctic_axb_a0004", lead_s=0.0)[:16000] * 0.3)
    assert looks_byte_swapped(softer.byteswap()) is True
    noise = np.random.default_rng(1).normal(0, 3000, 16000).astype(np.int16)
    assert looks_byte_swapped(noise) is False and looks_byte_swapped(noise.byteswap()) is False
    assert looks_byte_swapped(np.zeros(16000, np.int16)) is None
    assert looks_byte_swapped(speech[:100]) is None


def test_a_dc_offset_is_no_sound_to_the_level() -> None:
    from voice.audio.format import level_db

    tone = 0.1 * np.sin(np.linspace(0, 40 * np.pi, 320)).astype(np.float32)
    assert abs(level_db(tone + 0.25) - level_db(tone)) < 0.01
    assert level_db(np.full(320, 0.25, np.float32)) < -150


def test_a_click_in_half_a_frame_is_3_db_louder_than_the_frame_says() -> None:
    from voice.audio.format import burst_level_db, level_db

    frame = np.zeros(320, np.float32)
    frame[200:] = 0.1 * np.sin(np.linspace(0, 12 * np.pi, 120)).astype(np.float32)  # all late
    assert abs(burst_level_db(frame) - level_db(frame) - 3.0) < 0.5
    steady = 0.1 * np.sin(np.linspace(0, 40 * np.pi, 320)).astype(np.float32)
    assert abs(burst_level_db(steady) - level_db(steady)) < 0.1


def test_the_sound_begins_at_the_first_sample_over_the_level() -> None:
    quiet = np.full(800, 0.001, dtype=np.float32)  # dither, a synthesizer's near-silence
    loud = np.sin(np.linspace(0, 60, 1600)).astype(np.float32) * 0.5
    assert sound_onset(np.concatenate([quiet, loud])) == 800 + int(np.argmax(np.abs(loud) > 0.005))
    assert sound_onset(quiet) == len(quiet)  # no sound at all
    assert sound_onset(np.zeros(0, dtype=np.float32)) == 0
