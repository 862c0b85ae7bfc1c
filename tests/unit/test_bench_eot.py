"""`voice bench eot`: the points it judges and how it counts them (pure logic; the
real models only run in the bench)."""

from __future__ import annotations

import numpy as np

from voice.bench.eot import (
    intonation_by_rule,
    prosody_by_rule,
    strip_final_mark,
    summarize,
    waits,
    words_before,
)
from voice.bench.turnsets import TurnItem, decision_points
from voice.config import Settings


def test_it_judges_each_long_enough_pause_and_the_end_on_the_words_said_before() -> None:
    speech = [(0.5, 1.0), (1.1, 2.0), (2.5, 3.0)]  # a 0.1 s gap (no pause), a 0.5 s one
    item = TurnItem("x", "pairs", np.zeros(16000 * 4, np.float32), speech)
    assert decision_points(item) == [(2.0, False), (3.0, True)]
    words = [(" I", 0.5, 0.7), (" went", 0.7, 1.9), (" home.", 2.5, 3.0)]
    assert words_before(words, 2.0) == "I went"
    assert words_before(words, 3.0) == "I went home."
    assert strip_final_mark("I went home.") == "I went home"
    assert strip_final_mark("Where to?") == "Where to"


def test_it_counts_pauses_and_ends_called_complete_per_judge() -> None:
    heard = {"live_rule": "complete", "live_dropped": 0, "live_cut_off": False, "live_last_p": 0.9,
             "pitch_final_st": None, "pitch_final_db": None}  # fmt: skip
    rows = [
        {"end": False, "rule": "complete", "eot": 0.06, "eot_bare": 0.0, **heard,
         "live_last_p": 0.5, "live_last_past_s": 0.2},
        {"end": False, "rule": "incomplete", "eot": 0.0, "eot_bare": 0.0, **heard,
         "live_rule": "cut_off", "live_dropped": 1, "live_cut_off": True, "live_last_p": 0.1,
         "live_last_past_s": 0.3},
        {"end": True, "rule": "complete", "eot": 0.2, "eot_bare": 0.01, **heard,
         "live_last_past_s": 0.0},
    ]  # fmt: skip
    out = summarize(rows)
    assert (out["pauses"], out["ends"]) == (2, 1)
    assert out["rule_complete"] == {"pauses": 1, "ends": 1}
    assert out["eot>=0.05"] == {
        "pauses": 1, "ends": 1, "pauses_rule_complete": 1, "ends_rule_complete": 1,
    }  # fmt: skip
    assert out["eot>=0.1"]["pauses"] == 0 and out["eot_bare>=0.005"]["ends"] == 1
    # As the listener heard it: the unsure or run-on last word counts only where the
    # pass was judged complete (the second pause's was not).
    assert out["live_complete"] == {"pauses": 1, "ends": 1}
    assert out["live_dropped"] == {"pauses": 1, "ends": 0}
    assert out["live_cut_off"] == {"pauses": 1, "ends": 0}
    assert out["live_unsure_last"] == {"pauses": 1, "ends": 0}
    assert out["live_runs_on"] == {"pauses": 1, "ends": 0}


def test_each_wait_is_scored_by_the_pauses_longer_than_it_and_the_ends() -> None:
    """A 700 ms pause after a whole sentence is longer than a 500 ms wait, not than 800;
    a 1.2 s pause after words without a mark outlasts 1000 ms, not 1500."""
    rows = [
        {"end": False, "gap_s": 0.7, "live_spoken": "I went home."},
        {"end": False, "gap_s": 1.2, "live_spoken": "and then I went"},
        {"end": False, "gap_s": 3.0, "live_spoken": "I went to the"},
        {"end": True, "gap_s": None, "live_spoken": "I went home."},
    ]
    for row in rows:
        row.update(live_dropped=0, live_cut_off=False, live_held_s=0.0)
    out = waits(rows, Settings())
    assert out["500/1000"]["pauses_taken"] == 3  # the 3 s pause outlasts even 2 s
    assert out["500/1500"]["pauses_taken"] == 2
    assert out["800/1200"]["pauses_taken"] == 1
    assert out["500/1000"]["end_wait_ms"] == {"p50": 500, "p90": 500}


