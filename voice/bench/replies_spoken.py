"""``voice bench replies --runs N``: the dialogues said aloud, run after run, as a
listener hears them.

One clean run of the text bench says little: the replies of a spoken conversation
depend on when the user pauses and where Whisper's partial transcripts fall (they
start a reply speculatively), and a listener hears the worst run, not the median.
So here each dialogue of :mod:`voice.bench.replies_turns` is spoken (the user's
turns synthesised once by Piper) into a whole conversation on the virtual clock
(``voice simulate``'s own path: VAD, incremental Whisper, speculation, the reply
guard, Piper), ``runs`` times, each run with its own timing: the pause before each
turn is drawn from 1-3 s and each clip starts after 0-480 ms of silence, so the
recognition passes cut the speech at other places. The sampling seed stays the
dialogue's own, as it is for a user who says the same thing again.

Per run: the repeats a listener hears (:func:`voice.reply.repeats.find_repeats`:
the same sentence, a near-copy, a recurring clause, a copied opening), loops,
fallbacks, the longest reply's audio, replies over 8 s, and voice-to-voice; the
report gives the worst run beside the median and quotes every repeat found.
"""

from __future__ import annotations

import copy
import logging
import random
import statistics
from typing import Any

import numpy as np

from voice.app.build import build_session, load_engines
from voice.audio import SAMPLE_RATE
from voice.config import Settings
from voice.reply.guard import has_loop
from voice.reply.repeats import find_repeats
from voice.speak.tts import PiperTts, TtsConfig
from voice.stats import p50_p95
from voice.transports.simulate import Script, ScriptTurn, simulate

from .replies_turns import DIALOGUES, Dialogue

log = logging.getLogger(__name__)

MAX_REPLY_AUDIO_S = 8.0  # the bound: no reply longer, in any run
PAUSE_S = (1.0, 3.0)  # the user's pause after a reply ends, drawn per turn
LEAD_IN_MS = (0, 480)  # silence before each clip: moves where recognition passes fall


def bench_replies_spoken(
    settings: Settings, runs: int = 5, limit: int | None = None, jitter_seed: int = 0
) -> dict[str, Any]:
    """Every dialogue (the first ``limit``) spoken ``runs`` times with other timing."""
    engines = load_engines(settings)
    user_voice = PiperTts(TtsConfig(output_rate=SAMPLE_RATE, threads=settings.tts.threads))
    dialogues = DIALOGUES[:limit] if limit else DIALOGUES
    said = {t.text: user_voice.synthesize_all(t.text) for d in dialogues for t in d.turns}
    base_seed = settings.llm.seed if settings.llm.seed >= 0 else 1
    report: dict[str, Any] = {"runs": [], "seed": base_seed, "jitter_seed": jitter_seed}
    for run in range(runs):
        rng = random.Random(jitter_seed * 1000 + run)
        rows: list[dict[str, Any]] = []
        for number, dialogue in enumerate(dialogues):
            local = _settings_for(settings, dialogue, base_seed + number)
            rows += _run_dialogue(local, engines, dialogue, said, rng)
        report["runs"].append(_summary(rows, settings.llm.fallback_reply))
        log.info("run %d: %s", run + 1, _line(report["runs"][-1]))
    report["worst"] = _worst(report["runs"])
    report["median"] = _median(report["runs"])
    report["same_replies_every_run"] = _same_every_run(report["runs"])
    return report


def _settings_for(settings: Settings, dialogue: Dialogue, seed: int) -> Settings:
    local = dialogue.persona.apply(settings) if dialogue.persona else copy.deepcopy(settings)
    local.llm.seed = seed
    return local


def _run_dialogue(
    settings: Settings,
    engines: Any,
    dialogue: Dialogue,
    said: dict[str, np.ndarray],
    rng: random.Random,
) -> list[dict[str, Any]]:
    turns = []
    for index, turn in enumerate(dialogue.turns):
        lead = np.zeros(int(rng.uniform(*LEAD_IN_MS) * SAMPLE_RATE / 1000), np.float32)
        audio = np.concatenate([lead, said[turn.text]])
        if index == 0:
            turns.append(ScriptTurn(audio=audio, name=turn.text, at_s=0.5))
        else:
            pause = rng.uniform(*PAUSE_S)
            turns.append(ScriptTurn(audio=audio, name=turn.text, after="reply_end", delay_s=pause))
    result = simulate(Script(turns), build_session(settings, engines), engines)
    return _replies(result.events, dialogue.name)


