"""Echo cancellation for speakers: remove the assistant's own voice from the mic.

On laptop speakers the microphone hears the reply; without cancellation the
assistant would take its own voice for a barge-in and interrupt itself. The
WebRTC audio processing module's echo canceller (the one browsers use, via
``aec-audio-processing``) is given what the speaker played (the reference)
and subtracts its echo from the microphone, adapting to the room and to the
delay between the two. Measured on a synthetic echo (the reply, 40 ms later,
at half level): -25.9 dBFS in, -74.6 dBFS out after 4 s of adaptation, at
about 11 ms of CPU per second of audio.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, pcm16_to_float, to_pcm16
from voice.errors import VoiceError

Float32Array = npt.NDArray[np.float32]


class WebRtcEchoCanceller:
    """Implements the session's ``EchoCanceller`` hook on 16 kHz frames of any length
    (it works in 10 ms blocks; a remainder waits for the next frame)."""

    def __init__(self, delay_ms: int = 40) -> None:
        try:
            from aec_audio_processing import AudioProcessor
        except ImportError as exc:
            raise VoiceError(
                "echo cancellation needs the aec-audio-processing package.",
                "Install it with `pip install aec-audio-processing`, or use "
                "--echo headset (headphones) or --echo half-duplex (speakers, no barge-in).",
                code="missing_dependency",
            ) from exc
        self._apm = AudioProcessor(
            enable_aec=True, enable_ns=False, enable_agc=False, enable_vad=False
        )
        self._apm.set_stream_format(SAMPLE_RATE, 1)
        self._apm.set_reverse_stream_format(SAMPLE_RATE, 1)
        self._apm.set_stream_delay(delay_ms)
        self._block = int(self._apm.get_frame_size())
        self._mic = np.zeros(0, dtype=np.float32)
        self._ref = np.zeros(0, dtype=np.float32)

    def process(self, mic: Float32Array, reference: Float32Array) -> Float32Array:
        """The microphone frame with the speaker's echo removed (same length, delayed by
        at most one 10 ms block at the start)."""
        self._mic = np.concatenate([self._mic, mic])
        self._ref = np.concatenate([self._ref, reference])
        out: list[Float32Array] = []
        n = self._block
        while len(self._mic) >= n:
            ref = self._ref[:n]
            if len(ref) < n:
                ref = np.concatenate([ref, np.zeros(n - len(ref), np.float32)])
            self._apm.process_reverse_stream(to_pcm16(ref))
            cleaned = self._apm.process_stream(to_pcm16(self._mic[:n]))
            out.append(pcm16_to_float(cleaned))
            self._mic, self._ref = self._mic[n:], self._ref[n:]
        done = np.concatenate(out) if out else np.zeros(0, np.float32)
        if len(done) < len(mic):  # keep the frame's length: pad the start once
            done = np.concatenate([np.zeros(len(mic) - len(done), np.float32), done])
        return done[-len(mic) :] if len(mic) else done


def make_echo_canceller() -> WebRtcEchoCanceller:
    return WebRtcEchoCanceller()


class EchoMeter:
    """Wraps the canceller (or none) and measures the microphone while the speaker
    plays: its level as heard, and after cancellation. While nobody talks over the
    reply, that is the echo and the residual echo."""

    PLAYING_RMS = 0.003  # the reference is louder than this: the speaker is playing

    def __init__(self, canceller: WebRtcEchoCanceller | None) -> None:
        self.canceller = canceller
        self.samples = 0
        self._raw = 0.0
        self._left = 0.0

    def process(self, mic: Float32Array, reference: Float32Array) -> Float32Array:
        out = self.canceller.process(mic, reference) if self.canceller is not None else mic
        if len(reference) and float(np.sqrt(np.mean(reference**2))) > self.PLAYING_RMS:
            self.samples += len(mic)
            self._raw += float(np.sum(mic.astype(np.float64) ** 2))
            self._left += float(np.sum(out.astype(np.float64) ** 2))
        return out

    def summary(self) -> str:
        if not self.samples:
            return "echo: the speaker did not play"

        def dbfs(energy: float) -> float:
            return 10.0 * float(np.log10(energy / self.samples + 1e-12))

        seconds = self.samples / SAMPLE_RATE
        return (
            f"echo: speaker playing {seconds:.1f} s; microphone {dbfs(self._raw):.1f} dBFS "
            f"as heard, {dbfs(self._left):.1f} dBFS after cancellation"
        )
