"""``voice bench tools``: does the assistant call the right tool with the right
arguments, and nothing on small talk? (docs/tools.md)

Two tool sets, as a game and a kiosk declare them (the NPC smith and herbalist:
sell, repair, give; the museum kiosk: events, find_room), and utterances written as
players and visitors say them, each with the call it must produce or none. Every
utterance goes through voice.tools.choose.Chooser on the bundled models (the
sentence encoder's shortlist, the 135M model filling the call under a grammar). No
utterance is one of its tool's examples word for word.

Reported: right tool with right arguments, wrong tool or arguments, missed calls,
false calls (on utterances that need none), calls whose raw text is not the
grammar's JSON (0 by construction: checked, not assumed), time to decide a call
(p50, p95), and, for the threshold, the best tool score of each utterance.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any, Literal

from voice.bench.tools_spoken import Expected, format_spoken, make_chooser
from voice.config import Settings
from voice.embed import Embedder
from voice.errors import VoiceError
from voice.think.backend import make_backend

Item = Literal["sword", "axe", "shield", "dagger", "helmet"]


def sell(item: Item, quantity: int = 1) -> str:
    """Sell the player weapons or armour from the smithy: a sword, an axe, a shield."""
    return f"Here you are: {quantity} {item}{'s' * (quantity > 1)}, {10 * quantity} gold."


def repair(item: Item) -> str:
    """Repair or sharpen the player's damaged weapon or armour."""
    return f"There, your {item} is as good as new."


def give(item: Literal["potion", "map", "apple", "herbs"]) -> str:
    """Give the player a potion, a map, an apple or herbs."""
    return f"Here, take the {item}, free of charge."


def events(day: Literal["today", "tomorrow", "weekend"]) -> str:
    """List the museum's events, talks and tours on a day."""
    return f"{day.capitalize()} there is a fossil talk at eleven."


def find_room(room: Literal["cafe", "toilets", "cloakroom", "shop", "dinosaur hall"]) -> str:
    """Tell the visitor where a room is in the museum: the cafe, toilets, cloakroom."""
    return f"The {room} is on the ground floor, past the main hall."


SETS: dict[str, list[tuple[Any, list[str]]]] = {
    "npc": [
        (sell, ["I'd like to buy a sword", "I'll take two axes"]),
        (repair, ["can you fix my sword", "my shield is broken, repair it"]),
        (give, ["can I have a potion", "give me the map please"]),
    ],
    "kiosk": [
        (events, ["what's happening this afternoon", "are there any guided tours on"]),
        (find_room, ["where can I get a coffee", "how do I find the lifts"]),
    ],
}
CASES: dict[str, list[tuple[str, Expected]]] = {
    "npc": [
        ("I'll buy two swords", ("sell", {"item": "sword", "quantity": 2})),
        ("Give me three shields", ("sell", {"item": "shield", "quantity": 3})),
        ("I want to buy an axe", ("sell", {"item": "axe", "quantity": 1})),
        ("sell me five helmets", ("sell", {"item": "helmet", "quantity": 5})),
        ("I'll take a dagger", ("sell", {"item": "dagger", "quantity": 1})),
        ("how much for a helmet? I'll have one", ("sell", {"item": "helmet", "quantity": 1})),
        ("two daggers please, I'm buying", ("sell", {"item": "dagger", "quantity": 2})),
        ("I need four axes for my men", ("sell", {"item": "axe", "quantity": 4})),
        ("can you sharpen my dagger", ("repair", {"item": "dagger"})),
        ("my helmet is dented, can you fix it", ("repair", {"item": "helmet"})),
        ("fix my sword please", ("repair", {"item": "sword"})),
        ("the shield got cracked in the fight, mend it", ("repair", {"item": "shield"})),
        ("could I have a potion please", ("give", {"item": "potion"})),
        ("I need the map", ("give", {"item": "map"})),
        ("give me an apple, I'm starving", ("give", {"item": "apple"})),
        ("hand me some herbs for my wound", ("give", {"item": "herbs"})),
        ("may I have a healing potion", ("give", {"item": "potion"})),
        ("nice weather today", None),
        ("what's your name", None),
        ("hello there", None),
        ("how's business", None),
        ("tell me about the war", None),
        ("where are you from", None),
        ("thanks, goodbye", None),
        ("who made this sword", None),
        ("I'm just looking around", None),
    ],
    "kiosk": [
        ("what's on today", ("events", {"day": "today"})),
        ("are there any talks tomorrow", ("events", {"day": "tomorrow"})),
        ("what events do you have this weekend", ("events", {"day": "weekend"})),
        ("any tours today", ("events", {"day": "today"})),
        ("is anything happening tomorrow", ("events", {"day": "tomorrow"})),
        ("where is the cafe", ("find_room", {"room": "cafe"})),
        ("I need the toilets", ("find_room", {"room": "toilets"})),
        ("where can I leave my coat, the cloakroom", ("find_room", {"room": "cloakroom"})),
        ("how do I get to the shop", ("find_room", {"room": "shop"})),
        ("which way to the dinosaur hall", ("find_room", {"room": "dinosaur hall"})),
        ("good morning", None),
        ("thank you very much", None),
        ("how are you", None),
        ("are you a robot", None),
        ("what a lovely building", None),
    ],
}


