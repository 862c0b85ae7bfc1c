"""``voice bench pauses``: what a wait on silence alone would do on the turn sets.

A rule that answers after a fixed silence, whatever was said, starts a reply in every
mid-turn pause longer than its wait, and answers no real end sooner than the wait
after it. The lengths of the sets' own pauses therefore draw a line that any
end-of-turn judgement is measured against: a judgement on the words (or the voice)
pays where it holds pauses that a wait of the same length would take, or answers
ends sooner than a wait that holds as many pauses.

Issue 21's conversational targets (a reply starting on at most 5% of mid-turn pauses
and at most 1 cut-in a minute of the user's speech, with real ends answered at a p90 of
1.0 s) sit on that line: this bench says where, from the sets' ground truth, with no
model and no timing (the hesitation sets load Whisper once to place their splices).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from voice.bench.turnsets import SETS, TurnItem, build_set
from voice.config import Settings

WAITS_MS = (300, 500, 800, 1000, 1200, 1500, 2000)
HESITATION_TARGET_S = 1.5  # issue 21: hesitations up to 1.5 s must be waited out


def silence_only(items: Sequence[TurnItem], waits_ms: Sequence[int] = WAITS_MS) -> dict[str, Any]:
    """For each wait: the mid-turn pauses longer than it (the replies a silence-only
    rule would start inside turns), per minute of the user's speech, and, where the
    items have a spliced hesitation, how many of those up to ``HESITATION_TARGET_S``
    it would take."""
    pauses = sorted(end - start for item in items for start, end in item.pauses)
    minutes = sum(item.speech_s for item in items) / 60
    spliced = [
        item.pause_s
        for item in items
        if item.pause_at_s is not None
        and item.pause_s is not None
        and item.pause_s <= HESITATION_TARGET_S
    ]
    rows = []
    for wait_ms in waits_ms:
        wait_s = wait_ms / 1000
        taken = sum(1 for pause in pauses if pause > wait_s)
        row: dict[str, Any] = {
            "wait_ms": wait_ms,
            "pauses_taken": taken,
            "share_of_pauses": round(taken / len(pauses), 3) if pauses else None,
            "cut_ins_per_min": round(taken / minutes, 2) if minutes else None,
        }
        if spliced:
            row["hesitations_taken"] = sum(1 for pause in spliced if pause > wait_s)
        rows.append(row)
    summary: dict[str, Any] = {
        "turns": len(items),
        "pauses": len(pauses),
        "user_speech_min": round(minutes, 2),
        "longest_pauses_s": [round(p, 2) for p in pauses[-6:]],
        "rows": rows,
    }
    if spliced:
        summary["hesitations"] = len(spliced)
    return summary


def bench_pauses(
    settings: Settings, sets: list[str] | None = None, corpus: str | None = None
) -> dict[str, Any]:
    from voice.bench.turns import splice_words

    chosen = sets or list(SETS)
    words_of = splice_words(chosen, settings)
    root = Path(corpus) if corpus else None
    return {"sets": {name: silence_only(build_set(name, words_of, root)) for name in chosen}}


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "| set | wait | mid-turn pauses longer | a minute of speech | hesitations up to "
        f"{HESITATION_TARGET_S} s longer |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, summary in report["sets"].items():
        for row in summary["rows"]:
            share = row["share_of_pauses"]
            shown = f"{row['pauses_taken']} of {summary['pauses']}" + (
                f" ({share:.1%})" if share is not None else ""
            )
            hesitations = (
                f"{row['hesitations_taken']} of {summary['hesitations']}"
                if "hesitations" in summary
                else "-"
            )
            lines.append(
                f"| {name} | {row['wait_ms']} ms | {shown} | {row['cut_ins_per_min']} | "
                f"{hesitations} |"
            )
    return "\n".join(lines)
