"""Six read sentences said one after another into a whole conversation on the virtual
clock (VAD, incremental Whisper, speculation, SmolLM2 with the reply guard, Piper), with
jittered pauses and lead-ins: no reply repeats a sentence of the recent ones as a listener
hears it, none runs past 8 s of audio, and the same script with the same seed gives the
same replies run after run (issue 56)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from conftest import clip

from voice.app.build import build_session, load_engines
from voice.config import Settings
from voice.reply.repeats import find_repeats
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, simulate

pytestmark = pytest.mark.slow

SENTENCES = [
    "cmu_arctic_aew_a0001",
    "librispeech_1089-134686-0000",
    "ljspeech_LJ001-0002",
    "cmu_arctic_axb_a0004",
    "librispeech_1272-128104-0000",
    "ljspeech_LJ001-0009",
]


@pytest.fixture(scope="module")
def engines() -> Engines:
    settings = Settings()
    settings.tts.variation = False  # as `voice simulate --repeatable` renders the voice
    return load_engines(settings)


def spoken(
    engines: Engines, jitter: int, count: int = len(SENTENCES)
) -> list[tuple[str, str, float]]:
    """The first ``count`` turns, each after a pause of 1-3 s and 0-480 ms of silence
    drawn from ``jitter``; per reply: what it answered, what was heard, its seconds of
    audio."""
    rng = random.Random(jitter)
    turns = []
    for index, name in enumerate(SENTENCES[:count]):
        lead = np.zeros(int(rng.uniform(0, 0.48) * 16000), np.float32)
        audio = np.concatenate([lead, clip(name, lead_s=0.0)])
        if index == 0:
            turns.append(ScriptTurn(audio=audio, name=name, at_s=0.5))
        else:
            turns.append(
                ScriptTurn(audio=audio, name=name, after="reply_end", delay_s=rng.uniform(1, 3))
            )
    settings = Settings()
    settings.llm.seed = 1  # as `voice simulate` samples where none is set
    session = build_session(settings, engines)
    result = simulate(Script(turns), session, engines, repeatable=True)
    audio_ms: dict[int, float] = {}
    replies: dict[int, list[str]] = {}
    for event in result.events:
        if event["type"] == "audio_chunk":
            audio_ms[event["reply_id"]] = audio_ms.get(event["reply_id"], 0) + event["duration_ms"]
        elif event["type"] == "reply_start":
            replies[event["reply_id"]] = [event["text"]]
        elif event["type"] == "reply_end":
            replies[event["reply_id"]].append(event["heard_text"].strip())
    return [(r[0], r[1], audio_ms.get(i, 0) / 1000) for i, r in replies.items() if len(r) == 2]


def test_spoken_replies_never_repeat_run_long_and_come_out_the_same_twice(
    engines: Engines,
) -> None:
    first = spoken(engines, jitter=1)
    assert len(first) == len(SENTENCES), first  # every turn answered, once
    fallback = Settings().llm.fallback_reply
    assert find_repeats([(u, r) for u, r, _ in first], skip=fallback) == []
    assert all(0 < seconds <= 8.0 for _, _, seconds in first), first
    assert sum(r == fallback for _, r, _ in first) <= 1, first
    # Another run of the same script (its first two turns, the second answered with the
    # first in its history: what a turn answers depends on nothing after it): the
    # compute each job took differs, the cost the clock charges for it and the words do
    # not.
    again = spoken(engines, jitter=1, count=2)
    assert [r for _, r, _ in again] == [r for _, r, _ in first[:2]]
