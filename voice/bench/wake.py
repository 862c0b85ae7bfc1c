"""``voice bench wake``: the wake word on every voice at hand, in noise, and at rest.

- **Detection**: "Hey Jarvis" alone and followed in the same breath by a request, said
  by the bundled Piper voice at several paces and pitches and by espeak-ng's English
  voices, clean and under the noise corpus at 20, 10 and 5 dB SNR (each clip under a
  different noise).
- **False wakes per hour** on every corpus recording with no wake word in it (read
  speech, meetings, noise and music), streamed through one detector.
- **Time to listening**: from the end of the phrase said alone to the detection (the
  session listens from then on, the turn starting ``wake.cut_back_ms`` earlier).
- **Request words lost, and the reply's delay**: each same-breath request through the
  real session (Whisper, the LLM, Piper) with the wake word on, against the same voice
  saying the request alone with the wake word off: WER of both transcripts against the
  request, and voice-to-voice of both turns.
- **Idle CPU**: an idle session (the VAD with Silero, the detector, the dormant
  listener) fed the false-wake stream, as a share of one core; and the detector alone.
"""

from __future__ import annotations

import dataclasses
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE, float_to_pcm16
from voice.audio.wav import read_wav
from voice.bench.corpus import DEFAULT_CORPUS
from voice.bench.wake_voices import Voices, mix, padded
from voice.stats import p50_p95, word_errors

REQUESTS = ("what time is it?", "where is the cafe?")
SNRS = (20, 10, 5)


