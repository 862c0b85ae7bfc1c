"""`voice bench eot`: the points it judges and how it counts them (pure logic; the
real models only run in the bench)."""

from __future__ import annotations

import numpy as np

from voice.bench.eot import strip_final_mark, summarize, words_before
from voice.bench.turnsets import TurnItem, decision_points


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
    rows = [
        {"end": False, "rule": "complete", "eot": 0.06, "eot_bare": 0.0},
        {"end": False, "rule": "incomplete", "eot": 0.0, "eot_bare": 0.0},
        {"end": True, "rule": "complete", "eot": 0.2, "eot_bare": 0.01},
    ]
    out = summarize(rows)
    assert (out["pauses"], out["ends"]) == (2, 1)
    assert out["rule_complete"] == {"pauses": 1, "ends": 1}
    assert out["eot>=0.05"] == {
        "pauses": 1, "ends": 1, "pauses_rule_complete": 1, "ends_rule_complete": 1,
    }  # fmt: skip
    assert out["eot>=0.1"]["pauses"] == 0 and out["eot_bare>=0.005"]["ends"] == 1
