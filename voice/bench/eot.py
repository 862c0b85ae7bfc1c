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

The listener does not hear the whole clip at a pause: its final pass ends just after
the speech, and there Whisper completes what it heard ("...being infected." for
"...being in"). So each point is also heard as the listener hears it (``live_pass``:
the audio up to the pause and ``listen.final_tail_ms`` after it, at most ``LIVE_WINDOW_S``
back, the words before as context), and scored with the listener's word-timing guard
and with the two signals the issue asked about beside it: a last word the decoder
was unsure of, and one whose alignment runs on past the speech.

Beside the words, each point's intonation (``voice.bench.intonation``, no model): did
the voice fall to the bottom of the speaker's range, or end quiet, as a yielded turn
does in studies of dialogue?
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voice.audio.format import SAMPLE_RATE, Float32Array
from voice.bench.intonation import final_contour
from voice.bench.turnsets import SETS, Word, build_set, decision_points, whisper_words
from voice.config import Settings
from voice.conversation.turns import COMPLETE_PUNCTUATION, judge_turn
from voice.errors import ConfigError
from voice.listen.pitch import held_sound_s
from voice.listen.spoken import spoken_part, unspoken_tail
from voice.listen.whisper import WhisperEngine
from voice.stats import p50_p95, percentile

THRESHOLDS = (0.005, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
WORD_SLACK_S = 0.05  # a word Whisper starts this close to the pause's start is still said
# The listener's final pass re-reads at most this much (the settled words before: context).
LIVE_WINDOW_S = 10.0
UNSURE_WORD = 0.6  # a last word the decoder gave less than this
RUNS_ON_S = 0.1  # a last word aligned to end this far past the speech
PROSODY_DELAY_S = 0.2  # the prosody model hears this much of the silence (its default)
PROSODY_SURE = (0.1, 0.8)  # under the first it says "not finished", over the second "done"
# The intonation cues of a yielded turn (``voice.bench.intonation``): a fall to the bottom of
# the speaker's range, and a voice gone quiet, each against the seconds before.
FALL_ST = -3.0
QUIET_END_DB = -6.0


def words_before(words: list[Word], at_s: float) -> str:
    """The words that start before ``at_s``, as Whisper wrote them."""
    return "".join(w for w, start, _ in words if start < at_s - WORD_SLACK_S).strip()


def strip_final_mark(text: str) -> str:
    """The words without the punctuation Whisper ended them with."""
    return text.rstrip().rstrip("".join(COMPLETE_PUNCTUATION) + ",;:-—…").rstrip()


def live_pass(
    engine: WhisperEngine,
    audio: Float32Array,
    words: list[Word],
    at_s: float,
    settings: Settings,
) -> dict[str, Any]:
    """What the listener's final pass at the pause starting at ``at_s`` hears, and how
    its words are judged (the word-timing guard as the listener applies it)."""
    start = max(0.0, at_s - LIVE_WINDOW_S)
    tail_s = settings.listen.final_tail_ms / 1000.0  # the pass runs this far past the sound
    heard = audio[int(start * SAMPLE_RATE) : int((at_s + tail_s) * SAMPLE_RATE)]
    result = engine.transcribe(heard, words_before(words, start), final=True, word_timing=True)
    text = " ".join(result.words)
    slack_s = settings.listen.unspoken_slack_ms / 1000.0
    per_syllable = settings.listen.unspoken_slack_per_syllable
    pause_s = at_s - start  # where the speech stops in the pass's audio
    unspoken = unspoken_tail(
        result.timed_words, pause_s, slack_s, per_syllable, most=len(result.words)
    )
    dropped = unspoken.words
    base_ms = settings.vad.end_silence_ms
    spoken = spoken_part(text, dropped)
    stop = int(at_s * SAMPLE_RATE)  # as the listener's pass: the pause it runs on into too
    held_s = held_sound_s(audio[:stop], audio[stop : int((at_s + tail_s) * SAMPLE_RATE)])
    judged = judge_turn(spoken, None, settings.turn, base_ms, dropped > 0, unspoken.cut_off, held_s)
    said = [w for w in result.timed_words if any(c.isalnum() for c in w.word)]
    last = said[-1] if said else None
    return {
        "live_text": text[-80:],
        "live_spoken": spoken,
        "live_rule": judged.reason,
        "live_dropped": dropped,
        "live_cut_off": unspoken.cut_off,
        "live_held_s": round(held_s, 3),
        "live_last_p": round(last.probability, 3) if last else None,
        "live_last_past_s": round(last.end_s - pause_s, 3) if last else None,
        "live_tail": [
            (
                w.word,
                round(w.start_s - pause_s, 3),
                round(w.end_s - pause_s, 3),
                round(w.probability, 3),
            )
            for w in said[-4:]
        ],
    }


def bench_eot(
    settings: Settings,
    sets: list[str] | None = None,
    limit: int | None = None,
    onnx: str | None = None,
) -> dict[str, Any]:
    """``onnx``: also score each point with that prosody model (Smart Turn v3.2), given
    ``PROSODY_DELAY_S`` of the silence, to see it beside the words' own judgement."""
    from voice.app.build import lane_configs
    from voice.bench.prosody import ProsodyModel
    from voice.think.backend import Message, make_backend, system_prompt_of

    llm_config, _ = lane_configs(settings)
    llm = make_backend(llm_config)
    if not hasattr(llm, "end_of_turn_probability"):
        raise ConfigError(
            f"the {llm_config.backend} LLM backend gives no end-of-turn probability.",
            "Run voice bench eot with the embedded backend (llm.backend = embedded).",
        )
    system = [Message("system", system_prompt_of(llm_config))]
    prosody = ProsodyModel(Path(onnx)) if onnx else None
    engine = WhisperEngine(settings.asr)
    words_of = whisper_words(engine.model)
    base_ms = settings.vad.end_silence_ms
    report: dict[str, Any] = {"sets": {}, "points": []}
    seconds: list[float] = []
    for name in sets or list(SETS):
        items = build_set(name, words_of)[: limit or None]
        rows = []
        for item in items:
            words = words_of(item.audio)
            gaps = {start: end - start for start, end in item.pauses}
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
                    "gap_s": None if is_end else round(gaps[at_s], 3),
                    "text": text[-80:],
                    "rule": judged.reason,
                    "eot": round(written, 4),
                    "eot_bare": round(bare, 4),
                    **live_pass(engine, item.audio, words, at_s, settings),
                }
                contour = final_contour(item.audio, at_s)
                row["pitch_final_st"] = rounded(contour.final_st)
                row["pitch_slope_st_s"] = rounded(contour.slope_st_s)
                row["pitch_final_db"] = rounded(contour.final_db)
                if prosody is not None:
                    heard = item.audio[: int((at_s + PROSODY_DELAY_S) * SAMPLE_RATE)]
                    row["prosody"] = round(prosody.complete(heard), 3)
                rows.append(row)
                report["points"].append(row)
        report["sets"][name] = summarize(rows)
        report["sets"][name]["waits"] = waits(rows, settings)
    report["eot_ms"] = p50_p95([s * 1000 for s in seconds])
    return report


