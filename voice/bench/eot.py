"""``voice bench eot``: would the words, or the LLM's opinion of them, tell a pause
from an end, on the turn sets of ``voice bench turns``?

The end of a turn is judged on the words said before the pause (``voice.conversation
.turns``). This scores two judges offline, with no session and no timing, at every
mid-turn pause (a silence of ``MIN_PAUSE_S`` or more inside a speaker's turn) and at
every real turn end of the three sets, on the words Whisper's word timings put
before the pause (the whole clip heard once: the words the listener's word-timing
guard aims to keep, with the punctuation Whisper gave them in context):

- the text rule: "complete" (a full stop and no unfinished ending) or not;
- the LLM's end-of-turn probability (of the chat template's end-of-user-turn
  token right after the words), on the words as written and with the last mark of
  punctuation taken off, as issue 21 asked, against a range of thresholds, alone
  and where the text rule says "complete" (the model as a brake on the text's
  "complete", or a confident "yes" that might shorten the wait).

A judge that pays says "complete" at the ends and "not yet" at the pauses. The
prosody model's own bench is ``voice bench prosody``.
"""

from __future__ import annotations

import time
from typing import Any

from voice.bench.turnsets import SETS, Word, build_set, decision_points, whisper_words
from voice.config import Settings
from voice.conversation.turns import COMPLETE_PUNCTUATION, judge_turn
from voice.errors import ConfigError
from voice.stats import p50_p95

THRESHOLDS = (0.005, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
WORD_SLACK_S = 0.05  # a word Whisper starts this close to the pause's start is still said


def words_before(words: list[Word], at_s: float) -> str:
    """The words that start before ``at_s``, as Whisper wrote them."""
    return "".join(w for w, start, _ in words if start < at_s - WORD_SLACK_S).strip()


def strip_final_mark(text: str) -> str:
    """The words without the punctuation Whisper ended them with."""
    return text.rstrip().rstrip("".join(COMPLETE_PUNCTUATION) + ",;:-—…").rstrip()


def bench_eot(
    settings: Settings, sets: list[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    from voice.app.build import lane_configs
    from voice.bench.turns import whisper_model
    from voice.think.backend import Message, make_backend, system_prompt_of

    llm_config, _ = lane_configs(settings)
    llm = make_backend(llm_config)
    if not hasattr(llm, "end_of_turn_probability"):
        raise ConfigError(
            f"the {llm_config.backend} LLM backend gives no end-of-turn probability.",
            "Run voice bench eot with the embedded backend (llm.backend = embedded).",
        )
    system = [Message("system", system_prompt_of(llm_config))]
    words_of = whisper_words(whisper_model(None, settings))
    base_ms = settings.vad.end_silence_ms
    report: dict[str, Any] = {"sets": {}, "points": []}
    seconds: list[float] = []
    for name in sets or list(SETS):
        items = build_set(name, words_of)[: limit or None]
        rows = []
        for item in items:
            words = words_of(item.audio)
            for at_s, is_end in decision_points(item):
                text = words_before(words, at_s)
                if not text:
                    continue
                judged = judge_turn(text, None, settings.turn, base_ms)
                started = time.perf_counter()
                written = llm.end_of_turn_probability(system, text)  # type: ignore[attr-defined]
                bare = llm.end_of_turn_probability(system, strip_final_mark(text))  # type: ignore[attr-defined]
                seconds.append((time.perf_counter() - started) / 2)
                row = {
                    "set": name,
                    "item": item.name,
                    "at_s": round(at_s, 2),
                    "end": is_end,
                    "text": text[-80:],
                    "rule": judged.reason,
                    "eot": round(written, 4),
                    "eot_bare": round(bare, 4),
                }
                rows.append(row)
                report["points"].append(row)
        report["sets"][name] = summarize(rows)
    report["eot_ms"] = p50_p95([s * 1000 for s in seconds])
    return report


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per judge, how many pauses and ends it calls complete."""
    pauses = [r for r in rows if not r["end"]]
    ends = [r for r in rows if r["end"]]

    def complete(group: list[dict[str, Any]], key: str, at_least: float, by_rule: bool) -> int:
        """Rows whose ``key`` is at least ``at_least`` (and the rule says complete)."""
        return sum(
            1 for r in group if r[key] >= at_least and (not by_rule or r["rule"] == "complete")
        )

    out: dict[str, Any] = {
        "pauses": len(pauses),
        "ends": len(ends),
        "rule_complete": {
            "pauses": sum(1 for r in pauses if r["rule"] == "complete"),
            "ends": sum(1 for r in ends if r["rule"] == "complete"),
        },
    }
    for key in ("eot", "eot_bare"):
        for t in THRESHOLDS:
            out[f"{key}>={t}"] = {
                "pauses": complete(pauses, key, t, False),
                "ends": complete(ends, key, t, False),
                "pauses_rule_complete": complete(pauses, key, t, True),
                "ends_rule_complete": complete(ends, key, t, True),
            }
    return out


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "| set | judge | mid-turn pauses judged complete | ends judged complete | "
        "of the text rule's complete: pauses / ends kept |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, row in report["sets"].items():
        rule = row["rule_complete"]
        lines.append(
            f"| {name} | text rule | {rule['pauses']}/{row['pauses']} | "
            f"{rule['ends']}/{row['ends']} | |"
        )
        for key, counts in row.items():
            if key.startswith("eot"):
                lines.append(
                    f"| {name} | {key} | {counts['pauses']}/{row['pauses']} | "
                    f"{counts['ends']}/{row['ends']} | "
                    f"{counts['pauses_rule_complete']}/{rule['pauses']} / "
                    f"{counts['ends_rule_complete']}/{rule['ends']} |"
                )
    ms = report["eot_ms"]
    lines.append(f"\nLLM end-of-turn ms p50/p95: {ms['p50']:.0f} / {ms['p95']:.0f}")
    return "\n".join(lines)
