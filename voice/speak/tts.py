"""Text to speech with Piper, streamed sentence by sentence under a fixed thread budget.

Piper (VITS in ONNX) synthesizes one sentence per model run: espeak-ng turns the whole
text into phonemes grouped by sentence (cheap, milliseconds), then each sentence is
rendered in one ``InferenceSession.run``. :class:`PiperTts` yields each sentence's audio
the moment its run finishes, so the first sentence can play while the next is rendered,
and it checks a cancel signal between sentences, so a barge-in costs at most the one
sentence already being rendered.

Why we build the ONNX session ourselves: ``PiperVoice.load`` creates its session with
default ``SessionOptions``, which lets onnxruntime start one thread per core (and spin
them while idle). On a small machine that is shared with Whisper and the LLM, that
oversubscription slows every engine, so the TTS gets an explicit budget
(``tts.threads``, default 1) and never spins.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voice.audio import ms_to_samples, resample
from voice.audio.format import sound_onset
from voice.cpus import thread_budget
from voice.errors import ConfigError, VoiceError
from voice.speak.speakable import to_speakable

__all__ = ["Cancel", "PiperTts", "Synthesizer", "TtsConfig"]

Float32Array = npt.NDArray[np.float32]

# Something that says "stop": an Event set by the conversation on barge-in, or any
# callable (e.g. ``lambda: turn.cancelled``).
Cancel = threading.Event | Callable[[], bool] | None

MIN_RATE, MAX_RATE = 0.25, 4.0


class Synthesizer(Protocol):
    """What the reply pipeline and the engine lanes need of a voice (Piper, or a test's
    fake): text in, audio chunks out, stopping early when ``cancel`` is set."""

    def synthesize(
        self, text: str, cancel: threading.Event | None = None
    ) -> Iterator[Float32Array]: ...


@dataclass
class TtsConfig:
    """Settings of the ``[tts]`` section.

    Attributes:
        voice: ``default`` (the bundled en_US-joe-medium) or the path of a Piper ``.onnx``
            voice with its ``.onnx.json`` beside it.
        threads: onnxruntime intra-op threads, the engine's whole CPU budget.
        speaking_rate: 1.0 is the voice's own pace; 1.5 speaks 1.5 times as fast.
        pitch: 1.0 is the voice's own pitch; 0.8 is deeper, 1.2 higher (at the same
            pace): one voice file, several characters.
        output_rate: sample rate of the audio handed out; 16000 is the pipeline's
            internal rate, 0 means the voice's native rate (no resampling).
        first_chunk_max_chars: a reply's first spoken chunk is cut near this length
            (see :class:`voice.speak.chunking.SentenceChunker`); 0 turns it off.
        lead_in_ms: each sentence's audio starts this long before its first sound.
            Piper opens a sentence with 0-80 ms of near-silence, which the user waits
            through before a reply is heard (the first sample is played, the first
            sound is not); -1 keeps the audio as rendered.
    """

    voice: str = "default"
    threads: int = 1
    speaking_rate: float = 1.0
    pitch: float = 1.0
    output_rate: int = 16000
    first_chunk_max_chars: int = 24
    lead_in_ms: int = 10
    # Piper draws random noise for each sentence's timing and timbre: the same text is
    # ~2% longer or shorter each time. Off, it renders the same audio for the same
    # text (a repeatable simulation; the voice is a little flatter).
    variation: bool = True


def _cancel_check(cancel: Cancel) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if isinstance(cancel, threading.Event):
        return cancel.is_set
    return lambda: bool(cancel())


class PiperTts:
    """A loaded Piper voice that turns text into a stream of float32 mono audio chunks.

    Loading takes about a second, so build one per process and reuse it. Calls of
    :meth:`synthesize` may come from any thread but should not overlap: the engine is
    sized for one synthesis at a time.
    """

    def __init__(self, config: TtsConfig | None = None) -> None:
        import onnxruntime
        from piper import PiperConfig, PiperVoice, SynthesisConfig

        from voice.models import resolve_tts_voice

        self.config = config = config or TtsConfig()
        if config.threads < 1:
            raise ConfigError(f"tts.threads must be at least 1, not {config.threads}.")
        if not MIN_RATE <= config.speaking_rate <= MAX_RATE:
            raise ConfigError(
                f"tts.speaking_rate must be between {MIN_RATE} and {MAX_RATE}, "
                f"not {config.speaking_rate}.",
                "1.0 is the voice's own pace; 1.2 is a little faster.",
            )
        if config.output_rate != 0 and not 8000 <= config.output_rate <= 192_000:
            raise ConfigError(
                f"tts.output_rate must be 0 (the voice's rate) or 8000-192000 Hz, "
                f"not {config.output_rate}."
            )
        self.model_path, self.config_path = resolve_tts_voice(config.voice)
        try:
            voice_json = json.loads(self.config_path.read_text(encoding="utf-8"))
            piper_config = PiperConfig.from_dict(voice_json)
            # The voice's language ("zh_CN"): symbols are read out in it (to_speakable).
            self.language = str((voice_json.get("language") or {}).get("code") or "en")
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = thread_budget(config.threads)
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            # Idle pool threads would otherwise busy-wait and steal cores from Whisper/LLM.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(self.model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # bad JSON, missing keys, a corrupt .onnx: many types
            detail = " ".join(str(exc).split())  # onnxruntime errors can span lines
            raise VoiceError(
                f"could not load the Piper voice {self.model_path}: {detail}",
                "Use a Piper voice (.onnx with its .onnx.json) or tts.voice = 'default'.",
                code="model_load_failed",
            ) from exc
        self._session = _AbortableSession(session)
        self._voice: Any = PiperVoice(session=self._session, config=piper_config)
        # The voice's own length_scale is its natural pace; dividing it by the rate keeps
        # "1.0 = as trained" true for voices whose config is not 1.0. A pitch other than
        # 1.0 plays the audio as if sampled at rate * pitch (higher and shorter), so it
        # is rendered that much longer first: the pace stays the speaking rate.
        if not 0.5 <= config.pitch <= 2.0:
            raise ConfigError(f"tts.pitch must be within 0.5-2.0, not {config.pitch}.")
        self._syn_config = SynthesisConfig(
            length_scale=float(piper_config.length_scale) / config.speaking_rate * config.pitch
        )
        if not config.variation:
            self._syn_config.noise_scale = self._syn_config.noise_w_scale = 0.0

    def abort(self) -> None:
        """Stop the model run in progress now, from any thread (it raises in the thread
        that runs it). A sentence takes 100-300 ms to render: a server whose client has
        gone should not finish it."""
        self._session.abort()

    @property
    def sample_rate(self) -> int:
        """The voice's native sample rate (22050 Hz for the bundled voice)."""
        return int(self._voice.config.sample_rate)

    @property
    def output_rate(self) -> int:
        """The rate of the audio that :meth:`synthesize` yields."""
        return self.config.output_rate or self.sample_rate

    def synthesize(self, text: str, cancel: Cancel = None) -> Iterator[Float32Array]:
        """Yield the speech for ``text`` as float32 mono chunks at :attr:`output_rate`.

        The text first goes through :func:`~voice.speak.speakable.to_speakable` (no
        markdown, URLs or emoji read aloud); text with nothing speakable yields nothing.
        Each chunk is one sentence as Piper renders it. ``cancel`` is checked before each
        sentence is rendered and again before its audio is handed out, so once it is set
        no further audio comes and no further model run starts.

        Each sentence is an independent model output (Piper even peak-normalizes each
        one), so each is resampled on its own: nothing is held back in a filter waiting
        for the next sentence, which would delay or, on cancel, lose the end of a chunk.
        """
        spoken = to_speakable(text, getattr(self, "language", "en"))
        if not spoken.strip():
            return
        cancelled = _cancel_check(cancel)
        # Lazy: phonemization runs at the first next(), each sentence's model run at its own.
        sentences = iter(self._voice.synthesize(spoken, syn_config=self._syn_config))
        try:
            while not cancelled():
                chunk = next(sentences, None)
                if chunk is None or cancelled():
                    return
                audio = np.asarray(chunk.audio_float_array, dtype=np.float32).reshape(-1)
                rate = round(int(chunk.sample_rate) * self.config.pitch)
                audio = self._from_onset(resample(audio, rate, self.output_rate))
                if audio.size:
                    yield audio
        finally:
            close = getattr(sentences, "close", None)
            if close is not None:
                close()

    def _from_onset(self, audio: Float32Array) -> Float32Array:
        """``audio`` from ``lead_in_ms`` before its first sound (see :class:`TtsConfig`)."""
        if self.config.lead_in_ms < 0:
            return audio
        keep = ms_to_samples(self.config.lead_in_ms, self.output_rate)
        return audio[max(0, sound_onset(audio) - keep) :]

    def synthesize_all(self, text: str, cancel: Cancel = None) -> Float32Array:
        """The whole speech for ``text`` as one array (files, tests); empty if none."""
        chunks = list(self.synthesize(text, cancel))
        if not chunks:
            return np.zeros(0, dtype=np.float32)
        return np.concatenate(chunks)

    def warm_up(self) -> None:
        """Render one short word so the first real reply does not pay the first model
        run's one-time costs (espeak-ng start-up, onnxruntime buffer allocation)."""
        self.synthesize_all("Hello.")