def test_the_prosody_model_is_counted_beside_the_reason_the_words_were_given() -> None:
    pauses = [
        {"live_rule": "complete", "prosody": 0.05},
        {"live_rule": "complete", "prosody": 0.5},
        {"live_rule": "unpunctuated", "prosody": 0.02},
        {"live_rule": "incomplete", "prosody": 0.99},  # not counted: the words wait anyway
    ]
    ends = [{"live_rule": "unpunctuated", "prosody": 0.9}]
    out = prosody_by_rule(pauses, ends)
    assert out["complete"] == {
        "pauses": 2, "pauses_under_0.1": 1, "pauses_over_0.8": 0,
        "ends": 0, "ends_under_0.1": 0, "ends_over_0.8": 0,
    }  # fmt: skip
    assert out["unpunctuated"]["pauses_under_0.1"] == 1
    assert out["unpunctuated"]["ends_over_0.8"] == 1


def test_it_counts_the_intonation_cues_per_reason_where_a_contour_was_measured() -> None:
    def row(end: bool, reason: str, st: float | None, db: float | None) -> dict[str, object]:
        return {"end": end, "live_rule": reason, "pitch_final_st": st, "pitch_final_db": db}

    pauses = [row(False, "complete", -4.0, 0.0), row(False, "complete", None, None),
              row(False, "unpunctuated", 1.0, -7.0)]  # fmt: skip
    ends = [row(True, "unpunctuated", -3.0, -6.0), row(True, "incomplete", -9.0, -9.0)]
    out = intonation_by_rule(pauses, ends)
    assert out["complete"]["pauses"] == 2 and out["complete"]["pauses_measured"] == 1
    assert out["complete"]["pauses_fall"] == 1 and out["complete"]["pauses_quiet"] == 0
    assert out["unpunctuated"]["pauses_quiet"] == 1 and out["unpunctuated"]["pauses_fall"] == 0
    # On the line counts; a reason not asked about (incomplete) is not counted.
    assert out["unpunctuated"]["ends_fall"] == 1 and out["unpunctuated"]["ends_quiet"] == 1
    assert out["complete"]["ends"] == 0


def test_its_report_has_a_row_per_set_and_entry_and_leaves_out_what_was_not_measured() -> None:
    from voice.bench.eot import format_table

    rows = [
        {"end": False, "rule": "complete", "eot": 0.0, "eot_bare": 0.0, "live_rule": "complete",
         "live_dropped": 0, "live_cut_off": False, "live_last_p": 0.9, "live_last_past_s": 0.0,
         "live_held_s": 0.0, "live_spoken": "I went home.", "gap_s": 0.8, "pitch_final_st": -4.0,
         "pitch_final_db": -7.0},
        {"end": True, "rule": "complete", "eot": 0.3, "eot_bare": 0.1, "live_rule": "complete",
         "live_dropped": 0, "live_cut_off": False, "live_last_p": 0.9, "live_last_past_s": 0.0,
         "live_held_s": 0.0, "live_spoken": "Then I slept.", "gap_s": None, "pitch_final_st": 0.0,
         "pitch_final_db": 0.0},
    ]  # fmt: skip
    summary = summarize(rows)
    summary["waits"] = waits(rows, Settings())
    report = {"sets": {"pairs": summary}, "eot_ms": {"p50": 20.0, "p95": 30.0}}
    table = format_table(report)
    assert "| pairs | 500/1000 | 1/1 (100%) | 500 / 500 |" in table
    assert "| pairs | complete | 1 of 1, 1, 1 | 1 of 1, 0, 0 |" in table
    assert "prosody under" not in table  # no prosody model was given
    summary["prosody"] = prosody_by_rule(
        [dict(rows[0], prosody=0.05)], [dict(rows[1], prosody=0.9)]
    )
    assert "| pairs | complete | 1 / 0 of 1 | 0 / 1 of 1 |" in format_table(report)
