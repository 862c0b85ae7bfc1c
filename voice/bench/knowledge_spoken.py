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

from typing import Any

import numpy as np

from voice.app.build import build_session
from voice.config import Settings
from voice.conversation.metrics import summarize
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, simulate


def spoken_run(
    settings: Settings, engines: Engines, questions: list[Any], unknown: str
) -> dict[str, Any]:
    from voice.bench.knowledge import carries

    turns = []
    for i, question in enumerate(questions):
        audio = np.concatenate(list(engines.tts.synthesize(question.q))).astype(np.float32)
        turns.append(
            ScriptTurn(audio, f"q{i}", at_s=0.5 if i == 0 else None,
                       after=None if i == 0 else "reply_end", delay_s=1.0)
        )  # fmt: skip
    result = simulate(Script(turns), build_session(settings, engines), engines)
    replies: dict[int, str] = {}
    order: list[int] = []
    for event in result.events:
        if event["type"] == "reply_start" and event["utterance_id"] != -1:
            order.append(event["reply_id"])
            replies[event["reply_id"]] = ""
        elif event["type"] == "reply_text" and event["reply_id"] in replies:
            replies[event["reply_id"]] += event["text"]
    said = [replies[r].strip() for r in order]
    right = unknowns = wrong_turns = 0
    n_in = sum(q.in_scope for q in questions)
    for question, text in zip(questions, said, strict=False):
        declined = text.lower().startswith(unknown.lower())
        if question.in_scope:
            right += carries(text, question.expect)
        else:
            unknowns += declined
    wrong_turns = abs(len(said) - len(questions))
    summary = summarize(result.events)["summary"]
    return {
        "in_scope_right": f"{right}/{n_in}",
        "out_of_scope_unknown": f"{unknowns}/{len(questions) - n_in}",
        "replies_not_one_per_question": wrong_turns,
        "voice_to_voice_ms": summary["voice_to_voice_ms"],
        "speculation_hit_rate": summary["speculation_hit_rate"],
    }