def _detections(detector: Any, audio: np.ndarray) -> list[float]:
    """Where (ms) ``detector`` fires over ``audio``, fed in 20 ms frames."""
    pcm = float_to_pcm16(audio)
    hits = []
    for i in range(0, len(pcm) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
        if detector.process(pcm[i : i + FRAME_SAMPLES]):
            hits.append((i + FRAME_SAMPLES) * 1000 / SAMPLE_RATE)
    return hits


def _sound_end_ms(audio: np.ndarray) -> float:
    loud = np.nonzero(np.abs(audio) > 0.02)[0]
    return float(loud[-1]) * 1000 / SAMPLE_RATE if len(loud) else 0.0


def _recordings(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*.wav") if p.is_file())


def bench_wake(
    settings: Any,
    corpus: str | None = None,
    limit: int | None = None,
    requests: bool = True,
    engine: str = "micro",
) -> dict[str, Any]:
    """``requests``: also run the same-breath requests through the real session (most
    of the time this takes; microWakeWord only). ``engine``: "micro" (microWakeWord, the
    product's) or "open" (openWakeWord, for comparison: :mod:`voice.bench.wake_open`)."""
    from voice.listen.wake import load_wake_detector as load_micro

    settings = dataclasses.replace(settings, wake=dataclasses.replace(settings.wake))
    settings.wake.wake_word = settings.wake.wake_word or "hey_jarvis"
    wake = settings.wake
    word = wake.wake_word

    def load_wake_detector(word: str, threshold: float) -> Any:
        if engine == "open":
            from voice.bench.wake_open import OpenWakeWordDetector

            return OpenWakeWordDetector(word, threshold)
        return load_micro(word, threshold)

    voices = Voices()
    noise = [read_wav(p) for p in _recordings(Path(corpus or DEFAULT_CORPUS) / "noise")]
    phrase = load_wake_detector(word, wake.threshold).phrase

    # Detection, and time from the end of the phrase to the detection.
    rows: list[dict[str, Any]] = []
    lags: list[float] = []
    texts = [f"{phrase}."] + [f"{phrase}, {request}" for request in REQUESTS]
    k = 0
    for text in texts:
        for said in voices.say(text):
            for snr in (None, *SNRS):
                audio = said.audio
                if snr is not None and noise:
                    audio = mix(audio, noise[k % len(noise)], snr, offset=k * 7919)
                    k += 1
                clip = padded(audio)
                hits = _detections(load_wake_detector(word, wake.threshold), clip)
                row = {"voice": said.voice, "text": text, "snr_db": snr, "detected": bool(hits)}
                rows.append(row)
                if snr is None and text == texts[0] and hits:
                    lags.append(hits[0] - _sound_end_ms(clip))
    detection: dict[str, Any] = {}
    for snr in (None, *SNRS):
        label = "clean" if snr is None else f"{snr} dB"
        picked = [r for r in rows if r["snr_db"] == snr]
        entry = {"all": _rate(picked)}
        for family in ("piper", "espeak-ng"):
            entry[family] = _rate([r for r in picked if r["voice"].startswith(family)])
        entry["alone"] = _rate([r for r in picked if r["text"] == texts[0]])
        entry["with a request"] = _rate([r for r in picked if r["text"] != texts[0]])
        detection[label] = entry
    missed = sorted({f"{r['voice']} ({'clean' if r['snr_db'] is None else r['snr_db']})"
                     for r in rows if not r["detected"]})  # fmt: skip

    # False wakes on recordings with no wake word.
    recordings = _recordings(Path(corpus or DEFAULT_CORPUS))[: limit or None]
    stream = [read_wav(p) for p in recordings]
    seconds = sum(len(a) for a in stream) / SAMPLE_RATE
    detector = load_wake_detector(word, wake.threshold)
    false_at: list[str] = []
    started = time.process_time()
    for path, audio in zip(recordings, stream, strict=True):
        false_at += [f"{path.parent.name}/{path.name} at {t / 1000:.1f} s"
                     for t in _detections(detector, audio)]  # fmt: skip
    detector_cpu = time.process_time() - started

    report: dict[str, Any] = {
        "engine": "openWakeWord" if engine == "open" else "microWakeWord",
        "wake_word": word,
        "phrase": phrase,
        "voices": voices.names,
        "detection": detection,
        "missed": missed,
        "false_wakes": {
            "count": len(false_at),
            "audio_h": round(seconds / 3600, 3),
            "per_hour": round(len(false_at) / (seconds / 3600), 2) if seconds else None,
            "where": false_at,
        },
        "phrase_end_to_detection_ms": p50_p95(lags),
        "cut_back_ms": wake.cut_back_ms,
        "idle_cpu_pct_of_core": {
            "detector": round(100 * detector_cpu / seconds, 2) if seconds else None,
            "idle_session": _idle_cpu(settings, stream, seconds, load_wake_detector),
        },
    }
    if requests and engine == "micro":
        report["request"] = _requests(settings, voices, phrase)
    return report


def _rate(rows: list[dict[str, Any]]) -> str:
    hit = sum(r["detected"] for r in rows)
    return f"{hit}/{len(rows)} ({100 * hit / len(rows):.0f}%)" if rows else "-"


def _idle_cpu(settings: Any, stream: list[np.ndarray], seconds: float, load: Any) -> float | None:
    """CPU of an idle session behind the wake word (VAD, detector, dormant listener) per
    second of audio fed, as a share of one core. Nothing may wake it: the stream is the
    false-wake one (a wake would start recognition, which is not idle)."""
    from voice.app.build import build_listener
    from voice.conversation.session import Session
    from voice.conversation.wake import WakeGate
    from voice.reply.history import History

    gate = WakeGate(load(settings.wake.wake_word, settings.wake.threshold), settings.wake)
    session = Session(build_listener(settings), History("", 2048, 10, lambda m: 0), wake=gate)
    started = time.process_time()
    for audio in stream:
        for i in range(0, len(audio) - FRAME_SAMPLES + 1, FRAME_SAMPLES):
            session.feed(audio[i : i + FRAME_SAMPLES])
            if gate.awake:  # a false wake: back to idle, as the follow-up window would
                session.take()
                session._go_idle("quiet")
        session.take()
    cpu = time.process_time() - started
    session.close()
    return round(100 * cpu / seconds, 2) if seconds else None


def _requests(settings: Any, voices: Voices, phrase: str) -> dict[str, Any]:
    """Each request through the real session: said after the phrase in one breath with
    the wake word on, and said alone with it off (the same voice); and the one said
    alone a second time, for the noise floor: a turn's voice-to-voice moves by a frame
    or a few between two runs of the same audio (where a recognition pass falls is the
    compute time's), so a pair's difference is only the wake word's where it stands
    out of what two runs of one turn differ by."""
    from voice.app.build import build_session, load_engines
    from voice.runtime.engines import Engines
    from voice.transports.simulate import Script, ScriptTurn, simulate

    base = dataclasses.replace(settings)
    base.llm = dataclasses.replace(settings.llm, max_reply_tokens=12, temperature=0.0)
    engines: Engines = load_engines(base)
    woken = base
    plain = dataclasses.replace(base, wake=dataclasses.replace(settings.wake, wake_word=""))
    runs = ("same_breath", "alone", "alone_again")
    pairs: dict[str, list[tuple[str, str]]] = {key: [] for key in runs}
    v2v: dict[str, list[float]] = {key: [] for key in runs}
    answered = dict.fromkeys(runs, 0)
    rows = []
    for request in REQUESTS:
        with_phrase = list(voices.say(f"{phrase}, {request}"))
        alone = list(voices.say(request[:1].upper() + request[1:]))
        for one, two in zip(with_phrase, alone, strict=True):
            row: dict[str, Any] = {"voice": one.voice, "request": request}
            for key, said, config in (
                ("same_breath", one, woken),
                ("alone", two, plain),
                ("alone_again", two, plain),
            ):
                session = build_session(config, engines)
                result = simulate(Script([ScriptTurn(said.audio, key, at_s=0.5)]), session, engines)
                finals = [e["text"] for e in result.events if e["type"] == "final" and e["text"]]
                heard = " ".join(finals)
                pairs[key].append((request, heard))
                row[key] = heard
                metrics = [e for e in result.events if e["type"] == "turn_metrics"]
                row[f"{key}_v2v_ms"] = None
                if metrics and metrics[0]["voice_to_voice_ms"] is not None:
                    answered[key] += 1
                    v2v[key].append(float(metrics[0]["voice_to_voice_ms"]))
                    row[f"{key}_v2v_ms"] = float(metrics[0]["voice_to_voice_ms"])
                session.close()
            rows.append(row)
    woke = [i for i, (_, heard) in enumerate(pairs["same_breath"]) if heard]
    both = [r for r in rows if r["same_breath_v2v_ms"] is not None and r["alone_v2v_ms"]]
    differences = [r["same_breath_v2v_ms"] - r["alone_v2v_ms"] for r in both]
    twice = [r for r in both if r["alone_again_v2v_ms"] is not None]
    floor = [r["alone_again_v2v_ms"] - r["alone_v2v_ms"] for r in twice]
    return {
        # Of the requests whose phrase woke it, and the same requests said alone.
        "wer_pct_when_woken": {key: _wer([p[i] for i in woke]) for key, p in pairs.items()},
        "wer_pct": {key: _wer(p) for key, p in pairs.items()},
        "answered": {key: f"{n}/{len(pairs[key])}" for key, n in answered.items()},
        "voice_to_voice_ms": {key: p50_p95(v) for key, v in v2v.items()},
        # The same requests, the same voices: the turns the wake word answered.
        "voice_to_voice_ms_when_woken": {
            key: p50_p95([r[f"{key}_v2v_ms"] for r in both]) for key in ("same_breath", "alone")
        },
        # Per request and voice, same breath minus alone: the turns' end-of-turn waits
        # (500 ms to 2 s by the words) make the two sets' percentiles bimodal.
        "voice_to_voice_difference_ms": _spread(differences),
        # The same pairs' request said alone twice: what two runs of one turn differ by.
        "voice_to_voice_noise_floor_ms": _spread(floor),
        "rows": rows,
    }


def _spread(differences: list[float]) -> dict[str, Any]:
    """p50 and p95 of pair differences, their mean, and the p95 of their size (a
    difference either way counts)."""
    if not differences:
        return {**p50_p95(differences), "mean": None, "p95_abs": None}
    sizes = np.abs(np.array(differences))
    return {
        **p50_p95(differences),
        "mean": round(float(np.mean(differences)), 1),
        "p95_abs": round(float(np.percentile(sizes, 95)), 1),
    }


_CONTRACTED = re.compile(r"\b(where|what|it|that|there|here|who|how)'s\b", re.IGNORECASE)


def _expanded(text: str) -> str:
    """ "Where's" as "where is": Whisper writes either for the same sound, and a word
    counted lost for it would be the spelling's, not the wake word's."""
    return _CONTRACTED.sub(r"\1 is", text)


def _wer(pairs: list[tuple[str, str]]) -> float | None:
    errors = total = 0
    for reference, hypothesis in pairs:
        e, n = word_errors(_expanded(reference), _expanded(hypothesis))
        errors, total = errors + e, total + n
    return round(100 * errors / total, 1) if total else None


def format_table(report: dict[str, Any]) -> str:
    """The report as the table in docs/wake.md."""
    lines = [f"{report['engine']}: wake word {report['wake_word']} ({report['phrase']}); voices: "
             f"{', '.join(report['voices'])}", "",
             "| condition | all | Piper | espeak-ng | phrase alone | with a request |",
             "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for label, entry in report["detection"].items():
        lines.append(f"| {label} | {entry['all']} | {entry['piper']} | {entry['espeak-ng']} | "
                     f"{entry['alone']} | {entry['with a request']} |")  # fmt: skip
    false = report["false_wakes"]
    request = report.get("request")
    lines += [
        "",
        f"false wakes: {false['count']} in {false['audio_h']} h ({false['per_hour']} per hour)"
        + (f": {'; '.join(false['where'])}" if false["where"] else ""),
        f"end of phrase to detection: {report['phrase_end_to_detection_ms']} ms "
        f"(the turn starts {report['cut_back_ms']} ms before the detection)",
        f"idle CPU, % of one core: {report['idle_cpu_pct_of_core']}",
    ]
    if request is not None:
        lines += [
            f"request WER % when woken: {request['wer_pct_when_woken']}; all: "
            f"{request['wer_pct']}; answered: {request['answered']}",
            f"voice-to-voice ms: {request['voice_to_voice_ms']}; when woken: "
            f"{request['voice_to_voice_ms_when_woken']}; same breath minus alone: "
            f"{request['voice_to_voice_difference_ms']}; alone again minus alone (the "
            f"noise floor): {request['voice_to_voice_noise_floor_ms']}",
        ]
    return "\n".join(lines)
