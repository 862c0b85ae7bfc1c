"""The conversation timeline renders a PNG whose width follows the conversation's length."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from voice.conversation.timeline import render_timeline

SR = 16_000
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def conversation(scale: float = 1.0) -> list[dict[str, Any]]:
    """Two user turns; the first reply is interrupted by the second turn, the second plays out.

    Times are for an ~8 s conversation; ``scale`` stretches them.
    """

    def ev(kind: str, at: float, **fields: Any) -> dict[str, Any]:
        fields = {
            k: v * scale if k.endswith("_ms") and v is not None else v for k, v in fields.items()
        }
        return {"type": kind, "audio_ms": at * scale, **fields}

    return [
        ev("state", 0, state="listening", previous="listening"),
        ev("speech_start", 350, utterance_id=1, start_ms=300),
        ev("state", 350, state="user_speaking", previous="listening"),
        ev("partial", 800, utterance_id=1, text="what is", committed="", unstable="what is"),
        ev("partial", 1000, utterance_id=1, text="what is the", committed="what", unstable="is"),
        ev("partial", 1400, utterance_id=1, text="what is the weather", committed="what is"),
        ev("speech_end", 2100, utterance_id=1, start_ms=300, end_ms=1900),
        ev("state", 1950, state="speculating", previous="user_speaking"),
        ev("speculation_start", 1950, utterance_id=1, gen_id=1, text="what is the weather"),
        ev("speculation_cancel", 2000, gen_id=1, reason="transcript changed"),
        ev("final", 2100, utterance_id=1, text="What is the weather?", start_ms=300, end_ms=1900),
        ev("state", 2100, state="thinking", previous="speculating"),
        ev("reply_start", 2100, reply_id=1, utterance_id=1, text="What is the weather?"),
        ev("reply_text", 2300, reply_id=1, text="It is sunny "),
        ev("reply_text", 2400, reply_id=1, text="and warm today, with a light breeze."),
        ev("playback_start", 2500, reply_id=1),
        ev("state", 2500, state="speaking", previous="thinking"),
        ev("speech_start", 3600, utterance_id=2, start_ms=3500),
        ev("paused", 3600, reply_id=1),
        ev("state", 3600, state="paused", previous="speaking"),
        ev("interrupted", 3900, reply_id=1, heard_text="It is sunny", played_ms=1000),
        ev("state", 3900, state="interrupted", previous="paused"),
        ev("reply_end", 3900, reply_id=1, text="", heard_text="It is sunny", interrupted=True),
        ev("state", 3950, state="user_speaking", previous="interrupted"),
        ev("partial", 4300, utterance_id=2, text="stop, tell me a joke"),
        ev("speech_end", 5000, utterance_id=2, start_ms=3500, end_ms=4800),
        ev("final", 5000, utterance_id=2, text="Stop, tell me a joke.", start_ms=3500, end_ms=4800),
        ev(
            "turn_metrics",
            5000,
            turn_id=1,
            reply_id=1,
            user_end_ms=1900,
            voice_to_voice_ms=600,
            barge_in_ms=400,
            interrupted=True,
        ),
        ev(
            "reply_start",
            5000,
            reply_id=2,
            utterance_id=2,
            text="Stop, tell me a joke.",
            speculative=False,
        ),
        ev("state", 5000, state="thinking", previous="user_speaking"),
        ev("playback_start", 5400, reply_id=2),
        ev("state", 5400, state="speaking", previous="thinking"),
        ev(
            "reply_end",
            7500,
            reply_id=2,
            text="Why did the chicken cross the road?",
            heard_text="Why did the chicken cross the road?",
            interrupted=False,
        ),
        ev(
            "turn_metrics",
            7500,
            turn_id=2,
            reply_id=2,
            user_end_ms=4800,
            voice_to_voice_ms=600,
            barge_in_ms=None,
            interrupted=False,
        ),
        ev("state", 7500, state="listening", previous="speaking"),
        ev("error", 7600, code="demo", message="a harmless error"),
        {"type": "something_new", "audio_ms": 7700.0},  # unknown: ignored
        {"type": "paused"},  # no audio_ms, no reply_id: must not crash
    ]


def audio(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    wave = 0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.4 * t) > 0)
    return (wave + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def png_width(path: Path) -> int:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    width, _height = struct.unpack(">II", data[16:24])
    return int(width)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("timeline")
    short, long = out / "short.png", out / "long.png"
    # played is shorter than heard: the assistant's track is padded on the picture.
    render_timeline(short, conversation(), audio(8, 0), audio(7.5, 1), title="two turns")
    render_timeline(long, conversation(30 / 8), audio(30, 2), audio(28, 3), title="stretched")
    return short, long


def test_renders_a_png(rendered: tuple[Path, Path]) -> None:
    short, _ = rendered
    assert short.exists()
    assert short.read_bytes().startswith(PNG_MAGIC)
    assert png_width(short) >= 1000


def test_longer_conversation_gives_a_wider_picture(rendered: tuple[Path, Path]) -> None:
    short, long = rendered
    assert png_width(long) > png_width(short)


def test_empty_conversation_still_renders(tmp_path: Path) -> None:
    path = tmp_path / "empty.png"
    empty = np.zeros(0, np.float32)
    render_timeline(path, [], empty, empty)
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_wake_and_idle_are_marked(tmp_path: Path) -> None:
    from voice.conversation.timeline import MARKERS, STATE_COLORS, render_timeline

    events = [
        {"type": "idle", "audio_ms": 0.0, "reason": "start"},
        {"type": "state", "audio_ms": 20.0, "state": "idle", "previous": "listening"},
        {"type": "wake", "audio_ms": 900.0, "reason": "wake_word", "phrase": "Hey Jarvis",
         "start_ms": 600.0},
        {"type": "state", "audio_ms": 900.0, "state": "user_speaking", "previous": "idle"},
    ]  # fmt: skip
    assert "wake" in MARKERS and "idle" in MARKERS and "idle" in STATE_COLORS
    render_timeline(tmp_path / "t.png", events, np.zeros(32000, np.float32),
                    np.zeros(32000, np.float32))  # fmt: skip
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_tool_calls_are_marked_with_their_name_and_outcome(tmp_path: Path) -> None:
    from voice.conversation.timeline import marker, render_timeline

    call = {"type": "tool_call", "audio_ms": 1200.0, "reply_id": 1, "call_id": 1,
            "name": "sell", "arguments": {"item": "sword"}, "choose_ms": 7.0}  # fmt: skip
    done = {"type": "tool_result", "audio_ms": 1500.0, "reply_id": 1, "call_id": 1,
            "name": "sell", "status": "cancelled", "result": "", "run_ms": 300.0}  # fmt: skip
    assert marker(call)[2] == "call sell" and marker(done)[2] == "sell cancelled"
    render_timeline(tmp_path / "t.png", [call, done], np.zeros(32000, np.float32),
                    np.zeros(32000, np.float32))  # fmt: skip
    assert (tmp_path / "t.png").stat().st_size > 1000
