"""The spoken passes of ``voice bench tools``: utterances said by the Piper voice into
one real conversation per tool set (VAD, streaming Whisper, speculation, turn-taking,
the call, the reply spoken and played), each a second after the last reply ended.

Reported: the calls made against the calls expected, tool JSON in what was said,
and voice-to-voice of the turns with a call (a tool that returns at once, its string
said as written) beside the turns without one. Then a barge-in pass in real time: a
slow async tool is called, and the user speaks over its filler; the time from the
onset of that speech, and from the barge-in's decision, to the call's
``tool_result`` ("cancelled"), and to the tool's task seeing its cancellation.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import numpy as np

from voice.app.build import build_session
from voice.config import Settings
from voice.embed import Embedder
from voice.runtime.engines import Engines
from voice.stats import p50_p95
from voice.tools import Toolbox
from voice.tools.choose import Chooser
from voice.transports.simulate import Script, ScriptTurn, simulate

Expected = tuple[str, dict[str, Any]] | None
_JSON_MARKS = ("{", "}", '"name"', "arguments")


def make_chooser(tools: list[tuple[Any, list[str]]], settings: Settings) -> Chooser:
    """A chooser over ``tools``, each a function with the examples that call it."""
    box = Toolbox()
    for fn, examples in tools:
        box.add(fn, examples)
    return Chooser(list(box), Embedder.default(), settings.tools)


def _speak(engines: Engines, text: str) -> np.ndarray:
    return np.concatenate(list(engines.tts.synthesize(text))).astype(np.float32)


def spoken_calls(
    settings: Settings,
    engines: Engines,
    tools: list[tuple[Any, list[str]]],
    cases: list[tuple[str, Expected]],
) -> dict[str, Any]:
    """One conversation of ``cases``, said one after another."""
    turns = [
        ScriptTurn(_speak(engines, text), f"u{i}", at_s=0.5 if i == 0 else None,
                   after=None if i == 0 else "reply_end", delay_s=1.0)
        for i, (text, _) in enumerate(cases)
    ]  # fmt: skip
    session = build_session(settings, engines)
    session.tools = make_chooser(tools, settings)
    result = simulate(Script(turns), session, engines)
    order: list[int] = []
    said: dict[int, str] = {}
    heard: dict[int, str] = {}  # what the ASR made of the words
    calls: dict[int, tuple[str, dict[str, Any]]] = {}
    v2v: dict[int, float] = {}
    for event in result.events:
        kind = event["type"]
        if kind == "reply_start" and event["utterance_id"] != -1:
            order.append(event["reply_id"])
            said[event["reply_id"]] = ""
            heard[event["reply_id"]] = event["text"]
        elif kind == "reply_text" and event["reply_id"] in said:
            said[event["reply_id"]] += event["text"]
        elif kind == "tool_call":
            calls[event["reply_id"]] = (event["name"], event["arguments"])
        elif kind == "turn_metrics" and event.get("voice_to_voice_ms") is not None:
            v2v[event["reply_id"]] = event["voice_to_voice_ms"]
    right = false_calls = 0
    wrong: list[str] = []
    for (text, expected), reply_id in zip(cases, order, strict=False):
        got = calls.get(reply_id)
        if got == expected or (expected is None and got is None):
            right += expected is not None
        else:
            false_calls += expected is None
            wrong.append(f"{text!r} (heard {heard[reply_id]!r}) -> {got}")
    json_spoken = sum(any(m in said[r] for m in _JSON_MARKS) for r in order)
    with_call = [v for r, v in v2v.items() if r in calls]
    without = [v for r, v in v2v.items() if r not in calls]
    return {
        "utterances": len(cases),
        "replies": len(order),
        "need_a_call": sum(e is not None for _, e in cases),
        "right": right,
        "false_calls": false_calls,
        "need_none": sum(e is None for _, e in cases),
        "not_right": wrong,
        "json_spoken": json_spoken,
        "v2v_with_call_ms": p50_p95(with_call),
        "v2v_without_call_ms": p50_p95(without),
        "said": [said[r].strip() for r in order],
    }


CANCELLED_AT: list[float] = []


async def fetch(item: Literal["lantern", "rope", "ladder"]) -> str:
    """Fetch a lantern, a rope or a ladder from the cellar."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        CANCELLED_AT.append(time.monotonic())
        raise
    return f"Here is the {item}."


