"""Echo cancellation for speakers: remove the assistant's own voice from the mic."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from voice.errors import VoiceError

Float32Array = npt.NDArray[np.float32]


def make_echo_canceller() -> Any:
    raise VoiceError(
        "echo cancellation is not available yet.",
        "Use desk.echo = 'headset' (with headphones) or 'half-duplex' (speakers).",
        code="missing_dependency",
    )
