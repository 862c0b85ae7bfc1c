"""The spoken pass of ``voice bench knowledge``: the questions said by the Piper voice
into one real conversation (the simulator: VAD, streaming Whisper, speculation,
turn-taking, the reply spoken and played), each asked a second after the last reply
ended; once with the knowledge file (the policy chosen) and once as before it (the
entries pasted into the prompt). Per run: right facts, unknown replies and
voice-to-voice p50/p95. The lookup runs inside the session, mostly while the user
pauses (on the speculative transcript), and the simulator's clock does not charge
it; its own cost is the retrieval's ``lookup_ms``.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from voice.app.build import build_session
from voice.audio.format import SAMPLE_RATE
from voice.config import Settings
from voice.conversation.metrics import summarize
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, simulate


def spoken_run(
    settings: Settings,
    engines: Engines,
    questions: list[Any],
    unknown: str,
    follow_ups: dict[int, list[str]] | None = None,
) -> dict[str, Any]:
    """``follow_ups``: the visitor's "yes" or "no" to each question back after question
    i, where the typed pass asked it back (each said after the reply before it, as that
    visitor would)."""
    from voice.bench.knowledge import carries

    follow_ups = follow_ups or {}
    turns: list[ScriptTurn] = []
    owner: list[int] = []  # the question each turn belongs to
    for i, question in enumerate(questions):
        for text in (question.q, *follow_ups.get(i, [])):
            audio = np.concatenate(list(engines.tts.synthesize(text))).astype(np.float32)
            first = not turns
            turns.append(
                ScriptTurn(audio, f"q{i}", at_s=0.5 if first else None,
                           after=None if first else "reply_end", delay_s=1.0)
            )  # fmt: skip
            owner.append(i)
    result = simulate(Script(turns), build_session(settings, engines), engines)
    last, order = answers_by_question(result.events, turns, owner)
    said = [last.get(i, "") for i in range(len(questions))]
    right = unknowns = 0
    n_in = sum(q.in_scope for q in questions)
    for question, text in zip(questions, said, strict=False):
        declined = text.lower().startswith(unknown.lower())
        if question.in_scope:
            right += carries(text, question.expect)
        else:
            unknowns += declined
    wrong_turns = abs(len(order) - len(turns))
    summary = summarize(result.events)["summary"]
    return {
        "in_scope_right": f"{right}/{n_in}",
        "out_of_scope_unknown": f"{unknowns}/{len(questions) - n_in}",
        "replies_not_one_per_question": wrong_turns,
        "voice_to_voice_ms": summary["voice_to_voice_ms"],
        "speculation_hit_rate": summary["speculation_hit_rate"],
    }


def answers_by_question(
    events: list[dict[str, Any]], turns: list[ScriptTurn], owner: list[int]
) -> tuple[dict[int, str], list[int]]:
    """Each question's last reply (the answer after a yes or a no), and every reply's id
    in order. A reply belongs to the turn said last before it started: a visitor who
    paused mid-question and was answered twice (a reply cut off, then the whole turn's)
    must not shift every later answer onto the next question, as matching replies to
    turns in order did. ``owner``: the question each turn belongs to."""
    starts_ms = [
        float("inf") if t.start_sample is None else t.start_sample * 1000 / SAMPLE_RATE
        for t in turns
    ]
    replies: dict[int, str] = {}
    order: list[int] = []
    last_reply: dict[int, int] = {}
    for event in events:
        if event["type"] == "reply_start" and event["utterance_id"] != -1:
            order.append(event["reply_id"])
            replies[event["reply_id"]] = ""
            turn = bisect.bisect_right(starts_ms, float(event["audio_ms"])) - 1
            last_reply[owner[max(turn, 0)]] = event["reply_id"]
        elif event["type"] == "reply_text" and event["reply_id"] in replies:
            replies[event["reply_id"]] += event["text"]
    return {i: replies[reply_id].strip() for i, reply_id in last_reply.items()}, order