# onnxruntime's CPU arena keeps every block it ever extended by, and sentences of
# ever new lengths fragment it: measured, 1100 random sentences grew the heap from
# 380 to 680 MB in steps, and starting with the longest sentence did not stop it.
# Letting one run in this many seconds give the spare blocks back kept the heap
# flat (280 MB) at the cost of re-allocating them once.
ARENA_SHRINK_INTERVAL_S = 10.0


class _AbortableSession:
    """Piper's ONNX session, with each run abortable from another thread."""

    def __init__(self, session: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._session = session
        self._lock = threading.Lock()
        self._current: Any = None
        self._clock = clock
        self._last_shrink = clock()

    def run(self, output_names: Any, inputs: Any) -> Any:
        import onnxruntime

        options = onnxruntime.RunOptions()
        now = self._clock()
        if now - self._last_shrink >= ARENA_SHRINK_INTERVAL_S:
            self._last_shrink = now
            options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        with self._lock:
            self._current = options
        try:
            return self._session.run(output_names, inputs, options)
        finally:
            with self._lock:
                self._current = None

    def abort(self) -> None:
        with self._lock:
            if self._current is not None:
                self._current.terminate = True

    def __getattr__(self, name: str) -> Any:  # everything else is the session's
        return getattr(self._session, name)
