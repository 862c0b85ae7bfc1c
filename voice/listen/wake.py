"""The wake-word engine: is the wake phrase being said in this audio?

A hands-free assistant at a desk or a kiosk must not answer the colleague on the
phone or the radio, so while it is idle only the voice activity detector and this
detector hear the microphone (no Whisper, no LLM). The detector is microWakeWord
(``pymicro-wakeword``): its models ship inside the wheel ("hey_jarvis", "okay_nabu",
"hey_mycroft", "alexa"; 50-80 kB each) with their own TensorFlow Lite runtime, and a
custom model is one ``.json`` file (microWakeWord's model description: the phrase,
the ``.tflite`` beside it, the probability cutoff and the window it averages over).
It was chosen over openWakeWord (``pyopen-wakeword``, same models, 1.3 MB each plus
two feature models) on the numbers in docs/wake.md: it runs at a fraction of the CPU
and hears the phrase as often.

The engine is streaming and pure: 20 ms PCM16 frames in, a detection out, on the
stream's own clock. It never reads a clock or a device.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voice.errors import ConfigError, ModelNotFoundError

Int16Array = npt.NDArray[np.int16]

BUILTIN = ("hey_jarvis", "okay_nabu", "hey_mycroft", "alexa")
# Cutoffs measured here for a built-in model (docs/wake.md, `voice bench wake` and its
# `--modes negatives`), used where wake.threshold is 0. hey_jarvis: its own 0.97 heard
# 14 of 18 Piper clips at 10 dB; 0.7 hears 17, with 1 false wake in 2.4 h of speech and
# noise without the phrase (0.6: 18 and 2; 0.5: 18 and 3). Others keep their own.
MEASURED_CUTOFFS = {"hey_jarvis": 0.7}
FEATURE_MS = 10  # microWakeWord's front end makes one feature vector per 10 ms
# After a detection the detector is deaf this long: the model's window still holds
# the phrase, and one "Hey Jarvis" must wake it once.
REFRACTORY_MS = 1000
_TFLITE_MAGIC = b"TFL3"  # a TensorFlow Lite flatbuffer's file identifier (bytes 4-8)
_HINT = (
    f"Set wake_word to one of {', '.join(BUILTIN)}, or to the path of a microWakeWord "
    "model's .json (with its .tflite beside it), or to a .tflite with a .json of the "
    "same name beside it."
)


class WakeDetector(Protocol):
    """Streams 20 ms PCM16 frames at 16 kHz; says when the wake phrase was heard."""

    phrase: str  # the words, as the model's description spells them ("Hey Jarvis")

    def process(self, frame: Int16Array) -> bool:
        """True on the frame where the phrase is detected (its end was just heard)."""
        ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class WakeModel:
    """A microWakeWord model: its phrase, its ``.tflite`` and how it decides."""

    phrase: str
    tflite: Path
    cutoff: float  # the mean probability over the window that counts as the phrase
    window: int  # how many of the model's outputs (one per 30 ms) are averaged

    @property
    def name(self) -> str:
        return self.tflite.stem


def resolve_wake_model(spec: str, threshold: float = 0.0) -> WakeModel:
    """``spec``: a built-in name, a model ``.json``, or a ``.tflite`` with its ``.json``
    beside it. ``threshold`` > 0 replaces the model's own cutoff (0: the cutoff measured
    here for a built-in model, :data:`MEASURED_CUTOFFS`, else the model's own). A
    missing or malformed model is one :class:`ConfigError` (or
    :class:`ModelNotFoundError`) that says what to give instead, at start, never
    mid-conversation."""
    spec = spec.strip()
    if spec in BUILTIN:
        config = _builtin_dir() / f"{spec}.json"
    else:
        path = Path(spec).expanduser()
        if path.suffix == ".tflite":
            config = path.with_suffix(".json")
            if not path.is_file():
                raise ModelNotFoundError(f"wake word model not found: {path}.", _HINT)
        elif path.suffix == ".json" or path.exists():
            config = path
        else:
            raise ConfigError(f"wake_word {spec!r} is neither a built-in model nor a file.", _HINT)
    if not config.is_file():
        raise ModelNotFoundError(f"wake word model description not found: {config}.", _HINT)
    model = _read_description(config)
    if threshold <= 0 and spec in MEASURED_CUTOFFS:
        threshold = MEASURED_CUTOFFS[spec]
    if threshold > 0:
        if not threshold < 1.0:
            raise ConfigError(f"wake.threshold must be below 1, not {threshold}.")
        model = WakeModel(model.phrase, model.tflite, threshold, model.window)
    return model


def _builtin_dir() -> Path:
    try:
        import pymicro_wakeword
    except ImportError:
        raise ModelNotFoundError(
            "the wake word engine is not installed.", "Install it: pip install pymicro-wakeword."
        ) from None
    return Path(pymicro_wakeword.__file__).parent / "models"


def _read_description(config: Path) -> WakeModel:
    bad = f"{config} is not a microWakeWord model description"
    try:
        data: Any = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{bad}: {exc}.", _HINT) from None
    try:
        micro = data["micro"]
        tflite = config.parent / str(data["model"])
        model = WakeModel(
            phrase=str(data["wake_word"]),
            tflite=tflite,
            cutoff=float(micro["probability_cutoff"]),
            window=int(micro["sliding_window_size"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{bad} (it needs wake_word, model and micro.probability_cutoff and "
            f"micro.sliding_window_size; {exc!r} is missing or wrong).",
            _HINT,
        ) from None
    if not 0.0 < model.cutoff < 1.0 or model.window < 1:
        raise ConfigError(f"{bad}: its cutoff or window is out of range.", _HINT)
    if not tflite.is_file():
        raise ModelNotFoundError(f"wake word model {tflite} (named by {config}) not found.", _HINT)
    with open(tflite, "rb") as f:
        head = f.read(8)
    if head[4:8] != _TFLITE_MAGIC:  # the native loader would crash on it, not raise
        raise ConfigError(f"{tflite} is not a TensorFlow Lite model.", _HINT)
    return model


class MicroWakeWordDetector:
    """microWakeWord's streaming model on its own front end (``pymicro-features``).

    One per stream: the model keeps state between calls. A detection resets it (the
    averaged window would fire again on the next frames) and starts
    ``REFRACTORY_MS`` of deafness."""

    def __init__(self, model: WakeModel) -> None:
        from pymicro_features import MicroFrontend
        from pymicro_wakeword import MicroWakeWord
        from pymicro_wakeword.microwakeword import _MODULE_LIB_DIR

        library = next(iter(_MODULE_LIB_DIR.glob("*tensorflowlite_c.*")), None)
        if library is None:
            raise ModelNotFoundError(
                "pymicro-wakeword's TensorFlow Lite library is missing.",
                "Reinstall it: pip install --force-reinstall pymicro-wakeword.",
            )
        _readable_or_raise(library, model.tflite)
        self.model = model
        self.phrase = model.phrase
        self._frontend_type = MicroFrontend
        self._frontend = MicroFrontend()
        self._net = MicroWakeWord(
            model.name,
            wake_word=model.phrase,
            tflite_model=model.tflite,
            probability_cutoff=model.cutoff,
            sliding_window_size=model.window,
            trained_languages=[],
            libtensorflowlite_c_path=library,
        )
        self._pending = b""
        self._deaf_ms = 0
        self.probability = 0.0  # the last mean probability (for benchmarks and tuning)

    def process(self, frame: Int16Array) -> bool:
        data = self._pending + np.asarray(frame, dtype="<i2").tobytes()
        heard = False
        offset = 0
        step = 2 * 16000 * FEATURE_MS // 1000
        while offset + step <= len(data):
            result = self._frontend.process_samples(data[offset : offset + step])
            offset += max(2, result.samples_read * 2)
            if not result.features:
                continue
            features = np.array(result.features, dtype=np.float32).reshape(1, 1, -1)
            prob = self._net.process_streaming_prob(features)
            if prob is not None:
                self.probability = prob
            if self._deaf_ms > 0:
                self._deaf_ms -= FEATURE_MS
            elif prob is not None and prob > self.model.cutoff:
                heard = True
        self._pending = data[offset:]
        if heard:
            self.reset()
            self._deaf_ms = REFRACTORY_MS
        return heard

    def reset(self) -> None:
        self._net.reset()
        self._frontend = self._frontend_type()
        self._pending = b""
        self.probability = 0.0

    def close(self) -> None:
        self._net.close()


def _readable_or_raise(library: Path, tflite: Path) -> None:
    """A ``.tflite`` the runtime cannot read (a TensorFlow Lite header over a broken
    body) gives no error in ``pymicro-wakeword``: its interpreter is made on a null model
    and the process dies. Reading it once here turns that into one clear error."""
    import ctypes

    from pymicro_wakeword.wakeword import TfLiteWakeWord

    lib = TfLiteWakeWord(library).lib  # the runtime's bindings, nothing loaded
    model = lib.TfLiteModelCreateFromFile(str(tflite.resolve()).encode("utf-8"))
    if not model:
        raise ConfigError(f"{tflite} could not be read as a TensorFlow Lite model.", _HINT)
    lib.TfLiteModelDelete.argtypes = [ctypes.c_void_p]
    lib.TfLiteModelDelete(model)


def load_wake_detector(spec: str, threshold: float = 0.0) -> MicroWakeWordDetector:
    """The detector for ``spec`` (see :func:`resolve_wake_model`), ready to stream."""
    return MicroWakeWordDetector(resolve_wake_model(spec, threshold))
