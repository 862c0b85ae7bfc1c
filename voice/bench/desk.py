"""``voice bench desk``: ``voice listen`` on speakers that the microphone hears.

A private PulseAudio (:mod:`voice.bench.pulse`) with the virtual speaker looped
back into the virtual microphone at unity gain, as on a laptop with its
speakers up. For each echo mode (``cancel`` and ``headset``, which cancels
nothing), corpus speech is played into the microphone and what happens is
counted:

- echo: each opener's full reply plays; how loud its echo is in the microphone,
  before and after cancellation, and whether the assistant interrupted itself;
- barge-in: one second into each reply, the user speaks over it (a sentence at
  a normal level, and a quiet "stop"); a success is an interruption that came
  after the user started and none before.

Replies are greedy and capped at 60 tokens.
"""

from __future__ import annotations

import re
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from voice.audio import write_wav
from voice.bench.corpus import Clip
from voice.bench.pulse import ListenProcess, PulseRig
from voice.errors import VoiceError

OPENERS = ("ljspeech_LJ001-0008", "cmu_arctic_axb_a0004", "cmu_arctic_aew_a0003")
BARGES = ("cmu_arctic_axb_a0005", "speechcommands_stop_6a27a9bf")
ENV = {"VOICE_LLM_TEMPERATURE": "0", "VOICE_LLM_MAX_REPLY_TOKENS": "60"}
SUMMARY = re.compile(r"microphone (-?[\d.]+) dBFS as heard, (-?[\d.]+) dBFS after")


def _wavs(clips: list[Clip], folder: Path) -> dict[str, Path]:
    by_name = {c.name: c for c in clips}
    missing = [n for n in OPENERS + BARGES if n not in by_name]
    if missing:
        raise VoiceError(
            f"the corpus lacks {', '.join(missing)}.", "Use the bundled tests/corpus.",
            code="corpus_not_found",
        )  # fmt: skip
    paths = {}
    for name in OPENERS + BARGES:
        audio = by_name[name].audio(lead_s=0.3)
        path = folder / f"{name}.wav"
        write_wav(path, np.concatenate([audio, np.zeros(8000, np.float32)]), 16000)
        paths[name] = path
    return paths


def _more(listening: ListenProcess, kind: str, than: int) -> bool:
    return len(listening.of(kind)) > than


def _echo_trials(rig: PulseRig, mode: str, wavs: dict[str, Path]) -> dict[str, Any]:
    listening = ListenProcess(rig, ENV, "--echo", mode)
    try:
        for opener in OPENERS:
            ended = len(listening.of("reply_end"))
            rig.play(wavs[opener])
            listening.wait(partial(_more, listening, "reply_end", ended), 90)
            time.sleep(0.5)
    finally:
        _, err = listening.stop()
    match = SUMMARY.search(err)
    return {
        "replies": len(listening.of("reply_end")),
        "interrupted_itself": len(listening.of("interrupted")),
        "paused_itself": len(listening.of("paused")),
        "echo_dbfs": float(match.group(1)) if match else None,
        "after_cancellation_dbfs": float(match.group(2)) if match else None,
    }


def _barge_trials(rig: PulseRig, mode: str, wavs: dict[str, Path]) -> dict[str, Any]:
    results: dict[str, list[bool]] = {name: [] for name in BARGES}
    listening = ListenProcess(rig, ENV, "--echo", mode)
    try:
        for opener in OPENERS:
            for barge in BARGES:
                started = len(listening.of("playback_start"))
                seen = len(listening.of("interrupted"))
                rig.play(wavs[opener])
                listening.wait(partial(_more, listening, "playback_start", started), 90)
                time.sleep(1.0)
                spoken_at = time.monotonic()
                rig.play(wavs[barge])
                time.sleep(1.0)
                cuts = listening.of("interrupted")[seen:]
                before = [e for e in cuts if e["_t"] < spoken_at]
                after = [e for e in cuts if e["_t"] >= spoken_at]
                results[barge].append(bool(after) and not before)
                # Let whatever followed play out before the next trial.
                listening.wait(lambda: listening.of("state")[-1]["state"] == "listening", 60)
                time.sleep(0.5)
    finally:
        listening.stop()
    return {name: {"succeeded": sum(ok), "trials": len(ok)} for name, ok in results.items()}


def bench_desk(clips: list[Clip]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        wavs = _wavs(clips, Path(folder))
        rig = PulseRig(Path(folder) / "rig")
        try:
            rig.loop_speaker_into_mic()
            for mode in ("cancel", "headset"):
                report[mode] = {
                    "echo": _echo_trials(rig, mode, wavs),
                    "barge_in": _barge_trials(rig, mode, wavs),
                }
        finally:
            rig.stop()
    return report