def _replies(events: list[dict[str, Any]], dialogue: str) -> list[dict[str, Any]]:
    """Per reply: what the user's turn was heard as, what was said, its audio length
    and voice-to-voice."""
    audio_ms: dict[int, float] = {}
    v2v: dict[int, float | None] = {}
    rows: list[dict[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "audio_chunk":
            audio_ms[event["reply_id"]] = audio_ms.get(event["reply_id"], 0.0) + float(
                event["duration_ms"]
            )
        elif kind == "turn_metrics":
            v2v[event["reply_id"]] = event["voice_to_voice_ms"]
        elif kind == "reply_start":
            rows.append(
                {"dialogue": dialogue, "reply_id": event["reply_id"], "user": event["text"]}
            )
        elif kind == "reply_end":
            for row in rows:
                if row["reply_id"] == event["reply_id"]:
                    row["reply"] = event["heard_text"].strip()
    for row in rows:
        row.setdefault("reply", "")
        row["audio_s"] = round(audio_ms.get(row["reply_id"], 0.0) / 1000.0, 2)
        row["voice_to_voice_ms"] = v2v.get(row["reply_id"])
    return rows


def _summary(rows: list[dict[str, Any]], fallback: str) -> dict[str, Any]:
    repeats: list[dict[str, Any]] = []
    for name in dict.fromkeys(r["dialogue"] for r in rows):
        mine = [r for r in rows if r["dialogue"] == name]
        for hit in find_repeats([(r["user"], r["reply"]) for r in mine], skip=fallback):
            repeats.append({"dialogue": name, **hit, "reply": mine[int(hit["turn"])]["reply"]})
    audio = [float(r["audio_s"]) for r in rows]
    v2v = [float(r["voice_to_voice_ms"]) for r in rows if r["voice_to_voice_ms"] is not None]
    return {
        "replies": len(rows),
        "repeats": sum(h["kind"] in ("same", "clause") for h in repeats),
        "near_copies": sum(h["kind"] in ("near", "opening") for h in repeats),
        "found": repeats,
        "loops": sum(has_loop(r["reply"], 6) for r in rows),
        "fallbacks": sum(r["reply"] == fallback.strip() for r in rows),
        "silent": sum(not r["reply"] for r in rows),
        "max_audio_s": max(audio, default=0.0),
        "over_8s": sum(a > MAX_REPLY_AUDIO_S for a in audio),
        "audio_s": p50_p95(audio),
        "voice_to_voice_ms": p50_p95(v2v),
        "said": [(r["dialogue"], r["user"], r["reply"]) for r in rows],
        "rows": [
            {k: r[k] for k in ("dialogue", "user", "reply", "audio_s", "voice_to_voice_ms")}
            for r in rows
        ],
    }


def _badness(run: dict[str, Any]) -> tuple[int, int, float]:
    return (
        run["repeats"] + run["near_copies"] + run["loops"] + run["over_8s"],
        run["fallbacks"],
        run["max_audio_s"],
    )


def _worst(runs: list[dict[str, Any]]) -> dict[str, Any]:
    worst = max(runs, key=_badness)
    return {k: v for k, v in worst.items() if k not in ("said", "rows")}


def _median(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("repeats", "near_copies", "loops", "fallbacks", "silent", "max_audio_s", "over_8s")
    out: dict[str, float] = {k: statistics.median(r[k] for r in runs) for k in keys}
    for key in ("voice_to_voice_ms", "audio_s"):
        for q in ("p50", "p95"):
            values = [r[key][q] for r in runs if r[key][q] is not None]
            out[f"{key}_{q}"] = statistics.median(values) if values else float("nan")
    return out


def _same_every_run(runs: list[dict[str, Any]]) -> bool:
    return all(r["said"] == runs[0]["said"] for r in runs)


def _line(run: dict[str, Any]) -> str:
    return (
        f"repeats {run['repeats']}, near-copies {run['near_copies']}, loops {run['loops']}, "
        f"fallbacks {run['fallbacks']}/{run['replies']}, longest {run['max_audio_s']:.1f} s, "
        f"v2v p50 {run['voice_to_voice_ms']['p50']}"
    )


def format_runs(report: dict[str, Any]) -> str:
    """The runs as a markdown table, the worst and the median, and the repeats quoted."""
    lines = [
        "| run | repeats | near-copies | loops | fallbacks | longest reply s | over 8 s "
        "| v2v ms p50/p95 |",
        "|" + " --- |" * 8,
    ]
    for number, run in enumerate(report["runs"], 1):
        v2v = run["voice_to_voice_ms"]
        lines.append(
            f"| {number} | {run['repeats']} | {run['near_copies']} | {run['loops']} "
            f"| {run['fallbacks']}/{run['replies']} | {run['max_audio_s']:.1f} "
            f"| {run['over_8s']} | {v2v['p50']} / {v2v['p95']} |"
        )
    median = report["median"]
    lines.append(
        f"| median | {median['repeats']} | {median['near_copies']} | {median['loops']} "
        f"| {median['fallbacks']} | {median['max_audio_s']:.1f} | {median['over_8s']} "
        f"| {median['voice_to_voice_ms_p50']} / {median['voice_to_voice_ms_p95']} |"
    )
    lines.append("")
    lines.append(f"Same replies in every run: {report['same_replies_every_run']}.")
    found = [(n, h) for n, run in enumerate(report["runs"], 1) for h in run["found"]]
    for number, hit in found:
        lines.append(
            f"- run {number}, {hit['dialogue']} turn {hit['turn'] + 1} ({hit['kind']}): "
            f'"{hit["sentence"]}" after "{hit["earlier"]}"'
        )
    return "\n".join(lines)
