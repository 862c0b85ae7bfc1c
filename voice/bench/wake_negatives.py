"""Hours of audio with no wake word in it, for false wakes per hour at each cutoff.

A rate of one false wake per hour cannot be shown on a quarter of an hour. No hours of
radio or meetings ship here, so this makes them from what does, in three parts reported
apart (they are not equally independent hours):

- ``corpus``: every recording of the shared corpus as it is (read speech, AMI meeting
  headsets, monologues, Mandarin, German, French and Spanish speech, noise and music);
- ``varied``: the speech among them again, at 0.9x and 1.12x (resampled: pace and
  pitch move together, another speaker's register) and under another recording's noise
  at 10 dB: the same words, but not the same sound;
- ``synthetic``: a thousand-odd sentences of this project's own texts (the knowledge
  files' questions and answers, the tool requests, the corpus transcripts) said by the
  bundled Piper voice at three paces and pitches. microWakeWord learnt its negatives
  from Piper speech too, so this part is the easiest of the three.

Each stream is scored once: the detector runs with a cutoff it never reaches and its
mean probability is kept per 20 ms frame; a cutoff then wakes where the probability
first passes it, and not again for the detector's deaf second (``REFRACTORY_MS``), as
the live detector does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE, float_to_pcm16
from voice.audio.resample import resample
from voice.audio.wav import read_wav
from voice.bench.wake_voices import Float32Array, mix

THRESHOLDS = (0.97, 0.9, 0.8, 0.7, 0.6, 0.5)
SPEEDS = (0.9, 1.12)
VARIED_SNR_DB = 10
SYNTH_STYLES = ((1.0, 1.0), (0.85, 0.9), (1.15, 1.15))
REPO = Path(__file__).resolve().parents[2]


def probabilities(detector: Any, audio: Float32Array) -> np.ndarray:
    """The detector's mean probability after each 20 ms frame of ``audio``."""
    pcm = float_to_pcm16(audio)
    out = np.zeros(len(pcm) // FRAME_SAMPLES, np.float32)
    for k in range(len(out)):
        detector.process(pcm[k * FRAME_SAMPLES : (k + 1) * FRAME_SAMPLES])
        out[k] = detector.probability
    return out


def wakes(trace: np.ndarray, cutoff: float, deaf_frames: int) -> list[int]:
    """The frames where a detector with ``cutoff`` would wake on ``trace``."""
    hits: list[int] = []
    deaf_until = -1
    for k in (int(i) for i in np.nonzero(trace > cutoff)[0]):
        if k > deaf_until:
            hits.append(k)
            deaf_until = k + deaf_frames
    return hits


def _texts(phrase_words: set[str]) -> list[str]:
    """Sentences from the project's own data, none with a word of the phrase."""
    lines: list[str] = []
    for path in sorted((REPO / "examples" / "knowledge").glob("*.questions.jsonl")):
        lines += [json.loads(t)["q"] for t in path.read_text("utf-8").splitlines() if t.strip()]
    for path in sorted((REPO / "examples" / "knowledge").glob("*.md")):
        body = [t for t in path.read_text("utf-8").splitlines() if t and not t.startswith("#")]
        lines += [s for t in body for s in re.split(r"(?<=[.!?])\s+", t)]
    for path in sorted((REPO / "voice" / "data" / "tools").glob("*.jsonl")):
        for t in path.read_text("utf-8").splitlines():
            if t.strip():
                item = json.loads(t)
                lines.append(str(item.get("text") or item.get("q") or ""))
    kept, seen = [], set()
    for line in lines:
        line = line.strip()
        words = set(re.findall(r"[a-z]+", line.lower()))
        if len(words) >= 2 and not words & phrase_words and line not in seen:
            seen.add(line)
            kept.append(line)
    return kept


def negative_streams(
    corpus: Path, phrase: str, synthetic: bool = True
) -> Iterator[tuple[str, str, Float32Array]]:
    """(part, name, audio) for every stream of the three parts."""
    recordings = sorted(p for p in corpus.rglob("*.wav") if p.is_file())
    noise = [read_wav(p) for p in recordings if p.parent.name == "noise"]
    speech = [p for p in recordings if p.parent.name != "noise"]
    for path in recordings:
        yield "corpus", f"{path.parent.name}/{path.name}", read_wav(path)
    for k, path in enumerate(speech):
        audio = read_wav(path)
        for speed in SPEEDS:
            # Read at another rate: `speed` times as fast, its pitch as much higher.
            faster = resample(audio, int(SAMPLE_RATE * speed), SAMPLE_RATE)
            yield "varied", f"{path.name} x{speed:g}", faster
        if noise:
            under = mix(audio, noise[k % len(noise)], VARIED_SNR_DB, offset=k * 7919)
            yield "varied", f"{path.name} in noise", under
    if not synthetic:
        return
    from voice.speak.tts import PiperTts, TtsConfig

    texts = _texts({w.lower() for w in re.findall(r"[A-Za-z]+", phrase)})
    gap = np.zeros(SAMPLE_RATE // 2, np.float32)
    for rate, pitch in SYNTH_STYLES:
        tts = PiperTts(TtsConfig(speaking_rate=rate, pitch=pitch, threads=1))
        for start in range(0, len(texts), 40):  # a few minutes per stream
            said = [tts.synthesize_all(t) for t in texts[start : start + 40]]
            audio = np.concatenate([x for s in said for x in (s, gap)])
            yield "synthetic", f"piper x{rate:g} pitch {pitch:g} #{start // 40}", audio


def false_wakes(load: Any, word: str, corpus: Path, synthetic: bool = True) -> dict[str, Any]:
    """False wakes per hour of each part at each cutoff in ``THRESHOLDS``."""
    from voice.listen.wake import REFRACTORY_MS, resolve_wake_model

    deaf = REFRACTORY_MS // (FRAME_SAMPLES * 1000 // SAMPLE_RATE)
    phrase = resolve_wake_model(word).phrase
    parts: dict[str, dict[str, Any]] = {}
    for part, name, audio in negative_streams(corpus, phrase, synthetic):
        detector = load(word, 0.9999)  # never fires, never resets: the raw trace
        trace = probabilities(detector, audio)
        detector.close()
        entry = parts.setdefault(part, {"seconds": 0.0, "where": {}, "counts": {}})
        entry["seconds"] += len(audio) / SAMPLE_RATE
        for cutoff in THRESHOLDS:
            hits = wakes(trace, cutoff, deaf)
            entry["counts"][cutoff] = entry["counts"].get(cutoff, 0) + len(hits)
            if hits and cutoff <= 0.8:
                entry["where"].setdefault(cutoff, []).extend(
                    f"{name} at {k * FRAME_SAMPLES / SAMPLE_RATE:.1f} s" for k in hits
                )
    report: dict[str, Any] = {"thresholds": list(THRESHOLDS), "parts": {}}
    total_s = sum(p["seconds"] for p in parts.values())
    summed = {c: sum(p["counts"][c] for p in parts.values()) for c in THRESHOLDS}
    every: dict[str, Any] = {"seconds": total_s, "counts": summed, "where": {}}
    for part, entry in [*parts.items(), ("all", every)]:
        seconds, counts = entry["seconds"], entry["counts"]
        report["parts"][part] = {
            "audio_h": round(seconds / 3600, 3),
            "false_wakes": {str(c): counts[c] for c in THRESHOLDS},
            "per_hour": {str(c): round(counts[c] / (seconds / 3600), 2) for c in THRESHOLDS},
            "where": {str(c): w for c, w in entry["where"].items()},
        }
    return report


def bench_negatives(settings: Any, corpus: str | None) -> dict[str, Any]:
    """``voice bench wake --modes negatives``: the product's detector (microWakeWord)."""
    from voice.bench.corpus import DEFAULT_CORPUS
    from voice.listen.wake import load_wake_detector

    word = settings.wake.wake_word or "hey_jarvis"
    root = Path(corpus) if corpus else Path(DEFAULT_CORPUS)
    report = false_wakes(load_wake_detector, word, root)
    report["engine"] = "microWakeWord"
    report["wake_word"] = word
    return report


def negatives_table(report: dict[str, Any]) -> str:
    """False wakes per part and cutoff, as docs/wake.md shows them."""
    cutoffs = report["thresholds"]
    lines = [
        f"{report['engine']}, {report['wake_word']}: false wakes (per hour) at each cutoff",
        "",
        "| part | hours | " + " | ".join(f"{c:g}" for c in cutoffs) + " |",
        "| --- | --- | " + " | ".join("---" for _ in cutoffs) + " |",
    ]
    for part, entry in report["parts"].items():
        cells = [f"{entry['false_wakes'][str(c)]} ({entry['per_hour'][str(c)]:g})" for c in cutoffs]
        lines.append(f"| {part} | {entry['audio_h']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