def rounded(value: float | None) -> float | None:
    """A measure for the report: two decimals, or none where there was none."""
    return None if value is None else round(value, 2)


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

    live_tests = {
        "live_complete": lambda r: r["live_rule"] == "complete",
        "live_dropped": lambda r: r["live_dropped"] > 0,
        "live_cut_off": lambda r: r["live_cut_off"],
        "live_held": lambda r: r["live_rule"] == "held",
        "live_unsure_last": lambda r: (
            r["live_rule"] == "complete" and (r["live_last_p"] or 0.0) < UNSURE_WORD
        ),
        "live_runs_on": lambda r: (
            r["live_rule"] == "complete" and (r["live_last_past_s"] or 0.0) > RUNS_ON_S
        ),
    }
    for name, test in live_tests.items():
        out[name] = {"pauses": sum(map(test, pauses)), "ends": sum(map(test, ends))}
    if rows and "prosody" in rows[0]:
        out["prosody"] = prosody_by_rule(pauses, ends)
    out["intonation"] = intonation_by_rule(pauses, ends)
    for key in ("eot", "eot_bare"):
        for t in THRESHOLDS:
            out[f"{key}>={t}"] = {
                "pauses": complete(pauses, key, t, False),
                "ends": complete(ends, key, t, False),
                "pauses_rule_complete": complete(pauses, key, t, True),
                "ends_rule_complete": complete(ends, key, t, True),
            }
    return out


def by_reason(
    pauses: list[dict[str, Any]],
    ends: list[dict[str, Any]],
    count: Callable[[list[dict[str, Any]]], dict[str, int]],
) -> dict[str, dict[str, int]]:
    """Per reason the listener's words were given ("complete", "unpunctuated"), how
    many pauses and ends there were and what ``count`` finds among each: could a second
    opinion brake the words' "complete", or hurry their "unpunctuated"?"""
    out = {}
    for reason in ("complete", "unpunctuated"):
        counts = {}
        for where, group in (("pauses", pauses), ("ends", ends)):
            mine = [r for r in group if r["live_rule"] == reason]
            counts[where] = len(mine)
            counts.update({f"{where}_{key}": n for key, n in count(mine).items()})
        out[reason] = counts
    return out


def prosody_by_rule(
    pauses: list[dict[str, Any]], ends: list[dict[str, Any]]
) -> dict[str, dict[str, int]]:
    """How many pauses and ends, per reason, the prosody model is sure of either way."""
    low, high = PROSODY_SURE

    def sure(rows: list[dict[str, Any]]) -> dict[str, int]:
        return {
            f"under_{low}": sum(r["prosody"] < low for r in rows),
            f"over_{high}": sum(r["prosody"] > high for r in rows),
        }

    return by_reason(pauses, ends, sure)


