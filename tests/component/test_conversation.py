"""Scripted conversations through the real models (Whisper, SmolLM2, Piper) on corpus audio.

Each test plays a script into a session on the virtual clock and checks what a
user would notice: what was answered, what was played, what was stopped, and
what the history remembers. Timing figures live in ``voice bench conversation``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import clip

from voice.app.build import build_session, load_engines
from voice.config import Settings
from voice.conversation.session import Session
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate


@pytest.fixture(scope="module")
def engines() -> Engines:
    settings = Settings()
    settings.llm.max_reply_tokens = 60
    # Greedy decoding: the same reply every run, so speech scripted to land over a
    # reply always finds one playing (a sampled reply can be one short sentence).
    settings.llm.temperature = 0.0
    settings.tts.variation = False  # the same voice every run: replies as long, turns placed alike
    return load_engines(settings)


def converse(engines: Engines, turns: list[ScriptTurn]) -> tuple[SimulationResult, Session]:
    settings = Settings()
    settings.llm.max_reply_tokens = 60
    session = build_session(settings, engines)
    return simulate(Script(turns), session, engines, repeatable=True), session


def turn(name: str, at_s: float | None = None, after: str = "", delay: float = 0.0,
         seconds: float | None = None) -> ScriptTurn:  # fmt: skip
    audio = clip(name, lead_s=0.0)
    if seconds is not None:
        audio = audio[: int(seconds * 16000)]
    return ScriptTurn(audio=audio, name=name, at_s=at_s, after=after or None, delay_s=delay)


def of(result: SimulationResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


def played_between(result: SimulationResult, start_ms: float, end_ms: float) -> bool:
    return bool(np.abs(result.played[int(start_ms * 16) : int(end_ms * 16)]).max(initial=0) > 0)


def test_a_turn_is_answered_with_speech(engines: Engines) -> None:
    result, session = converse(engines, [turn("cmu_arctic_axb_a0004", at_s=0.5)])
    (final,) = of(result, "final")
    assert "glad to see you" in final["text"].lower()
    (start,) = of(result, "reply_start")
    assert start["speculative"]  # prepared during the pause, kept
    (end,) = of(result, "reply_end")
    assert not end["interrupted"] and end["text"].strip()
    (metrics,) = of(result, "turn_metrics")
    assert metrics["voice_to_voice_ms"] is not None
    # The reply was heard after the user finished, and the history remembers it.
    assert not played_between(result, 0, final["end_ms"])
    assert played_between(result, start["audio_ms"], end["audio_ms"])
    assert [m.role for m in session.history.turns] == ["user", "assistant"]
    assert session.history.turns[1].content == end["text"].strip()


def test_a_mid_sentence_pause_does_not_end_the_turn(engines: Engines) -> None:
    # "He hoped there would be stew for dinner, [~0.4 s] turnips and carrots and bruised
    # potatoes and fat mutton pieces ... sauce": one turn, answered only at the end.
    audio = clip("librispeech_1089-134686-0000", lead_s=0.0)
    result, _ = converse(engines, [ScriptTurn(audio=audio, name="pause", at_s=0.5)])
    (final,) = of(result, "final")
    assert final["text"].lower().startswith("he hoped") and "sauce" in final["text"].lower()
    (start,) = of(result, "reply_start")
    assert start["audio_ms"] > 500 + len(audio) / 16  # never before the user finished


def test_numbers_read_out_with_pauses_are_one_turn(engines: Engines) -> None:
    # "One [600 ms] two [620 ms] three": each group alone is transcribed "1." and looks
    # finished; a 500 ms wait answered after "1." and again after "2.".
    audio = clip("uberi_one_two_three", lead_s=0.0)
    result, _ = converse(engines, [ScriptTurn(audio=audio, name="numbers", at_s=0.5)])
    (final,) = of(result, "final")
    assert [c for c in final["text"] if c.isdigit()] == ["1", "2", "3"], final["text"]
    (start,) = of(result, "reply_start")
    assert start["audio_ms"] > 500 + len(audio) / 16


def test_a_speculation_is_discarded_when_the_user_goes_on(engines: Engines) -> None:
    """A pause long enough to prepare a reply, then more words: the prepared reply is
    cancelled, never shown or played, and the turn is answered once, in full."""
    audio = clip("librispeech_1089-134686-0000", lead_s=0.0)
    cut = int(2.62 * 16000)  # between "dinner," and "turnips"
    audio = np.concatenate([audio[:cut], np.zeros(int(0.6 * 16000), np.float32), audio[cut:]])
    settings = Settings()
    settings.turn.complete_silence_ms = settings.vad.end_silence_ms = 1000
    session = build_session(settings, engines)
    turns = [ScriptTurn(audio=audio, name="pause", at_s=0.5)]
    result = simulate(Script(turns), session, engines, repeatable=True)
    cancelled = {e["gen_id"] for e in of(result, "speculation_cancel")}
    assert cancelled
    (final,) = of(result, "final")
    assert "dinner" in final["text"].lower() and "sauce" in final["text"].lower()
    (start,) = of(result, "reply_start")
    assert start["text"] == final["text"] and start["reply_id"] not in cancelled
    assert {e["reply_id"] for e in of(result, "reply_text")} == {start["reply_id"]}
    assert {e["reply_id"] for e in of(result, "audio_chunk")} == {start["reply_id"]}


def test_stop_silences_the_reply_and_history_keeps_what_was_heard(engines: Engines) -> None:
    result, session = converse(
        engines,
        [
            turn("ljspeech_LJ001-0008", at_s=0.5),  # a reply long enough to cut
            turn("speechcommands_stop_6a27a9bf", after="reply_start", delay=1.2),
        ],
    )
    (interrupted,) = of(result, "interrupted")
    (end,) = of(result, "reply_end")
    assert end["interrupted"] and len(end["heard_text"]) < len(end["text"].strip())
    assert len(of(result, "reply_start")) == 1  # "stop" is obeyed, not answered
    assert session.history.turns[-1].content == interrupted["heard_text"]
    # Nothing plays once the output paused for the barge-in.
    stopped = of(result, "paused")[0]["audio_ms"]
    assert not played_between(result, stopped + 20, len(result.played) / 16)
    assert session.state == "listening"


def test_noise_over_the_reply_does_not_interrupt(engines: Engines) -> None:
    result, session = converse(
        engines,
        [
            turn("ljspeech_LJ001-0008", at_s=0.5),
            turn("music_vibe_ace_jazz", after="reply_start", delay=0.5, seconds=4.0),
        ],
    )
    assert not of(result, "interrupted")
    (end,) = of(result, "reply_end")
    assert not end["interrupted"]
    assert session.history.turns[-1].content == end["text"].strip()


def test_a_burst_of_music_pauses_the_reply_and_it_resumes(engines: Engines) -> None:
    """Like a cough or a door: it passes the VAD, has no words, and must not kill the reply."""
    burst = clip("music_vibe_ace_jazz", lead_s=0.0)[2 * 16000 : int(3.5 * 16000)]
    result, session = converse(
        engines,
        [
            turn("cmu_arctic_axb_a0005", at_s=0.5),
            ScriptTurn(audio=burst, name="jazz burst", after="reply_start", delay_s=1.0),
        ],
    )
    assert not of(result, "interrupted")
    paused, resumed = of(result, "paused"), of(result, "resumed")
    assert paused and len(resumed) == len(paused)
    assert resumed[0]["audio_ms"] > paused[0]["audio_ms"]
    (end,) = of(result, "reply_end")
    assert not end["interrupted"]
    assert played_between(result, resumed[0]["audio_ms"], end["audio_ms"])
    assert session.history.turns[-1].content == end["text"].strip()  # nothing lost


@pytest.mark.alone  # charged real compute, or paced in real time
def test_simulate_cli_runs_the_demo_and_writes_the_four_outputs(tmp_path: Path) -> None:
    """The README's first command: the bundled demo conversation, with a barge-in."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "voice.cli", "simulate", "-o", str(out)],
        capture_output=True, text=True, timeout=600,
        env={"VOICE_LLM_MAX_REPLY_TOKENS": "40", "VOICE_LLM_TEMPERATURE": "0",
             "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(Path.home())},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "voice-to-voice p50" in done.stdout
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import wave

    with wave.open(str(out / "conversation.wav")) as wav:
        assert wav.getnchannels() == 2 and wav.getframerate() == 16000
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    finals = [e["text"].lower() for e in events if e["type"] == "final"]
    assert any("glad to see you" in f for f in finals) and any("stella" in f for f in finals)
    assert any(e["type"] == "interrupted" for e in events)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["summary"]["turns"] == 3
    assert metrics["summary"]["barge_in_ms"]["n"] == 1
    assert metrics["summary"]["voice_to_voice_ms"]["n"] == 3


@pytest.mark.alone  # charged real compute, or paced in real time
def test_the_wall_clock_runs_the_same_conversation(engines: Engines) -> None:
    """Engines on their worker thread, audio paced in real time: a turn, then a barge-in."""
    settings = Settings()
    session = build_session(settings, engines)
    turns = [
        turn("cmu_arctic_axb_a0005", at_s=0.3),
        turn("vctk_p225_001", after="reply_start", delay=0.8),
    ]
    result = simulate(Script(turns), session, engines, realtime=True)
    finals = [e["text"].lower() for e in of(result, "final")]
    assert any("forget" in f for f in finals) and any("stella" in f for f in finals)
    assert len(of(result, "interrupted")) == 1
    assert result.wall_s >= len(result.heard) / 16000 * 0.95  # it really ran in real time
