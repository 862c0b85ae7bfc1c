"""openWakeWord (``pyopen-wakeword``) behind the wake detector interface, for the
benchmark only: ``voice bench wake --modes open`` measures it on the same clips, so the
choice of microWakeWord (docs/wake.md) can be checked again. Not a dependency:
``pip install pyopen-wakeword`` to run it.

openWakeWord computes a mel spectrogram and a shared speech embedding every 80 ms
(two models of 1.1 and 1.3 MB) and scores the phrase's classifier on the last 16
embeddings; 0.5 is its usual threshold.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from voice.errors import ModelNotFoundError

THRESHOLD = 0.5
REFRACTORY_SCORES = 12  # ~1 s of 80 ms scores after a detection


class OpenWakeWordDetector:
    def __init__(self, name: str, threshold: float = THRESHOLD) -> None:
        try:
            from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures
        except ImportError:
            raise ModelNotFoundError(
                "openWakeWord is not installed.", "pip install pyopen-wakeword"
            ) from None
        self._features: Any = OpenWakeWordFeatures.from_builtin()
        self._model: Any = OpenWakeWord.from_builtin(Model(name))
        self.phrase = name.replace("_", " ").title()
        self.threshold = threshold or THRESHOLD
        self._deaf = 0

    def process(self, frame: np.ndarray) -> bool:
        heard = False
        for embedding in self._features.process_streaming(np.asarray(frame, "<i2").tobytes()):
            for score in self._model.process_streaming(embedding):
                if self._deaf > 0:
                    self._deaf -= 1
                elif score > self.threshold:
                    heard, self._deaf = True, REFRACTORY_SCORES
        return heard

    def reset(self) -> None:
        self._features.reset()
        self._model.reset()

    def close(self) -> None:
        self._features.close()
        self._model.close()
