"""``voice bench knowledge``: does the assistant say what its knowledge says?

A knowledge file and a question file (JSON lines: ``{"q": ..., "in_scope": true,
"expect": [["seven", "7"], ["half past ten", "10:30"]]}``, every group matched by one
of its phrases, or ``{"q": ..., "in_scope": false}``) run through the real session
as typed turns, one visitor each (the conversation is reset between questions),
once per answer policy:

- ``prompt``: before knowledge files: every entry pasted into the system prompt and
  the model answers (what a persona's prompt did);
- ``generate``, ``auto``, ``verbatim``: the policies of :mod:`voice.knowledge.policy`.

Per policy: in-scope answers carrying the expected fact; in-scope answers with a
wrong fact (no expected fact, but a number, time, day, price or place of its own);
in-scope answers that declined; out-of-scope answers that are the unknown reply;
the questions asked back ("Do you mean: ...?"), to which the visitor answers truly:
"yes" when the entry named holds what they asked, "no" otherwise.
Then the retrieval on its own: its hit rate (the top entry carries the expected
fact), the milliseconds a lookup takes (p50/p95, one BLAS thread), and the load time
of a 1,000-entry file (embedded afresh, then from the cache). The voice is not
measured here (synthesis is skipped); seeds are fixed, so a run repeats.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voice.app.build import build_session, load_engines
from voice.config import Settings
from voice.conversation.actions import Play, TtsJob
from voice.conversation.session import Session
from voice.embed import Embedder
from voice.errors import ConfigError
from voice.events import KnowledgeAnswer, ReplyText
from voice.knowledge.parse import Entry, read_knowledge
from voice.knowledge.policy import Grounding, KnowledgeConfig
from voice.knowledge.retrieve import KnowledgeIndex
from voice.runtime.engines import EngineLane
from voice.runtime.faults import make_lane
from voice.stats import p50_p95
from voice.think.backend import LlmConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "knowledge"
DEFAULT_KNOWLEDGE = EXAMPLES / "museum.md"
POLICIES = ("prompt", "generate", "auto", "verbatim")
MAX_ASKS = 3  # questions back the visitor answers, one turn (knowledge.asks is 2)
PERSONA = "You are Ada, the information guide of a small science museum. Be warm and helpful."
_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred half quarter"
)
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_MONTHS = "january february march april may june july august september october november december"
_FACT = re.compile(
    r"\b(\d+|" + "|".join((_NUMBER_WORDS + " " + _DAYS + " " + _MONTHS).split())
    + r"|o'clock|am|pm|noon|midnight|floor|basement|upstairs|downstairs|pounds?|euros?|"
    r"dollars?|free|street|lane|password)\b",
    re.IGNORECASE,
)  # fmt: skip


@dataclass
class Question:
    q: str
    in_scope: bool
    expect: list[list[str]] = field(default_factory=list)


def load_questions(path: Path) -> list[Question]:
    questions = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = "not found" if isinstance(exc, FileNotFoundError) else "unreadable"
        raise ConfigError(
            f"question file {path} {why}.",
            "Give one with --questions FILE: JSON lines, "
            '{"q": "...", "in_scope": true, "expect": [["seven", "7"]]} or '
            '{"q": "...", "in_scope": false} (docs/knowledge.md).',
        ) from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row["in_scope"], bool):
                raise TypeError(f"in_scope is {row['in_scope']!r}, not true or false")
            question = Question(str(row["q"]), row["in_scope"], _groups(row.get("expect", [])))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"{path}, line {number}: not a question ({exc}).",
                'Each line: {"q": "...", "in_scope": true, "expect": [["seven", "7"]]}.',
            ) from None
        if question.in_scope and not question.expect:
            raise ConfigError(f"{path}, line {number}: an in-scope question needs 'expect'.")
        questions.append(question)
    return questions


def _groups(expect: object) -> list[list[str]]:
    """``expect`` as groups of phrases: a phrase alone (``"seven"``, or one in the
    list: ``["seven", ["ten", 10]]``) is a group of its own, which must be said;
    anything but phrases (strings, numbers) and lists of them is an error, not a test
    that always holds."""

    def phrase(value: object) -> bool:  # a number is said as its digits: 7 is "7"
        return isinstance(value, str | int | float) and not isinstance(value, bool)

    items = [expect] if phrase(expect) else expect
    if not isinstance(items, list):
        raise TypeError(f"expect is {expect!r}, not a list of phrase groups")
    groups = []
    for item in items:
        group = [item] if phrase(item) else item
        if not (isinstance(group, list) and group and all(phrase(g) for g in group)):
            raise TypeError(f"expect has {item!r}: a group is a list of phrases")
        groups.append([str(g) for g in group])
    return groups


def carries(text: str, expect: list[list[str]]) -> bool:
    """Every group of the expected fact has one of its phrases in ``text``."""
    low = text.lower()
    return all(any(phrase.lower() in low for phrase in group) for group in expect)


def states_a_fact(text: str) -> bool:
    return _FACT.search(text) is not None


def _answer(
    session: Session, lane: EngineLane, text: str, new_visitor: bool = True
) -> tuple[str, str]:
    """A typed turn through the session, its jobs run until it has said all it will
    (synthesis skipped: a silent stand-in); the reply's text, and the heading of the
    entry it asked back about ("" when it did not ask)."""
    if new_visitor:
        session.reset()
    session.take()
    session.submit_text(text)
    parts: list[str] = []
    asked = ""
    played: dict[int, int] = {}
    while True:
        for out in session.take():
            if isinstance(out, ReplyText):
                parts.append(out.text)
            elif isinstance(out, KnowledgeAnswer) and out.kind == "ask":
                asked = out.entry
            elif isinstance(out, Play):  # played at once: the reply is heard whole
                played[out.reply_id] = played.get(out.reply_id, 0) + len(out.audio)
                session.on_played(out.reply_id, played[out.reply_id])
        job = session.next_job()
        if job is None:
            break
        result = np.zeros(160, np.float32) if isinstance(job, TtsJob) else lane.run(job)
        session.on_result(job, result)
    return "".join(parts).strip(), asked


def _visit(
    session: Session, lane: EngineLane, question: Question, entries: dict[str, Entry]
) -> dict[str, Any]:
    """One visitor's question, and, if the assistant asks back ("Do you mean: ...?"),
    their truthful "yes" (the entry it names holds what they asked) or "no"."""
    answer, asked = _answer(session, lane, question.q)
    row: dict[str, Any] = {"q": question.q, "in_scope": question.in_scope}
    exchanges: list[str] = []
    replies: list[str] = []
    while asked and len(exchanges) < MAX_ASKS:  # asked again after a "no" (knowledge.asks)
        entry = entries.get(asked)
        meant = question.in_scope and entry is not None and carries(entry.answer, question.expect)
        reply = "yes" if meant else "no"
        exchanges.append(f"{answer} -> {reply}")
        replies.append(reply)
        answer, asked = _answer(session, lane, reply, new_visitor=False)
    if exchanges:
        row["asked"] = " / ".join(exchanges)
        row["replies"] = replies
    row["answer"] = answer
    row["right"] = question.in_scope and carries(answer, question.expect)
    return row


def _settings_for(settings: Settings, policy: str, path: Path, entries: list[Entry]) -> Settings:
    out = copy.deepcopy(settings)
    out.conversation.idle_prefill = False
    out.conversation.apology_text = ""
    out.conversation.greeting = ""
    out.llm.seed = out.llm.seed if out.llm.seed >= 0 else 1
    # The settings' prompt where one was given (a persona's), else the museum guide's.
    persona = settings.llm.system_prompt
    if persona == LlmConfig().system_prompt:
        persona = PERSONA
    out.llm.system_prompt = persona
    if policy == "prompt":
        facts = " ".join(e.answer for e in entries)
        out.llm.system_prompt = f"{persona} What you know: {facts}"
        out.knowledge.path = ""
    else:
        out.knowledge.path = str(path)
        out.knowledge.answer = policy
    return out


def _score(rows: list[dict[str, Any]], unknown: str) -> dict[str, Any]:
    ins = [r for r in rows if r["in_scope"]]
    outs = [r for r in rows if not r["in_scope"]]
    unknown_key = unknown.lower().strip()

    def declined(r: dict[str, Any]) -> bool:
        return bool(unknown_key) and r["answer"].lower().strip().startswith(unknown_key)

    right = sum(r["right"] for r in ins)
    asked = sum("asked" in r for r in rows)
    wrong = sum(not r["right"] and not declined(r) and states_a_fact(r["answer"]) for r in ins)
    return {
        "in_scope_right": f"{right}/{len(ins)} ({100 * right / max(len(ins), 1):.0f}%)",
        "in_scope_wrong_fact": f"{wrong}/{len(ins)} ({100 * wrong / max(len(ins), 1):.0f}%)",
        "in_scope_declined": sum(declined(r) for r in ins),
        "asked_back": asked,
        "out_of_scope_unknown": (
            f"{sum(declined(r) for r in outs)}/{len(outs)} "
            f"({100 * sum(declined(r) for r in outs) / max(len(outs), 1):.0f}%)"
        ),
    }


def _large_file(entries: list[Entry], count: int, folder: Path) -> Path:
    """A knowledge file of ``count`` entries: the real ones, then numbered variants."""
    lines = []
    for i in range(count):
        e = entries[i % len(entries)]
        tag = "" if i < len(entries) else f" (room {i})"
        lines += [f"## {' | '.join(e.phrasings)}{tag}", f"{e.answer} Ask at desk {i}.", ""]
    path = folder / "large.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def bench_retrieval(
    entries: list[Entry], questions: list[Question], config: KnowledgeConfig
) -> dict[str, Any]:
    embedder = Embedder.default()
    started = time.perf_counter()
    index = KnowledgeIndex(entries, embedder)
    build_s = time.perf_counter() - started
    grounding = Grounding(index, config)
    hits, times, misses = 0, [], []
    for _ in range(2):  # warm
        grounding.decide(questions[0].q)
    for question in questions:
        started = time.perf_counter()
        decision = grounding.decide(question.q)
        times.append((time.perf_counter() - started) * 1000)
        if question.in_scope:
            top = decision.matches[0].entry.answer if decision.matches else ""
            if carries(top, question.expect):
                hits += 1
            else:
                misses.append(question.q)
    n_in = sum(q.in_scope for q in questions)
    stats = p50_p95(times)
    with tempfile.TemporaryDirectory() as tmp:
        large = _large_file(entries, 1000, Path(tmp))
        loads = []
        for _ in range(2):  # embedded afresh, then from the cache
            started = time.perf_counter()
            KnowledgeIndex(read_knowledge(large), embedder, cache_dir=Path(tmp) / "cache")
            loads.append(time.perf_counter() - started)
    return {
        "entries": len(entries),
        "hit_rate": f"{hits}/{n_in} ({100 * hits / max(n_in, 1):.0f}%)",
        "misses": misses,
        "lookup_ms": {k: round(float(v or 0), 2) for k, v in stats.items() if k != "n"},
        "index_build_s": round(build_s, 3),
        "load_1000_entries_s": {"first": round(loads[0], 2), "cached": round(loads[1], 3)},
    }


def bench_knowledge(
    settings: Settings,
    knowledge: str | None = None,
    questions_path: str | None = None,
    policies: list[str] | None = None,
    spoken: int = 0,
) -> dict[str, Any]:
    """``spoken``: also say the first N questions (in and out of scope, alternating)
    through a real conversation (voice.bench.knowledge_spoken); 0 skips it."""
    # The flag's file, else the settings' (a persona's), else the museum's.
    path = Path(knowledge or settings.knowledge.path or DEFAULT_KNOWLEDGE)
    qpath = Path(questions_path) if questions_path else path.with_suffix(".questions.jsonl")
    entries = read_knowledge(path)
    questions = load_questions(qpath)
    chosen = policies or list(POLICIES)
    for name in chosen:
        if name not in POLICIES:
            raise ConfigError(f"unknown policy {name!r}.", f"Choose from {', '.join(POLICIES)}.")
    report: dict[str, Any] = {
        "knowledge": str(path),
        "questions": f"{sum(q.in_scope for q in questions)} in scope, "
        f"{sum(not q.in_scope for q in questions)} out of scope",
        "thresholds": {
            "threshold": settings.knowledge.threshold,
            "context_threshold": settings.knowledge.context_threshold,
        },
        "retrieval": bench_retrieval(entries, questions, settings.knowledge),
    }
    engines = load_engines(_settings_for(settings, "verbatim", path, entries))
    policy_reports: dict[str, Any] = {}
    for name in chosen:
        run = _settings_for(settings, name, path, entries)
        session = build_session(run, engines)
        lane = make_lane(engines, run.conversation.job_timeout_s)
        rows = []
        started = time.perf_counter()
        by_heading = {e.heading: e for e in entries}
        for question in questions:
            rows.append(_visit(session, lane, question, by_heading))
        lane.close()
        policy_reports[name] = {
            **_score(rows, run.knowledge.unknown_reply),
            "wall_s": round(time.perf_counter() - started, 1),
            "answers": rows,
        }
    report["policies"] = policy_reports
    if spoken > 0:
        from voice.bench.knowledge_spoken import spoken_run

        ins = [q for q in questions if q.in_scope]
        outs = [q for q in questions if not q.in_scope]
        mixed = [q for pair in zip(ins, outs, strict=False) for q in pair]
        chosen_qs = (mixed + ins[len(outs) :])[:spoken]
        best = "verbatim" if "verbatim" in chosen else chosen[-1]
        report["spoken"] = {}
        for name in ("prompt", best):
            run = _settings_for(settings, name, path, entries)
            run.conversation.idle_prefill = True  # as a conversation runs
            typed = {r["q"]: r for r in policy_reports.get(name, {}).get("answers", [])}
            follow_ups = {
                i: typed[q.q]["replies"]
                for i, q in enumerate(chosen_qs)
                if "replies" in typed.get(q.q, {})
            }  # the typed pass asked these back: the visitor answers
            report["spoken"][name] = spoken_run(
                run, engines, chosen_qs, run.knowledge.unknown_reply, follow_ups
            )
    return report


def format_table(report: dict[str, Any]) -> str:
    r = report["retrieval"]
    lines = [
        f"{report['knowledge']}: {r['entries']} entries; {report['questions']}",
        f"retrieval: hit rate {r['hit_rate']}; lookup p50 {r['lookup_ms']['p50']} ms, "
        f"p95 {r['lookup_ms']['p95']} ms; 1,000-entry file loads in "
        f"{r['load_1000_entries_s']['first']} s (first), {r['load_1000_entries_s']['cached']} s "
        "(cached)",
        "",
        "| policy | in scope: right fact | wrong fact | declined | out of scope: unknown reply "
        "| asked back |",
        "|---|---|---|---|---|---|",
    ]
    for name, p in report["policies"].items():
        lines.append(
            f"| {name} | {p['in_scope_right']} | {p['in_scope_wrong_fact']} | "
            f"{p['in_scope_declined']} | {p['out_of_scope_unknown']} | {p['asked_back']} |"
        )
    for name, p in report.get("spoken", {}).items():
        v2v = p["voice_to_voice_ms"]
        lines.append(
            f"spoken, {name}: right {p['in_scope_right']}, unknown reply "
            f"{p['out_of_scope_unknown']}, voice-to-voice p50 {v2v['p50']} ms p95 {v2v['p95']} ms"
        )
    return "\n".join(lines)