def blind_cases() -> dict[str, list[tuple[str, str, Expected]]]:
    """The utterances written blind (voice/data/tools/blind.jsonl), by source."""
    path = Path(__file__).resolve().parent.parent / "data" / "tools" / "blind.jsonl"
    out: dict[str, list[tuple[str, str, Expected]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        expect = row["expect"]
        expected = None if expect is None else (expect["name"], expect["arguments"])
        out.setdefault(row["source"], []).append((row["set"], row["text"], expected))
    return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _outcome(expected: Expected, got: Expected, error: str) -> str:
    if error:
        return "refused"
    if expected is None:
        return "right_none" if got is None else "false_call"
    if got is None:
        return "missed"
    return "right" if got == expected else "wrong"


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    needing = [r for r in rows if r["expected"] is not None]
    none = [r for r in rows if r["expected"] is None]
    count = {k: sum(r["outcome"] == k for r in rows) for k in ("right", "wrong", "missed")}
    false_calls = sum(r["outcome"] == "false_call" for r in rows)
    return {
        "utterances": len(rows),
        "need_a_call": len(needing),
        "need_none": len(none),
        "right": count["right"],
        "right_share": round(count["right"] / max(len(needing), 1), 3),
        "wrong": count["wrong"],
        "missed": count["missed"],
        "false_calls": false_calls,
        "refused": sum(r["outcome"] == "refused" for r in rows),
        "false_share": round(false_calls / max(len(none), 1), 3),
    }


def bench_tools(settings: Settings, spoken: int = 0) -> dict[str, Any]:
    """``spoken``: also say the first N utterances of each tool set through a real
    conversation, and run the barge-in pass (voice.bench.tools_spoken); 0 skips it."""
    embedder = Embedder.default()
    backend = make_backend(settings.llm)  # embedded, or a server's OpenAI tools (llm.backend)
    choosers = {name: make_chooser(tools, settings) for name, tools in SETS.items()}
    sources = {"tuning": [(name, t, e) for name, cases in CASES.items() for t, e in cases]}
    sources.update(blind_cases())
    rows: list[dict[str, Any]] = []
    for source, cases in sources.items():
        for name, text, expected in cases:
            chooser = choosers[name]
            start = time.perf_counter()  # before the chooser has seen the words
            error = ""
            try:
                call = chooser.choose(text, backend)
            except VoiceError as exc:  # a server's call that fits no tool (never embedded)
                call, error = None, str(exc)
            ms = (time.perf_counter() - start) * 1000
            short = chooser.focus(text)[1]  # for the scores: remembered from the choice
            got = (call.tool.name, call.arguments) if call is not None else None
            raw_ok = call is None or not call.raw or call.raw.startswith('{"name": ')
            rows.append(
                {
                    "source": source, "set": name, "text": text, "expected": expected,
                    "got": got, "outcome": _outcome(expected, got, error), "ms": round(ms, 1),
                    "error": error,
                    "raw_ok": raw_ok, "model": bool(call is not None and call.raw),
                    "top": round(max(short.scores.values()), 3), "chat": round(short.chat, 3),
                }
            )  # fmt: skip
    needing = [r for r in rows if r["expected"] is not None]
    none = [r for r in rows if r["expected"] is None]
    call_ms = [r["ms"] for r in rows if r["got"] is not None]
    report = {
        **_summary(rows),
        "by_source": {s: _summary([r for r in rows if r["source"] == s]) for s in sources},
        "json_not_grammar": sum(not r["raw_ok"] for r in rows),
        "calls_filled_by_model": sum(r["model"] for r in rows),
        "calls": sum(r["got"] is not None for r in rows),
        "call_ms_p50": round(statistics.median(call_ms), 1) if call_ms else 0.0,
        "call_ms_p95": round(_percentile(call_ms, 0.95), 1),
        "threshold": settings.tools.threshold,
        "top_score_needing_min": min((r["top"] for r in needing), default=0.0),
        "top_score_none_max": max((r["top"] for r in none), default=0.0),
        "rows": rows,
    }
    report["beside_knowledge"] = beside_knowledge(settings, embedder, backend)
    if spoken:
        report["spoken"] = _spoken(settings, spoken)
    return report


def kiosk_events(day: Literal["today", "tomorrow", "weekend"] = "today") -> str:
    """List the museum's events, talks and tours on a day."""  # examples/kiosk.py's
    return f"{day}: a fossil talk at eleven."


def beside_knowledge(settings: Settings, embedder: Embedder, backend: Any) -> dict[str, Any]:
    """The kiosk's case (examples/kiosk.py): its events tool beside the museum's
    knowledge file. The museum's visitor questions that would call the tool, and the
    utterances that need the tool that the knowledge would take instead, with the rule
    the session applies (voice.conversation.session.tooling.knowledge_knows)."""
    from voice.bench.knowledge import DEFAULT_KNOWLEDGE, load_questions
    from voice.conversation.session.tooling import knowledge_knows
    from voice.knowledge.policy import Grounding, load_index

    grounding = Grounding(load_index(DEFAULT_KNOWLEDGE, embedder), settings.knowledge)
    examples = ["what's on today", "are there any tours this afternoon"]
    chooser = make_chooser([(kiosk_events, examples)], settings)

    def calls(text: str) -> bool:
        short = chooser.focus(text)[1]
        if not short.candidates or knowledge_knows(grounding(text), short):
            return False
        return chooser.choose(text, backend) is not None

    questions = load_questions(DEFAULT_KNOWLEDGE.with_suffix(".questions.jsonl"))
    taken = [q.q for q in questions if calls(q.q)]
    needing = [t for t, e in CASES["kiosk"] if e and e[0] == "events"]
    needing += [t for rows in blind_cases().values() for _, t, e in rows if e and e[0] == "events"]
    kept = sum(calls(t) for t in needing)
    return {
        "museum_questions_calling_events": f"{len(taken)}/{len(questions)}",
        "calling": taken,
        "events_utterances_still_calling": f"{kept}/{len(needing)}",
    }


def _spoken(settings: Settings, limit: int) -> dict[str, Any]:
    from voice.app.build import load_engines
    from voice.bench.tools_spoken import barge_in_during_calls, spoken_calls

    engines = load_engines(settings)
    sets = {}
    for name, tools in SETS.items():
        cases = CASES[name]
        calls = [c for c in cases if c[1] is not None]
        nones = [c for c in cases if c[1] is None]
        mixed = [c for pair in zip(calls, nones, strict=False) for c in pair]
        mixed += [c for c in cases if c not in mixed]  # calls and small talk alternate
        sets[name] = spoken_calls(settings, engines, tools, mixed[:limit])
    return {"sets": sets, "barge_in": barge_in_during_calls(settings, engines, 3)}


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "source        utterances  right tool+args  wrong  missed  false calls",
    ]
    for source, part in [*report["by_source"].items(), ("all", report)]:
        lines.append(
            f"{source:<13} {part['utterances']:>10}  {part['right']:>3}/{part['need_a_call']:<3} "
            f"({part['right_share']:>4.0%})  {part['wrong']:>5}  {part['missed']:>6}  "
            f"{part['false_calls']:>3}/{part['need_none']:<3} ({part['false_share']:.0%})"
        )
    lines += [
        f"call text outside the grammar's JSON: {report['json_not_grammar']}; "
        f"calls refused (no tool, bad arguments): {report['refused']}",
        f"calls the model filled (the words did not settle them): "
        f"{report['calls_filled_by_model']}/{report['calls']}",
        f"time to the call p50 {report['call_ms_p50']} ms, p95 {report['call_ms_p95']} ms",
        f"best tool score: lowest of those needing a call {report['top_score_needing_min']}, "
        f"highest of those needing none {report['top_score_none_max']} "
        f"(threshold {report['threshold']})",
    ]
    for row in report["rows"]:
        if row["outcome"] not in ("right", "right_none"):
            got = row["error"] or row["got"]
            lines.append(f"  {row['source']} {row['outcome']}: {row['text']!r} -> {got}")
    near = report.get("beside_knowledge")
    if near:
        lines.append(
            f"beside the museum's knowledge (the kiosk): museum questions calling events "
            f"{near['museum_questions_calling_events']}, events utterances still calling it "
            f"{near['events_utterances_still_calling']}"
        )
    if "spoken" in report:
        lines.append(format_spoken(report["spoken"]))
    return "\n".join(lines)
