"""`voice bench pauses`: what a wait on silence alone would take, from a set's ground
truth (pure logic on scripted turn items)."""

from __future__ import annotations

import numpy as np

from voice.bench.pauses import format_table, silence_only
from voice.bench.turnsets import TurnItem


def item(speech: list[tuple[float, float]], pause_s: float | None = None) -> TurnItem:
    return TurnItem(
        name="x",
        set="test",
        audio=np.zeros(16000, np.float32),
        speech=speech,
        pause_s=pause_s,
        pause_at_s=None if pause_s is None else speech[0][1],
    )


def test_a_wait_takes_the_pauses_longer_than_it_and_counts_them_per_minute_of_speech() -> None:
    # 60 s of speech in one turn, pauses of 0.4, 0.9 and 1.6 s; a turn with no pause.
    turn = item([(0.0, 20.0), (20.4, 40.4), (41.3, 51.3), (52.9, 62.9)])
    report = silence_only([turn, item([(0.0, 0.0)])], waits_ms=(300, 500, 1000, 2000))
    rows = {row["wait_ms"]: row for row in report["rows"]}
    assert report["pauses"] == 3 and report["user_speech_min"] == 1.0
    assert [rows[w]["pauses_taken"] for w in (300, 500, 1000, 2000)] == [3, 2, 1, 0]
    assert rows[500]["share_of_pauses"] == round(2 / 3, 3)
    assert rows[1000]["cut_ins_per_min"] == 1.0
    assert "hesitations" not in report and "hesitations_taken" not in rows[500]


def test_spliced_hesitations_over_the_target_are_not_counted_as_hesitations() -> None:
    short = item([(0.0, 2.0), (3.0, 5.0)], pause_s=1.0)
    long = item([(0.0, 2.0), (4.0, 6.0)], pause_s=2.0)  # over the 1.5 s the target covers
    report = silence_only([short, long], waits_ms=(500, 1200))
    rows = {row["wait_ms"]: row for row in report["rows"]}
    assert report["hesitations"] == 1
    assert rows[500]["hesitations_taken"] == 1 and rows[1200]["hesitations_taken"] == 0
    assert rows[1200]["pauses_taken"] == 1  # the 2 s pause is still a pause
    table = format_table({"sets": {"hesitation": report}})
    assert "| hesitation | 500 ms | 2 of 2 (100.0%) |" in table and "1 of 1" in table
