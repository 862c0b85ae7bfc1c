"""Closing a conversation's VAD frees Silero's native model at once, not at the next
full garbage collection, and a frame that still arrives is heard as silence."""

from __future__ import annotations

import numpy as np

from voice.listen.vad import SileroVad, WebRtcVad, close_classifier, make_classifier


def test_closing_frees_silero_at_once_and_later_frames_are_silence() -> None:
    classifier = make_classifier(2, silero=True)
    silero = next(c for c in classifier._classifiers if isinstance(c, SileroVad))  # type: ignore[attr-defined]
    speechy = (np.sin(np.arange(320) / 3.0) * 8000).astype(np.int16)
    classifier.is_speech(speechy)
    close_classifier(classifier)
    assert silero._model is None
    assert classifier.is_speech(speechy) is False
    classifier.reset()  # harmless after close
    close_classifier(WebRtcVad(2))  # nothing to free: no error
