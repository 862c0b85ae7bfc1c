"""``voice bench asr``: incremental recognition against the plain full-window baseline.

For each speech clip: stream it through VAD + incremental ASR in virtual time
(compute is charged to the audio clock), then transcribe the same audio with
``WhisperModel.transcribe`` on the same model, as a naive pipeline would once
the user stops. Reported: WER of both, final-transcript latency after the
endpoint and after the last speech, partial update interval, real-time factor,
passes that needed a retry, and peak memory.
"""

from __future__ import annotations

import resource
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.app.build import build_listener, load_recognizer
from voice.bench.corpus import Clip
from voice.config import Settings
from voice.events import Final, Partial, SpeechEnd
from voice.listen.runner import listen_virtual
from voice.listen.whisper import Transcription, WhisperEngine
from voice.stats import p50_p95, percentile, wer

Float32Array = npt.NDArray[np.float32]


class _CountingEngine:
    """Wraps the engine to total compute and retries across every pass."""

    def __init__(self, engine: WhisperEngine) -> None:
        self.engine = engine
        self.compute_ms = 0.0
        self.passes = 0
        self.retried = 0
        self.cut = 0

    def transcribe(
        self,
        audio: Float32Array,
        context: str = "",
        with_timestamps: bool = False,
        final: bool = False,
    ) -> Transcription:
        result = self.engine.transcribe(audio, context, with_timestamps, final)
        self.compute_ms += result.compute_ms
        self.passes += 1
        self.retried += bool(result.retries)
        self.cut += result.loop_cut
        return result


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def bench_asr(corpus: list[Clip], settings: Settings) -> dict[str, Any]:
    engine = load_recognizer(settings)
    counting = _CountingEngine(engine)
    clips = [c for c in corpus if c.kind == "speech" and c.text]
    rows: list[dict[str, Any]] = []
    after_endpoint: list[float] = []
    after_endpoint_short: list[float] = []
    after_speech: list[float] = []
    intervals: list[float] = []
    baseline_ms: list[float] = []
    audio_s = 0.0
    for clip in clips:
        audio = clip.audio()
        audio_s += len(audio) / 16000
        finals: list[Final] = []
        ends: dict[int, SpeechEnd] = {}
        last_partial: dict[int, float] = {}
        for event in listen_virtual(build_listener(settings), counting, audio):
            if isinstance(event, SpeechEnd):
                ends[event.utterance_id] = event
            elif isinstance(event, Partial):
                if event.utterance_id in last_partial:
                    intervals.append(event.audio_ms - last_partial[event.utterance_id])
                last_partial[event.utterance_id] = event.audio_ms
            elif isinstance(event, Final):
                finals.append(event)
                end = ends.get(event.utterance_id)
                if end is not None:
                    after_endpoint.append(event.audio_ms - end.audio_ms)
                    after_speech.append(event.audio_ms - end.end_ms)
                    if end.end_ms - end.start_ms < 10_000:
                        after_endpoint_short.append(event.audio_ms - end.audio_ms)
        started = time.perf_counter()
        baseline = engine.transcribe_full_window(audio)
        baseline_ms.append((time.perf_counter() - started) * 1000)
        rows.append(
            {
                "clip": clip.name,
                "reference": clip.text,
                "incremental": " ".join(f.text for f in finals),
                "baseline": baseline,
                "utterances": len(finals),
            }
        )
    inc_wer = wer([(r["reference"], r["incremental"]) for r in rows])
    base_wer = wer([(r["reference"], r["baseline"]) for r in rows])
    # A naive pipeline also waits for the endpoint, then runs its full-window pass.
    naive_after_speech = [settings.vad.end_silence_ms + ms for ms in baseline_ms]
    p50_inc = percentile(after_speech, 50) or 1.0
    p50_naive = percentile(naive_after_speech, 50) or 0.0
    return {
        "model": settings.asr.model,
        "threads": settings.asr.threads,
        "clips": len(rows),
        "audio_s": round(audio_s, 1),
        "wer_percent": {"incremental": inc_wer, "full_window_baseline": base_wer,
                        "difference_points": round(inc_wer - base_wer, 2)},
        "final_latency_after_endpoint_ms": p50_p95(after_endpoint),
        "final_latency_after_endpoint_under_10s_ms": p50_p95(after_endpoint_short),
        "final_latency_after_last_speech_ms": p50_p95(after_speech),
        "end_silence_ms": settings.vad.end_silence_ms,
        "baseline_full_window_latency_ms": p50_p95(baseline_ms),
        "naive_final_latency_after_last_speech_ms": p50_p95(naive_after_speech),
        "speedup_p50_after_last_speech": round(p50_naive / max(p50_inc, 1.0), 2),
        "partial_update_interval_ms": p50_p95(intervals),
        "real_time_factor": round(counting.compute_ms / 1000 / max(audio_s, 1e-9), 3),
        "passes": counting.passes,
        "passes_retried_for_loops": counting.retried,
        "passes_cut_after_a_loop": counting.cut,
        "peak_rss_mb": peak_rss_mb(),
        "rows": rows,
    }  # fmt: skip