def barge_in_during_calls(settings: Settings, engines: Engines, repeats: int) -> dict[str, Any]:
    """``repeats`` slow calls, each spoken over 0.6 s into its reply (the filler), in
    real time; returns the cancellation figures."""
    CANCELLED_AT.clear()
    asks = ["go and fetch the lantern from the cellar", "bring me a rope please",
            "could you get the ladder for me"]  # fmt: skip
    stop = _speak(engines, "no wait, never mind that")
    turns = []
    for i in range(repeats):
        after = None if i == 0 else "reply_end"
        turns.append(
            ScriptTurn(
                _speak(engines, asks[i % len(asks)]),
                f"ask{i}",
                at_s=0.5 if i == 0 else None,
                after=after,
                delay_s=1.0,
            )
        )
        turns.append(ScriptTurn(stop, f"stop{i}", after="reply_start", delay_s=0.6,
                                expect="barge_in"))  # fmt: skip
    session = build_session(settings, engines)
    session.tools = make_chooser([(fetch, ["fetch me the lantern", "bring the rope up"])], settings)
    started = time.monotonic()
    result = simulate(Script(turns), session, engines, realtime=True)
    events = result.events
    results = [e for e in events if e["type"] == "tool_result"]
    calls = [e for e in events if e["type"] == "tool_call"]
    cancelled = [e for e in results if e["status"] == "cancelled"]
    task_ms = [(t - started) * 1000 for t in CANCELLED_AT]  # real time: audio time here
    to_result: list[float] = []
    to_task: list[float] = []
    decided_to_result: list[float] = []
    for done, task in zip(cancelled, task_ms, strict=False):
        barge = next(
            (e for e in events if e["type"] == "interrupted" and e["reply_id"] == done["reply_id"]),
            None,
        )
        if barge is None:
            continue
        # the VAD's onset of the speech that barged in (the clip's lead is silence)
        onset = [
            e["start_ms"] for e in events
            if e["type"] == "speech_start" and e["audio_ms"] <= barge["audio_ms"]
        ][-1]  # fmt: skip
        decided_to_result.append(done["audio_ms"] - barge["audio_ms"])
        to_result.append(done["audio_ms"] - onset)
        to_task.append(task - onset)
    return {
        "calls": len(calls),
        "results": len(results),
        "cancelled": sum(e["status"] == "cancelled" for e in results),
        "statuses": [e["status"] for e in results],
        "pending_at_end": len(calls) - len(results),
        "barge_in_to_cancelled_result_ms": p50_p95(decided_to_result),
        "speech_onset_to_cancelled_result_ms": p50_p95(to_result),
        "speech_onset_to_task_cancelled_ms": p50_p95(to_task),
    }


def format_spoken(spoken: dict[str, Any]) -> str:
    lines = ["spoken pass (Piper voice into a real conversation):"]
    for name, part in spoken["sets"].items():
        lines.append(
            f"  {name}: right calls {part['right']}/{part['need_a_call']}, false calls "
            f"{part['false_calls']}/{part['need_none']}, replies {part['replies']}/"
            f"{part['utterances']}, tool JSON spoken {part['json_spoken']}; voice-to-voice "
            f"with a call {part['v2v_with_call_ms']}, without {part['v2v_without_call_ms']}"
        )
        lines += [f"    not right: {w}" for w in part["not_right"]]
    barge = spoken.get("barge_in")
    if barge:
        lines.append(
            f"  barge-in during a slow call: {barge['cancelled']}/{barge['calls']} cancelled, "
            f"{barge['pending_at_end']} pending; barge-in decided -> tool_result "
            f"{barge['barge_in_to_cancelled_result_ms']}; speech onset -> tool_result "
            f"{barge['speech_onset_to_cancelled_result_ms']}, -> task cancelled "
            f"{barge['speech_onset_to_task_cancelled_ms']}"
        )
    return "\n".join(lines)
