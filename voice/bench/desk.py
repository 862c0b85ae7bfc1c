"""``voice bench desk``: ``voice listen`` on speakers that the microphone hears.

A private PulseAudio (:mod:`voice.bench.pulse`) with the virtual speaker looped
back into the virtual microphone at unity gain, as on a laptop with its
speakers up. For each echo mode (``cancel`` and ``headset``, which cancels
nothing), corpus speech is played into the microphone and what happens is
counted:

- echo: an opener's full reply plays, from a fresh ``voice listen`` and a fresh
  loopback each time (``--starts``, one per opener by default); how loud its echo is in the
  microphone, before and after cancellation, and whether the assistant interrupted
  itself. ``--busy N`` keeps N cores spinning meanwhile: under load, how the two
  streams start decides whether the echo reference leads its echo;
- barge-in: one second into each reply, the user speaks over it (a sentence at
  a normal level, and a quiet "stop"); a success is an interruption that came
  after the user started and none before.

Replies are greedy and capped at 60 tokens.

Offline, the same run compares the echo cancellers on a synthetic echo (a Piper
reply at -18 dBFS, 40 ms late) with a user speaking over it: echo left after 1 s
of adaptation, how much of the user survives, and CPU. The WebRTC module from
``aec-audio-processing`` is the one ``voice listen`` uses; livekit's build of
the same module is measured when the ``livekit`` package is installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio import write_wav
from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE, pcm16_to_float, to_pcm16
from voice.bench.corpus import Clip
from voice.bench.pulse import ListenProcess, PulseRig
from voice.errors import VoiceError
from voice.stats import p50_p95

OPENERS = ("ljspeech_LJ001-0008", "cmu_arctic_axb_a0004", "cmu_arctic_aew_a0003")
BARGES = ("cmu_arctic_axb_a0005", "speechcommands_stop_6a27a9bf")
ENV = {"VOICE_LLM_TEMPERATURE": "0", "VOICE_LLM_MAX_REPLY_TOKENS": "60"}
SUMMARY = re.compile(r"microphone (-?[\d.]+) dBFS as heard, (-?[\d.]+) dBFS after")
DEVICES = re.compile(r"^devices: (.*?)(?: \(audio was lost|$)", re.M)
DRIFT = re.compile(r"ran ([+-]\d+) ppm .* from (\d+) echo lags \(([+-]\d+) samples")
SESSION_S = 60.0  # a drift session: replies back to back for this long


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


def _echo_trials(rig: PulseRig, mode: str, wavs: dict[str, Path], starts: int) -> dict[str, Any]:
    """``starts`` replies to the openers in turn, each from a fresh ``voice listen``:
    how well the echo is cancelled depends on how the two streams started (see
    ``PlayedReference``), so every reply is a new start."""
    runs = [_echo_start(rig, mode, wavs[OPENERS[k % len(OPENERS)]]) for k in range(starts)]
    report: dict[str, Any] = {
        key: sum(run[key] for run in runs)
        for key in ("replies", "interrupted_itself", "paused_itself")
    }
    report["starts_that_interrupted_themselves"] = sum(bool(r["interrupted_itself"]) for r in runs)
    for key in ("echo_dbfs", "after_cancellation_dbfs", "device_problems"):
        report[key] = [run[key] for run in runs]
    values = [v for run in runs for v in run["voice_to_voice"]]
    report["voice_to_voice_ms"] = p50_p95(values)
    return report


def _fresh_listen(rig: PulseRig, env: dict[str, str], mode: str,
                  drive: Callable[[ListenProcess], None]) -> tuple[ListenProcess, str]:  # fmt: skip
    """A fresh ``voice listen`` on a fresh loopback (PulseAudio's settles its latency
    in its first seconds, as some real devices do), driven by ``drive``, then
    stopped: it and what it printed."""
    loop = rig.loop_speaker_into_mic()
    try:
        listening = ListenProcess(rig, env, "--echo", mode)
        try:
            drive(listening)
        finally:
            _, err = listening.stop()
    finally:
        rig.pactl("unload-module", loop)
    return listening, err


def _echo_start(rig: PulseRig, mode: str, wav: Path) -> dict[str, Any]:
    """One reply from a fresh start: the case the reference's alignment must survive,
    and the one CI failed on."""

    def one_reply(listening: ListenProcess) -> None:
        rig.play(wav)
        listening.wait(partial(_more, listening, "reply_end", 0), 90)
        time.sleep(0.5)

    listening, err = _fresh_listen(rig, ENV, mode, one_reply)
    match = SUMMARY.search(err)
    devices = DEVICES.search(err)
    return {
        "voice_to_voice": _v2v_values(listening),
        "replies": len(listening.of("reply_end")),
        "interrupted_itself": len(listening.of("interrupted")),
        "paused_itself": len(listening.of("paused")),
        "echo_dbfs": float(match.group(1)) if match else None,
        "after_cancellation_dbfs": float(match.group(2)) if match else None,
        "device_problems": devices.group(1) if devices else None,  # xruns, as listen says
    }


def _drift_sessions(rig: PulseRig, wavs: dict[str, Path], sessions: int) -> dict[str, Any]:
    """``sessions`` one-minute sessions with the drift correction on and as many with it
    off, replies back to back. The rig's two virtual devices share a clock, but a
    starved sound server makes its echo path drift (run with ``--busy 2``)."""
    report: dict[str, Any] = {}
    for correct in (True, False):
        runs = [_drift_session(rig, wavs, correct) for _ in range(sessions)]
        report["corrected" if correct else "uncorrected"] = {
            key: [run[key] for run in runs] for key in runs[0]
        }
    return report


def _drift_session(rig: PulseRig, wavs: dict[str, Path], correct: bool) -> dict[str, Any]:
    def replies_for_a_minute(listening: ListenProcess) -> None:
        end, turn = time.monotonic() + SESSION_S, 0
        while time.monotonic() < end - 15:  # room for the last reply
            replies = len(listening.of("reply_end"))
            rig.play(wavs[OPENERS[turn % len(OPENERS)]])
            listening.wait(partial(_more, listening, "reply_end", replies), 60)
            time.sleep(1.0)
            turn += 1
        time.sleep(max(0.0, end - time.monotonic()))

    env = {**ENV, "VOICE_DESK_DRIFT": "true" if correct else "false"}
    listening, err = _fresh_listen(rig, env, "cancel", replies_for_a_minute)
    echo, drift = SUMMARY.search(err), DRIFT.search(err)
    return {
        "drift_ppm": int(drift.group(1)) if drift else None,
        "echo_lags": int(drift.group(2)) if drift else None,
        "samples_made_up": int(drift.group(3)) if drift else None,
        "after_cancellation_dbfs": float(echo.group(2)) if echo else None,
        "replies": len(listening.of("reply_end")),
        "paused_itself": len(listening.of("paused")),
        "interrupted_itself": len(listening.of("interrupted")),
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
    report: dict[str, Any] = {
        name: {"succeeded": sum(ok), "trials": len(ok)} for name, ok in results.items()
    }
    # Every interruption's reaction, as the session measured it (in headset mode on
    # speakers that includes the assistant interrupting itself).
    metrics = listening.of("turn_metrics")
    reactions = [float(m["barge_in_ms"]) for m in metrics if m.get("barge_in_ms")]
    report["barge_in_ms"] = p50_p95(reactions)
    report["voice_to_voice_ms"] = _v2v(listening)
    return report


def _v2v(listening: ListenProcess) -> dict[str, Any]:
    return p50_p95(_v2v_values(listening))


def _v2v_values(listening: ListenProcess) -> list[float]:
    """Voice-to-voice as the session measured it: the end of the user's speech to the
    first reply sample taken by the output callback (PortAudio's own output latency,
    tens of ms, comes on top)."""
    return [
        float(m["voice_to_voice_ms"])
        for m in listening.of("turn_metrics")
        if m.get("voice_to_voice_ms") is not None
    ]


def _dbfs(audio: npt.NDArray[np.float32]) -> float:
    return round(10.0 * float(np.log10(np.mean(audio.astype(np.float64) ** 2) + 1e-12)), 1)


def _at_level(audio: npt.NDArray[np.float32], dbfs: float) -> npt.NDArray[np.float32]:
    speech = audio[np.abs(audio) > 0.01]
    gain = 10 ** (dbfs / 20) / float(np.sqrt(np.mean(speech**2)))
    return (audio * gain).astype(np.float32)


def _run_webrtc(mic: npt.NDArray[np.float32], ref: npt.NDArray[np.float32]) -> Any:
    from voice.transports.echo import WebRtcEchoCanceller

    canceller = WebRtcEchoCanceller(delay_ms=40)
    n = FRAME_SAMPLES
    return np.concatenate(
        [canceller.process(mic[i : i + n], ref[i : i + n]) for i in range(0, len(mic) - n + 1, n)]
    )


def _run_livekit(mic: npt.NDArray[np.float32], ref: npt.NDArray[np.float32]) -> Any:
    from livekit import rtc

    apm = rtc.AudioProcessingModule(echo_cancellation=True)
    apm.set_stream_delay_ms(40)
    out, n = [], SAMPLE_RATE // 100
    for i in range(0, len(mic) - n + 1, n):
        far = rtc.AudioFrame(to_pcm16(ref[i : i + n]), SAMPLE_RATE, 1, n)
        near = rtc.AudioFrame(to_pcm16(mic[i : i + n]), SAMPLE_RATE, 1, n)
        apm.process_reverse_stream(far)
        apm.process_stream(near)
        out.append(pcm16_to_float(bytes(near.data)))
    return np.concatenate(out)


def compare_cancellers(clips: list[Clip]) -> dict[str, Any]:
    """Echo left and user kept, per canceller, on a synthetic echo with double talk."""
    from voice.speak.tts import PiperTts, TtsConfig

    by_name = {c.name: c for c in clips}
    reply = PiperTts(TtsConfig(output_rate=SAMPLE_RATE)).synthesize_all(
        "I'm glad you're enjoying my help. I'm here to help with anything and everything, "
        "from your projects to your business."
    )
    ref = _at_level(reply, -18.0)
    delay = int(0.04 * SAMPLE_RATE)
    echo = np.concatenate([np.zeros(delay, np.float32), ref])[: len(ref)]
    start = 3 * SAMPLE_RATE
    runners = {"aec-audio-processing": _run_webrtc, "livekit": _run_livekit}
    report: dict[str, Any] = {}
    for name, runner in runners.items():
        rows: dict[str, Any] = {}
        for barge, level in zip(BARGES, (-15.0, -25.0), strict=True):
            user = _at_level(by_name[barge].audio(lead_s=0.0), level)
            end = min(len(ref), start + len(user))
            near = np.zeros(len(ref), np.float32)
            near[start:end] = user[: end - start]
            mic = echo + near
            try:
                began = time.perf_counter()
                out = runner(mic, ref)
                cpu = (time.perf_counter() - began) * 1000.0 / (len(mic) / SAMPLE_RATE)
            except ImportError:
                rows = {"skipped": f"{name} is not installed"}
                break
            rows[f"{barge} at {level:.0f} dBFS"] = {
                "echo_dbfs": _dbfs(mic[SAMPLE_RATE:start]),
                "echo_left_dbfs": _dbfs(out[SAMPLE_RATE:start]),
                "user_dbfs": _dbfs(near[start:end]),
                "user_kept_dbfs": _dbfs(out[start:end]),
                "cpu_ms_per_s": round(cpu, 1),
            }
        report[name] = rows
    return report


def bench_desk(clips: list[Clip], busy: int = 0, starts: int | None = None, sessions: int = 0
               ) -> dict[str, Any]:  # fmt: skip
    """``busy``: that many processes spin on a core each during the device trials, the
    load under which CI once saw the reply interrupt itself (a misaligned reference);
    ``starts``: fresh ``voice listen`` starts for the echo trials, a reply each (one
    per opener unless given);
    ``sessions``: one-minute drift sessions each with the drift correction on and off
    (only these run when it is given)."""
    starts = len(OPENERS) if starts is None else starts
    report: dict[str, Any] = {"busy": busy}
    if not sessions:  # the drift sessions are all that runs then
        report.update(cancellers_offline=compare_cancellers(clips), starts=starts)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        with tempfile.TemporaryDirectory() as folder:
            wavs = _wavs(clips, Path(folder))
            rig = PulseRig(Path(folder) / "rig")
            try:
                if sessions:
                    report["drift"] = _drift_sessions(rig, wavs, sessions)
                    return report
                for mode in ("cancel", "headset"):
                    echo = _echo_trials(rig, mode, wavs, starts)
                    loop = rig.loop_speaker_into_mic()
                    barge_in = _barge_trials(rig, mode, wavs)
                    rig.pactl("unload-module", loop)
                    report[mode] = {"echo": echo, "barge_in": barge_in}
            finally:
                rig.stop()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    return report