def intonation_by_rule(
    pauses: list[dict[str, Any]], ends: list[dict[str, Any]]
) -> dict[str, dict[str, int]]:
    """How many pauses and ends, per reason, had a measurable contour, fell to the
    bottom of the speaker's range (``FALL_ST``), and ended quiet (``QUIET_END_DB``)."""

    def cues(rows: list[dict[str, Any]]) -> dict[str, int]:
        measured = [r for r in rows if r["pitch_final_st"] is not None]
        return {
            "measured": len(measured),
            "fall": sum(r["pitch_final_st"] <= FALL_ST for r in measured),
            "quiet": sum(r["pitch_final_db"] <= QUIET_END_DB for r in measured),
        }

    return by_reason(pauses, ends, cues)


# (turn.complete_silence_ms, turn.unpunctuated_silence_ms) to try; the rest as set.
WAITS = ((500, 600), (500, 800), (500, 1000), (500, 1500), (700, 1000), (800, 1200))


def waits(rows: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """What each pair of ``WAITS`` would do with the listener's words, by the silences
    alone (no compute, no VAD hangover): the mid-turn pauses longer than the wait
    their words are given (a reply would start in them), and the wait at the ends."""
    out = {}
    for complete_ms, unpunctuated_ms in WAITS:
        turn = dataclasses.replace(
            settings.turn, complete_silence_ms=complete_ms, unpunctuated_silence_ms=unpunctuated_ms
        )
        taken = 0
        at_ends: list[float] = []
        for r in rows:
            wait = judge_turn(
                r["live_spoken"],
                None,
                turn,
                settings.vad.end_silence_ms,
                r["live_dropped"] > 0,
                r["live_cut_off"],
                r["live_held_s"],
            ).silence_ms
            if r["end"]:
                at_ends.append(wait)
            else:
                taken += r["gap_s"] * 1000 > wait
        pauses = len(rows) - len(at_ends)
        out[f"{complete_ms}/{unpunctuated_ms}"] = {
            "pauses_taken": taken,
            "pauses_taken_rate": taken / pauses if pauses else 0.0,
            "end_wait_ms": {
                "p50": percentile(at_ends, 50) or 0,
                "p90": percentile(at_ends, 90) or 0,
            },
        }
    return out


def by_set(
    report: dict[str, Any],
    key: str,
    header: str,
    cells: Callable[[dict[str, Any], dict[str, Any]], str],
) -> list[str]:
    """A table of one row per set and entry of its ``key`` (a wait, a reason), the
    entry's ``cells`` after the two names; nothing where no set has ``key``."""
    rows = [
        f"| {name} | {entry} | {cells(values, row)} |"
        for name, row in report["sets"].items()
        for entry, values in row.get(key, {}).items()
    ]
    return ["", header, "| --- | --- | --- | --- |", *rows] if rows else []


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
    lines += [
        "",
        "| set | the listener's pass: judged complete, pauses / ends | the guard dropped "
        "words | of them, a word broken off | of its complete: last word p < "
        f"{UNSURE_WORD} | last word runs on > {RUNS_ON_S} s | a voice held (a filler) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in report["sets"].items():
        cells = [
            f"{row[k]['pauses']}/{row['pauses']} / {row[k]['ends']}/{row['ends']}"
            for k in (
                "live_complete",
                "live_dropped",
                "live_cut_off",
                "live_unsure_last",
                "live_runs_on",
                "live_held",
            )
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += by_set(
        report,
        "waits",
        "| set | waits (ms): complete / no mark | mid-turn pauses a reply would start in "
        "| wait at the ends p50 / p90 |",
        lambda w, row: (
            f"{w['pauses_taken']}/{row['pauses']} ({w['pauses_taken_rate']:.0%}) | "
            f"{w['end_wait_ms']['p50']:.0f} / {w['end_wait_ms']['p90']:.0f}"
        ),
    )
    lines += by_set(
        report,
        "intonation",
        f"| set | the words' reason | pauses: measured, fell (<= {FALL_ST:g} st), quiet "
        f"(<= {QUIET_END_DB:g} dB) | ends: measured, fell, quiet |",
        lambda c, _: (
            f"{c['pauses_measured']} of {c['pauses']}, {c['pauses_fall']}, "
            f"{c['pauses_quiet']} | {c['ends_measured']} of {c['ends']}, {c['ends_fall']}, "
            f"{c['ends_quiet']}"
        ),
    )
    low, high = PROSODY_SURE
    lines += by_set(
        report,
        "prosody",
        "| set | the words' reason | pauses: prosody under / over | ends: under / over |",
        lambda c, _: (
            f"{c[f'pauses_under_{low}']} / {c[f'pauses_over_{high}']} of {c['pauses']} | "
            f"{c[f'ends_under_{low}']} / {c[f'ends_over_{high}']} of {c['ends']}"
        ),
    )
    ms = report["eot_ms"]
    lines.append(f"\nLLM end-of-turn ms p50/p95: {ms['p50']:.0f} / {ms['p95']:.0f}")
    return "\n".join(lines)
