"""``voice bench vad``: detection, onset/offset error, and false starts on noise.

The reference onset and offset of each speech clip are energy-based: the
first and last 20 ms frame within 30 dB of the clip's loudest frame (the clips
are single utterances with quiet lead-in). Each configuration runs the real
classifier and the endpointer over the same audio: webrtcvad at several
aggressiveness levels, and webrtcvad with Silero as a second opinion.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import FRAME_MS, FRAME_SAMPLES, burst_level_db, float_to_pcm16, level_db
from voice.bench.corpus import Clip
from voice.config import Settings
from voice.listen.endpoint import Ended, Endpointer
from voice.listen.vad import make_classifier
from voice.stats import p50_p95

Float32Array = npt.NDArray[np.float32]


def energy_reference(audio: Float32Array, floor_db: float = -30.0) -> tuple[float, float] | None:
    frames = len(audio) // FRAME_SAMPLES
    if frames == 0:
        return None
    rms = np.sqrt(np.mean(audio[: frames * FRAME_SAMPLES].reshape(frames, -1) ** 2, axis=1) + 1e-12)
    db = 20 * np.log10(rms)
    loud = np.nonzero(db >= db.max() + floor_db)[0]
    return float(loud[0] * FRAME_MS), float((loud[-1] + 1) * FRAME_MS)


def segments(
    audio: Float32Array, settings: Settings, silero: bool, aggressiveness: int
) -> list[tuple[float, float]]:
    classifier = make_classifier(aggressiveness, silero)
    endpointer = Endpointer(settings.vad)
    found: list[tuple[float, float]] = []
    frames = len(audio) // FRAME_SAMPLES
    for i in range(frames):
        chunk = audio[i * FRAME_SAMPLES : (i + 1) * FRAME_SAMPLES]
        voiced = classifier.is_speech(float_to_pcm16(chunk))
        change = endpointer.push(voiced, level_db(chunk), burst_level_db(chunk))
        if isinstance(change, Ended):
            found.append((change.onset_frame * FRAME_MS, (change.last_speech_frame + 1) * FRAME_MS))
    last = endpointer.force_end()
    if last is not None:
        found.append((last.onset_frame * FRAME_MS, (last.last_speech_frame + 1) * FRAME_MS))
    return found


def bench_vad(corpus: list[Clip], settings: Settings) -> dict[str, Any]:
    speech = [c for c in corpus if c.kind == "speech"]
    noise = [c for c in corpus if c.kind == "noise"]
    configs = [
        ("webrtc_2", False, 2),
        ("webrtc_3", False, 3),
        ("webrtc_2+silero", True, 2),
        ("webrtc_3+silero", True, 3),
    ]
    report: dict[str, Any] = {"speech_clips": len(speech), "noise_clips": len(noise)}
    for name, silero, aggressiveness in configs:
        detected, onset_err, offset_err, false_starts, noise_minutes = 0, [], [], 0, 0.0
        missed: list[str] = []
        for clip in speech:
            audio = clip.audio()
            found = segments(audio, settings, silero, aggressiveness)
            ref = energy_reference(audio)
            if found and ref:
                detected += 1
                onset_err.append(found[0][0] - ref[0])
                offset_err.append(found[-1][1] - ref[1])
            else:
                missed.append(clip.name)
        noisy: list[str] = []
        for clip in noise:
            audio = clip.audio()
            noise_minutes += len(audio) / 16000 / 60
            found = segments(audio, settings, silero, aggressiveness)
            false_starts += len(found)
            if found:
                noisy.append(clip.name)
        report[name] = {
            "speech_detected": f"{detected}/{len(speech)}",
            "missed": missed,
            "onset_error_ms": p50_p95([abs(x) for x in onset_err]),
            "onset_early_ms_median": float(np.median(onset_err)) if onset_err else None,
            "offset_error_ms": p50_p95([abs(x) for x in offset_err]),
            "noise_clips_with_false_start": f"{len(noisy)}/{len(noise)}",
            "false_starts_per_noise_minute": round(false_starts / max(noise_minutes, 1e-9), 2),
            "noise_clips_triggering": noisy,
        }
    return report
