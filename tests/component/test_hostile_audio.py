"""Hostile or broken audio through the real server and models: silence, DC offset,
clipping, white noise, the wrong byte order, the wrong declared rate, and one very
long utterance. No crash, no runaway memory, sensible transcripts or none, and a
clear error where the client can fix something."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import VoiceServer, clip, reference
from websockets.asyncio.client import connect

from voice.app.build import build_session, load_engines
from voice.audio.format import float_to_pcm16
from voice.bench.hostile import settled, standing_finals
from voice.config import Settings
from voice.runtime.clocks import ModelledCost, VirtualClock
from voice.runtime.faults import make_lane
from voice.stats import word_errors

# The served tests are paced in real time; the long utterance runs on modelled costs.
pytestmark = pytest.mark.slow

GLAD = "cmu_arctic_axb_a0004"  # "Lord, but I'm glad to see you again, Phil."


async def stream(
    url: str,
    pcm: bytes,
    rate: int = 16000,
    frame_samples: int = 320,
    pace_s: float = 0.02,
    listen_s: float = 4.0,
    until: Callable[[list[dict[str, Any]]], bool] | None = None,
) -> list[dict[str, Any]]:
    """Send ``pcm`` after a hello at ``rate``, one frame every ``pace_s``; collect every
    text message until ``listen_s`` after the last frame, or sooner once ``until`` holds
    of them (what the test waits for has come, and nothing more is owed)."""
    messages: list[dict[str, Any]] = []
    async with connect(url, max_size=2**20) as ws:
        hello = {"type": "hello", "protocol": 1, "sample_rate": rate, "format": "pcm16"}
        await ws.send(json.dumps(hello))

        async def receive() -> None:
            async for raw in ws:
                if isinstance(raw, str):
                    messages.append(json.loads(raw))

        receiver = asyncio.create_task(receive())
        step = frame_samples * 2
        started = time.monotonic()
        for k, i in enumerate(range(0, len(pcm), step)):
            await ws.send(pcm[i : i + step])
            await asyncio.sleep(max(0.0, started + (k + 1) * pace_s - time.monotonic()))
        deadline = time.monotonic() + listen_s
        while time.monotonic() < deadline and not (until and until(messages)):
            await asyncio.sleep(0.05)
        receiver.cancel()
    assert messages and messages[0]["type"] == "ready"
    return messages


def of(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["type"] == kind]


def pcm(audio: np.ndarray) -> bytes:
    return float_to_pcm16(np.asarray(audio, dtype=np.float32)).astype("<i2").tobytes()


def reply_started(messages: list[dict[str, Any]]) -> bool:
    """The turn has ended and its reply begun: no more words of it will come."""
    return bool(of(messages, "reply_start"))


def word_error_rate(name: str, text: str) -> float:
    errors, words = word_errors(reference(name), text)
    return errors / words


@pytest.mark.alone
def test_silence_and_white_noise_are_not_speech(voice_server: VoiceServer) -> None:
    noise = np.random.default_rng(3).normal(0, 0.1, 3 * 16000)  # -20 dBFS hiss
    audio = np.concatenate([np.zeros(16000), noise, np.zeros(8000)])
    # 3 s after the hiss: a turn it had started would have ended, been heard and
    # answered by then (its end is due 0.5-1 s after the hiss, its final a pass later).
    messages = asyncio.run(stream(voice_server.ws_url, pcm(audio), listen_s=2.5))
    assert not of(messages, "error")
    assert not [f for f in of(messages, "final") if f["text"].strip()]
    assert not of(messages, "reply_start")


@pytest.mark.alone
@pytest.mark.parametrize(
    ("damage", "max_wer"),
    [
        ("dc", 0.35),  # a +0.25 offset under the speech
        ("clipped", 0.5),  # 8x too loud, flattened at full scale
    ],
)
def test_damaged_speech_is_still_understood(
    voice_server: VoiceServer, damage: str, max_wer: float
) -> None:
    speech = clip(GLAD, lead_s=0.3, tail_s=1.0)
    audio = speech + 0.25 if damage == "dc" else np.clip(speech * 8.0, -1.0, 1.0)
    messages = asyncio.run(stream(voice_server.ws_url, pcm(audio), until=reply_started))
    assert not of(messages, "error")
    (final,) = [f for f in of(messages, "final") if f["text"].strip()]
    assert word_error_rate(GLAD, final["text"]) <= max_wer, final["text"]


@pytest.mark.alone
def test_big_endian_audio_gets_a_clear_error_and_the_session_goes_on(
    voice_server: VoiceServer,
) -> None:
    swapped = float_to_pcm16(clip(GLAD, lead_s=0.3)).astype(">i2").tobytes()
    good = pcm(clip("cmu_arctic_aew_a0003", lead_s=1.0, tail_s=1.0))

    def heard(messages: list[dict[str, Any]]) -> bool:
        return any("shook hands" in f["text"].lower() for f in of(messages, "final"))

    messages = asyncio.run(stream(voice_server.ws_url, swapped + good, listen_s=6.0, until=heard))
    errors = of(messages, "error")
    assert [e["code"] for e in errors] == ["byte_order"]
    assert "little-endian" in errors[0]["message"]
    assert heard(messages)


@pytest.mark.alone
def test_a_wrong_declared_rate_is_named_in_the_error(voice_server: VoiceServer) -> None:
    # The client says 8 kHz but sends 16 kHz audio at real time: twice the samples.
    audio = pcm(clip(GLAD, lead_s=0.3, tail_s=0.5))
    messages = asyncio.run(stream(voice_server.ws_url, audio, rate=8000, listen_s=2.0))
    errors = of(messages, "error")
    assert errors and {e["code"] for e in errors} == {"too_fast"}
    speed = re.search(r"at (\d+\.\d)x real time", errors[0]["message"])
    # About 2x; a client slowed by a busy machine offers less (1.4x seen once in a full
    # run here), and over 1.3x the server names the declared rate, which is the point.
    assert speed is not None and 1.3 < float(speed.group(1)) <= 2.1
    assert "sample_rate (8000)" in errors[0]["message"]


@pytest.mark.alone
def test_too_high_a_declared_rate_gives_no_words_or_a_few_and_no_crash(
    voice_server: VoiceServer,
) -> None:
    # The client says 48 kHz and sends 16 kHz: the server hears it three times too slow.
    audio = pcm(clip(GLAD, lead_s=0.3, tail_s=0.5))
    messages = asyncio.run(stream(voice_server.ws_url, audio, rate=48000, frame_samples=960,
                                  pace_s=0.06, listen_s=3.0))  # fmt: skip
    assert not of(messages, "error")
    assert voice_server.health()["status"] == "ok"


def test_a_very_long_utterance_keeps_a_bounded_buffer_and_a_transcript(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thirty-two seconds of speech without a pause long enough to end the turn (past
    the 29 s a recognition pass may take; `voice bench hostile` runs five minutes): no
    pass is given more than Whisper's window, the listener's buffer never exceeds what
    one pass takes, and the final transcript holds words from its start and its end.
    On modelled costs, so what it asserts does not depend on the CPU it gets."""
    names = ["jfk_inaugural_1961", "ljspeech_LJ001-0008", "cmu_arctic_axb_a0004"]
    pieces = [clip(n, lead_s=0.0) for n in names]
    audio = np.concatenate([np.concatenate([p, np.zeros(2400)]) for p in pieces] * 2)
    assert len(audio) > 31 * 16000
    settings = Settings()
    engines = load_engines(settings)
    passes: list[int] = []  # the samples of each recognition pass
    transcribe = engines.asr.transcribe

    def counted(audio, *args, **kwargs):  # type: ignore[no-untyped-def]
        passes.append(len(audio))
        return transcribe(audio, *args, **kwargs)

    monkeypatch.setattr(engines.asr, "transcribe", counted)
    session = build_session(settings, engines)
    clock = VirtualClock(session, make_lane(engines), ModelledCost())
    most = 0
    for i in range(0, len(audio), 320):
        clock.advance(session.now_ms + 20)
        session.feed(audio[i : i + 320])
        most = max(most, session.listener.buffered_samples)
    events = session.take()
    # A turn the user went on with is heard again whole: its final replaces the earlier
    # ones (turn_continued names the utterance it continues; a rehearing repeats the id).
    # So the user's silence is fed until the newest utterance has a final of its own that
    # nothing continues, and past the window in which a continuation could still be
    # decided: an earlier final (a pause inside the 50 s) does not end the wait.
    end_ms = len(audio) / 16
    while session.now_ms < end_ms + 20e3 and not (
        session.now_ms > end_ms + 5e3 and settled(events)
    ):
        clock.advance(session.now_ms + 20)
        session.feed(np.zeros(320, np.float32))  # the user has stopped: the turn ends
        events += session.take()
    finals = standing_finals(events)
    # The 29 s engine limit plus the audio that arrives while a pass runs (a 29 s pass
    # is charged 755 ms).
    assert most <= 30 * 16000
    assert passes and max(passes) <= 29 * 16000  # Whisper's window, never more
    text = " ".join(f.text for f in finals).lower()
    # Words from its first clip and its last ("...glad to see you again, Phil."): the
    # last clip's opening varies with where the pauses' passes fall ("Lord, what I'm
    # like to see you again, Phil!" was seen), its close does not.
    assert "fellow americans" in text and "see you again" in text, text
    said = " ".join(reference(n) for n in names * 2)
    errors, words = word_errors(said, text)
    assert errors / words < 0.4, text
