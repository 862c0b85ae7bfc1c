"""``voice bench prosody --onnx PATH``: would a prosody end-of-turn model tell a
pause from an end, on the turn sets of ``voice bench turns``?

Issue 21 asked for the second opinion of a prosody turn-end model (Smart Turn v3,
an ONNX file inside the ``pipecat-ai`` wheel, BSD-2) before anything is built on it.
This scores one offline, with no session and no timing: at every mid-turn pause
(a silence of ``MIN_PAUSE_S`` or more inside a speaker's turn) and at every real turn
end of the three sets, it is given the audio up to ``delay`` seconds into the
silence (the last 8 s, as it was trained) and says how likely the turn is complete.
A signal that pays would say "complete" at the ends and "not yet" at the pauses;
the report counts both, per set, delay and threshold. The file is not shipped: get
it with ``pip download --no-deps pipecat-ai`` and unzip
``pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx``.

The input is Whisper's log-mel of 8 s (80 bins, 800 frames) of audio normalised to
zero mean and unit variance, zeros before a shorter clip: faster-whisper's own
feature extractor computes it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE
from voice.bench.turnsets import SETS, build_set, decision_points
from voice.config import Settings
from voice.errors import ConfigError
from voice.stats import p50_p95

Float32Array = npt.NDArray[np.float32]

WINDOW_S = 8
DELAYS_S = (0.2, 0.5)  # into the silence: Smart Turn's own default waits 0.2 s
THRESHOLDS = (0.3, 0.5, 0.7, 0.9)


class ProsodyModel:
    """One ONNX end-of-turn classifier on one thread (the bench's only engine)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ConfigError(
                f"no end-of-turn model at {path}.",
                "Give --onnx the smart-turn-v3.2-cpu.onnx file from the pipecat-ai wheel "
                "(pip download --no-deps pipecat-ai, then unzip it).",
            )
        import onnxruntime as ort
        from faster_whisper.feature_extractor import FeatureExtractor

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(path), options)
        self._name = self._session.get_inputs()[0].name
        self._features = FeatureExtractor(feature_size=80, chunk_length=WINDOW_S)

    def complete(self, audio: Float32Array) -> float:
        """Probability that the speech in ``audio`` (16 kHz, ending in the pause) is a
        finished turn."""
        size = WINDOW_S * SAMPLE_RATE
        window = audio[-size:].astype(np.float32)
        window = (window - window.mean()) / np.sqrt(window.var() + 1e-7)
        window = np.pad(window, (size - len(window), 0))
        mel = self._features(window, padding=0)[:, : WINDOW_S * 100].astype(np.float32)
        out = self._session.run(None, {self._name: mel[None]})[0]
        return float(np.asarray(out).reshape(-1)[0])


def bench_prosody(
    settings: Settings, onnx: str | None, sets: list[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    if not onnx:
        raise ConfigError(
            "voice bench prosody needs the model file.",
            "Pass --onnx PATH (smart-turn-v3.2-cpu.onnx from the pipecat-ai wheel).",
        )
    model = ProsodyModel(Path(onnx))
    from voice.bench.turns import splice_words

    chosen = sets or list(SETS)
    words_of = splice_words(chosen, settings)
    report: dict[str, Any] = {"model": Path(onnx).name, "sets": {}}
    seconds: list[float] = []
    for name in chosen:
        items = build_set(name, words_of)[: limit or None]
        per_delay: dict[str, Any] = {}
        for delay in DELAYS_S:
            scores: dict[str, list[float]] = {"pauses": [], "ends": []}
            for item in items:
                for at_s, is_end in decision_points(item, delay):
                    started = time.perf_counter()
                    probability = model.complete(item.audio[: int(at_s * SAMPLE_RATE)])
                    seconds.append(time.perf_counter() - started)
                    scores["ends" if is_end else "pauses"].append(probability)
            per_delay[f"{delay:.1f}"] = {
                "pauses": len(scores["pauses"]),
                "ends": len(scores["ends"]),
                "thresholds": {
                    f"{t:.1f}": {
                        "pauses_judged_complete": sum(p > t for p in scores["pauses"]),
                        "ends_judged_complete": sum(p > t for p in scores["ends"]),
                    }
                    for t in THRESHOLDS
                },
            }
        report["sets"][name] = per_delay
    report["inference_ms"] = p50_p95([s * 1000 for s in seconds])
    return report


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "| set | delay s | threshold | mid-turn pauses judged complete | ends judged complete |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, per_delay in report["sets"].items():
        for delay, row in per_delay.items():
            for threshold, counts in row["thresholds"].items():
                lines.append(
                    f"| {name} | {delay} | {threshold} | "
                    f"{counts['pauses_judged_complete']}/{row['pauses']} | "
                    f"{counts['ends_judged_complete']}/{row['ends']} |"
                )
    ms = report["inference_ms"]
    lines.append(f"\ninference ms p50/p95: {ms['p50']:.0f} / {ms['p95']:.0f} (one thread)")
    return "\n".join(lines)
