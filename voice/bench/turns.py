"""``voice bench turns``: does the assistant wait out pauses and answer the whole turn?

Each item of the three sets (:mod:`voice.bench.turnsets`: hesitations, pairs of
sentences, conversational turns) is fed as the microphone of a fresh session in
honest virtual time, once per mode; the session's events are measured against the
item's ground truth (where the user's own speech really is). Per turn:

- cut-in: a reply's first audio played while the user still had speech to come in
  the turn (after its first speech, before the end of its last);
- on a hesitation item, whether a cut-in's reply started in the spliced pause itself
  (the hesitation target's figure; a reader's own pause after a whole sentence may be
  taken, as issue 21 says, if the reply then yields and the turn is joined);
- mid-turn pauses (silences of ``MIN_PAUSE_S`` or more inside the turn) on which a
  reply *started*: a ``reply_start`` event inside the pause. The start, not the first
  audio, is the decision that the turn is over; a reply cancelled before it was heard
  still counts;
- talk-over: for each reply whose first audio came before the turn's end, how long its
  audio played over the user's speech (from the user's resumption to the output
  pausing or stopping, and again if it resumed over speech);
- the answer: the first reply started at or after the turn's real end (else the last
  one not interrupted). Whole when it started after the end and its prompt covers the
  turn, by any of: WER against the reference at most ``WHOLE_WER``; the span the
  session recognised for it (``turn_metrics.user_start_ms``..``user_end_ms``) covers
  ``WHOLE_COVERAGE`` of the turn's speech time (meeting turns have no transcript, and
  a misrecognised but whole turn is not a fragment); its text holds every final
  transcript the session made of the turn (the words before a pause were merged in).
  An answer to a fragment fails all three. Whole is not heard right: each set also
  gives the answers' WER (``answer_wer_percent``, p50 and p90, turns with a transcript);
- voice-to-voice at the real end: the end of the turn's last speech to the first reply
  audio after it (none when a reply was playing across the end: that is a cut-in).

Modes are Settings overrides (:data:`MODES`); read-speech voice-to-voice is
``voice bench conversation``'s, not repeated here.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from voice.audio.format import SAMPLE_RATE
from voice.bench.conversation import BENCH_REPLY_TOKENS, _live_replies, _rate
from voice.bench.turnsets import (
    EXTRA_SETS,
    MIN_PAUSE_S,
    SETS,
    Interval,
    TurnItem,
    WordsOf,
    build_set,
    whisper_words,
)
from voice.config import Settings
from voice.errors import ConfigError
from voice.stats import normalize_text, p50_p95, percentile, word_errors

log = logging.getLogger(__name__)

WHOLE_WER = 0.25
WHOLE_COVERAGE = 0.9
SPAN_SLACK_MS = 300  # the recognised span's edges may miss this much (VAD onset, tail trim)
# Replies are capped shorter than ``voice bench conversation``'s: first audio does not
# depend on the length, a reply still plays over any pause of the sets, and the run
# stays near five minutes a mode on 2 cores.
TURN_REPLY_TOKENS = BENCH_REPLY_TOKENS // 2
TIMELINE_KEYS = ("type", "audio_ms", "reply_id", "utterance_id", "text", "start_ms", "end_ms")
HESITATION_TARGET_S = 1.5  # the issue's target covers hesitations up to this long
LONG_TURN_S = 15  # also reported: voice-to-voice after turns of more speech than this

# A mode is a name and "section.key" overrides; adding one is one line. Keys the
# Settings do not know (yet) are skipped with a warning, so a mode can name a setting
# before the code that reads it lands.
# "text_only" is the end of turn as it was before issue 21 (the text rule on Whisper's
# words, 1.2 s after unfinished words, no merging); each measure is then added alone.
TEXT_ONLY: dict[str, Any] = {
    "turn.use_word_timing": False,
    "turn.continue_turns": False,
    "turn.incomplete_silence_ms": 1200,
    "turn.filler_silence_ms": 1200,
    "turn.held_sound_ms": 0,
}
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "text_only": TEXT_ONLY,
    "word_timing": {**TEXT_ONLY, "turn.use_word_timing": True},
    "waits": {**TEXT_ONLY, "turn.incomplete_silence_ms": 2000, "turn.filler_silence_ms": 2500},
    "merge": {**TEXT_ONLY, "turn.continue_turns": True},
    "model": {"turn.use_model": True},
    "patient": {"turn.complete_silence_ms": 800},
    # A listener for people who think aloud: finished-looking words and words without a
    # mark wait 1 s (1.2 s), as long as a rule on silence alone needs to start a reply on
    # about 5% of the conversation set's pauses (voice bench pauses).
    "patient_1000": {"turn.complete_silence_ms": 1000, "turn.unpunctuated_silence_ms": 1000},
    "patient_1200": {"turn.complete_silence_ms": 1200, "turn.unpunctuated_silence_ms": 1200},
    "pace": {"turn.use_pace": True},  # wait out this speaker's own pauses
    # No patience learned from the pauses a reply was started in and the user went on.
    "patience_off": {"turn.patience_max_ms": 0},
    "patience_1_join": {"turn.patience_after_joins": 1},  # learned from the first join
    "patience_1000": {"turn.patience_max_ms": 1000},  # waits out pauses of up to 0.9 s
    "merge_1500": {"turn.continue_max_heard_ms": 1500},  # merge over more of a reply
    # No late joins (on three words or the final, over continue_max_heard_ms of reply).
    "first_words_only": {"turn.continue_late_max_heard_ms": 0},
    "late_1500": {"turn.continue_late_max_heard_ms": 1500},  # the late joins before 3 Dec.
    # Words Whisper gave no closing mark: 800 ms is the default (1000 ms until 5 Dec.);
    # off, they wait vad.end_silence_ms like any words not judged.
    "unpunctuated_off": {"turn.unpunctuated_silence_ms": 0},
    "held_off": {"turn.held_sound_ms": 0},  # a voice held level at the pause is not a filler
    "unpunctuated_800": {"turn.unpunctuated_silence_ms": 800},
    "unpunctuated_1000": {"turn.unpunctuated_silence_ms": 1000},
    "unpunctuated_1500": {"turn.unpunctuated_silence_ms": 1500},
    "fixed": {"turn.use_text": False, "turn.use_model": False, "vad.end_silence_ms": 600},
    # Recognition windows on long turns: trimmed past this many seconds (the default: 6).
    "window_12": {"listen.max_window_s": 12.0},
    "window_8": {"listen.max_window_s": 8.0},
    # The word-timing guard's slack for every word, not for each syllable: no word is
    # found broken off (the guard as it first was).
    "per_word_slack": {"listen.unspoken_slack_per_syllable": False},
    # Long buffers cut only at Whisper's segment ends, not also in committed pauses.
    "no_pause_trim": {"listen.trim_in_pauses": False},
    # A pass that loops at its end decoded again on three times the margin, not cut.
    "loop_retry": {"asr.cut_tail_loops": False},
    # Speculations a turn may start (8 by default; a long turn's pauses spend them).
    "speculate_3": {"conversation.speculation_retries": 3},
    # The reply prepared as soon as a pause's words are known, whatever their wait.
    "prepare_at_once": {"conversation.speculation_lead_ms": 0},
    # Both, as speculation was until 3 December (night).
    "speculation_before": {
        "conversation.speculation_retries": 3,
        "conversation.speculation_lead_ms": 0,
    },
    # The end of turn not held by a hair-trigger run in the pause (before 3 December, late).
    "voice_hold_off": {"vad.voice_run_ms": 0},
    # Speech after a short reply that played to its end is a new turn (before 3 Dec., late).
    "short_reply_no_join": {"turn.continue_after_short_reply": False},
    # A reply paused on a shorter run of the hair trigger (80 ms by default).
    "pause_60": {"conversation.barge_in_pause_ms": 60},
    # The unfinished words as they were before 3 December: no determiner "his", no
    # pronoun's contracted auxiliary ("it's"), no open words without a mark ("is").
    "open_words_off": {
        "turn.open_words": "",
        "turn.continuation_words": (
            "um uh er erm like and but or so because cause then also plus "
            "the a an my your our their its "
            "to of in on at for with from by about into onto over under than as if "
            "let's whether which"
        ),
    },
}


def mode_settings(settings: Settings, overrides: dict[str, Any]) -> tuple[Settings, list[str]]:
    """A copy of ``settings`` with a mode's overrides and the bench's reply cap; and the
    keys skipped because these Settings do not have them."""
    s = copy.deepcopy(settings)
    s.llm.max_reply_tokens = TURN_REPLY_TOKENS
    skipped = []
    for key, value in overrides.items():
        section, _, name = key.partition(".")
        try:
            s.set(section, name, value)
        except ConfigError as exc:
            log.warning("bench turns: skipping %s=%r (%s)", key, value, exc)
            skipped.append(key)
    return s, skipped


# -- measuring (pure: events and truth in, figures out) ----------------------------------


@dataclass
class _Reply:
    reply_id: int
    start_ms: float
    text: str
    utterance_id: int
    first_audio_ms: float | None = None
    interrupted: bool = False


def play_spans(events: list[dict[str, Any]]) -> dict[int, list[Interval]]:
    """When each reply's audio was playing: from its first sample or a resume, to a
    pause, an interruption or its end."""
    spans: dict[int, list[Interval]] = {}
    since: dict[int, float] = {}
    last = 0.0
    for e in events:
        last = max(last, e["audio_ms"])
        rid = e.get("reply_id")
        if rid is None:
            continue
        if e["type"] in ("playback_start", "resumed"):
            since.setdefault(rid, e["audio_ms"])
        elif e["type"] in ("paused", "interrupted", "reply_end") and rid in since:
            spans.setdefault(rid, []).append((since.pop(rid), e["audio_ms"]))
    for rid, start in since.items():
        spans.setdefault(rid, []).append((start, last))
    return spans


def _overlap(a: list[Interval], b: list[Interval]) -> float:
    return sum(max(0.0, min(x1, y1) - max(x0, y0)) for x0, x1 in a for y0, y1 in b)


def _replies(events: list[dict[str, Any]]) -> list[_Reply]:
    replies: dict[int, _Reply] = {}
    for e in events:
        kind = e["type"]
        if kind == "reply_start":
            replies[e["reply_id"]] = _Reply(
                e["reply_id"], e["audio_ms"], e.get("text", ""), e.get("utterance_id", -1)
            )
        elif kind == "playback_start" and e["reply_id"] in replies:
            r = replies[e["reply_id"]]
            r.first_audio_ms = r.first_audio_ms if r.first_audio_ms is not None else e["audio_ms"]
        elif kind == "reply_end" and e["reply_id"] in replies:
            replies[e["reply_id"]].interrupted = bool(e.get("interrupted"))
    return sorted(replies.values(), key=lambda r: r.start_ms)


def _heard_span(reply: _Reply, events: list[dict[str, Any]]) -> Interval | None:
    """The audio span the session recognised as the reply's turn."""
    for e in events:
        if e["type"] == "turn_metrics" and e.get("reply_id") == reply.reply_id:
            return (e["user_start_ms"] - SPAN_SLACK_MS, e["user_end_ms"] + SPAN_SLACK_MS)
    for e in events:
        if e["type"] == "final" and e.get("utterance_id") == reply.utterance_id:
            return (e["start_ms"] - SPAN_SLACK_MS, e["end_ms"] + SPAN_SLACK_MS)
    return None


def _metrics_of(reply: _Reply, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next(
        (e for e in events if e["type"] == "turn_metrics" and e.get("reply_id") == reply.reply_id),
        None,
    )


def _holds_all_finals(
    text: str, events: list[dict[str, Any]], turn_start: float, turn_end: float
) -> bool:
    """Whether ``text`` holds every non-empty final transcript that began inside the turn
    (False when there was none: nothing to judge by)."""
    said = normalize_text(text)
    finals = [
        normalize_text(e["text"])
        for e in events
        if e["type"] == "final" and turn_start - SPAN_SLACK_MS <= e["start_ms"] <= turn_end
    ]
    finals = [f for f in finals if f]
    return bool(finals) and all(f in said for f in finals)


def measure_turn(
    speech_ms: list[Interval],
    reference: str,
    events: list[dict[str, Any]],
    spliced_ms: Interval | None = None,
) -> dict[str, Any]:
    """One turn's figures (see the module docstring); ``speech_ms``: the user's speech
    in the session's audio time, gaps of at least ``MIN_PAUSE_S`` between intervals;
    ``spliced_ms``: a hesitation item's spliced pause (its cut-ins there
    are the ones its target counts: a reader's own pause after a whole sentence may be
    taken, the issue says, if the reply then yields and the turn is joined)."""
    turn_start, turn_end = speech_ms[0][0], speech_ms[-1][1]
    replies = _replies(events)
    spans = play_spans(events)
    early = [r for r in replies if r.first_audio_ms is not None and r.first_audio_ms < turn_end]
    cut_ins = [r for r in early if r.first_audio_ms is not None and r.first_audio_ms > turn_start]
    pauses = [(a[1], b[0]) for a, b in itertools.pairwise(speech_ms)]
    pauses = [p for p in pauses if p[1] - p[0] >= MIN_PAUSE_S * 1000 - 1]
    answered = [p for p in pauses if any(p[0] <= r.start_ms < p[1] for r in replies)]
    talk_over = [_overlap(spans.get(r.reply_id, []), speech_ms) for r in early]
    after = [r for r in replies if r.start_ms >= turn_end]
    kept = [r for r in replies if r.start_ms < turn_end and not r.interrupted]
    answer = after[0] if after else (kept[-1] if kept else None)
    row: dict[str, Any] = {
        "speech_s": round(sum(b - a for a, b in speech_ms) / 1000, 2),
        "replies": len(replies),
        "cut_ins": len(cut_ins),
        "cut_in_at_s": [round(((r.first_audio_ms or 0) - turn_start) / 1000, 2) for r in cut_ins],
        "cut_in_texts": [r.text for r in cut_ins],
        "cut_in_at_spliced_pause": None,
        "mid_turn_pauses": len(pauses),
        "pauses_with_reply_start": len(answered),
        "talk_over_ms": [round(t) for t in talk_over],
        "answer_text": answer.text if answer else None,
        "answer_after_end": bool(answer and answer.start_ms >= turn_end),
        "wer": None,
        "coverage": None,
        "holds_all_finals": None,
        "whole": False,
        "voice_to_voice_ms": None,
        "end_silence_ms": None,
        "after_endpoint_ms": None,
    }
    if spliced_ms is not None:
        lo, hi = spliced_ms
        row["cut_in_at_spliced_pause"] = any(lo <= r.start_ms < hi for r in cut_ins)
    if answer is not None:
        metrics = _metrics_of(answer, events)
        if metrics is not None and metrics.get("end_silence_ms") is not None:
            # The silence the turn was given, and what came after it (the final pass,
            # the reply's first chunk and its synthesis, where speculation had not).
            row["end_silence_ms"] = metrics["end_silence_ms"]
            if metrics.get("voice_to_voice_ms") is not None:
                after_endpoint = metrics["voice_to_voice_ms"] - metrics["end_silence_ms"]
                row["after_endpoint_ms"] = round(max(0.0, after_endpoint))
        if reference:
            errors, words = word_errors(reference, answer.text)
            row["wer"] = round(errors / max(1, words), 3)
        heard = _heard_span(answer, events)
        if heard is not None:
            covered = _overlap([heard], speech_ms) / max(1.0, sum(b - a for a, b in speech_ms))
            row["coverage"] = round(covered, 3)
        row["holds_all_finals"] = _holds_all_finals(answer.text, events, turn_start, turn_end)
        good = (
            (row["wer"] is not None and row["wer"] <= WHOLE_WER)
            or (row["coverage"] or 0.0) >= WHOLE_COVERAGE
            or row["holds_all_finals"]
        )
        row["whole"] = row["answer_after_end"] and good
    live = _live_replies(events)
    first = [r.first_audio_ms for r in after if r.first_audio_ms is not None]
    if first and not any(lo < turn_end < hi for lo, hi in live):
        row["voice_to_voice_ms"] = round(min(first) - turn_end)
    return row


def summarize_set(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A set's figures over its turns (rows from :func:`measure_turn`)."""
    turns = len(rows)
    minutes = sum(r["speech_s"] for r in rows) / 60
    cut_in_turns = sum(1 for r in rows if r["cut_ins"])
    cut_ins = sum(r["cut_ins"] for r in rows)
    pauses = sum(r["mid_turn_pauses"] for r in rows)
    with_reply = sum(r["pauses_with_reply_start"] for r in rows)
    talk = [float(t) for r in rows for t in r["talk_over_ms"]]
    v2v = [float(r["voice_to_voice_ms"]) for r in rows if r["voice_to_voice_ms"] is not None]
    long_rows = [r for r in rows if r["speech_s"] > LONG_TURN_S]
    long_v2v = [
        float(r["voice_to_voice_ms"]) for r in long_rows if r["voice_to_voice_ms"] is not None
    ]
    long_after = [
        float(r["after_endpoint_ms"]) for r in long_rows if r.get("after_endpoint_ms") is not None
    ]
    after = [float(r["after_endpoint_ms"]) for r in rows if r.get("after_endpoint_ms") is not None]
    wers = [100 * float(r["wer"]) for r in rows if r.get("wer") is not None]
    out: dict[str, Any] = {
        "turns": turns,
        "user_speech_min": round(minutes, 2),
        "cut_in_rate": _rate(cut_in_turns, turns),
        "cut_ins": cut_ins,
        "cut_ins_per_min": round(cut_ins / minutes, 2) if minutes else None,
        "mid_turn_pauses": pauses,
        "pause_reply_start_rate": _rate(with_reply, pauses),
        "talk_over_ms": p50_p95(talk),
        "whole_turn_rate": _rate(sum(1 for r in rows if r["whole"]), turns),
        "unanswered": sum(1 for r in rows if r["answer_text"] is None),
        # How well the answered words match what was said (turns with a transcript):
        # whole is not the same as heard right, and pauses are where Whisper guesses.
        "answer_wer_percent": {
            "p50": percentile(wers, 50),
            "p90": percentile(wers, 90),
            "n": len(wers),
        },
        "voice_to_voice_ms": {**p50_p95(v2v), "p90": percentile(v2v, 90)},
        f"voice_to_voice_over_{LONG_TURN_S}s_ms": p50_p95(long_v2v),
        # Past the end-of-turn silence: does the reply come later after a long turn?
        "reply_after_endpoint_ms": p50_p95(after),
        f"reply_after_endpoint_over_{LONG_TURN_S}s_ms": p50_p95(long_after),
    }
    by_pause: dict[str, list[bool]] = {}
    for r in rows:
        if r.get("pause_s") is not None:
            by_pause.setdefault(f"{r['pause_s']:.1f}s", []).append(bool(r["cut_ins"]))
    if by_pause:
        out["cut_in_rate_by_pause"] = {
            k: _rate(sum(v), len(v)) for k, v in sorted(by_pause.items())
        }
        upto = [
            bool(r["cut_ins"])
            for r in rows
            if r.get("pause_s") is not None and r["pause_s"] <= HESITATION_TARGET_S
        ]
        out[f"cut_in_rate_up_to_{HESITATION_TARGET_S}s"] = _rate(sum(upto), len(upto))
        at_pause = [
            bool(r.get("cut_in_at_spliced_pause"))
            for r in rows
            if r.get("cut_in_at_spliced_pause") is not None and r["pause_s"] <= HESITATION_TARGET_S
        ]
        if at_pause:  # the target's figure: cut-ins at the hesitation itself
            out[f"cut_in_at_spliced_pause_rate_up_to_{HESITATION_TARGET_S}s"] = _rate(
                sum(at_pause), len(at_pause)
            )
    return out


# -- running -------------------------------------------------------------------------------


def run_item(item: TurnItem, settings: Settings, engines: Any) -> dict[str, Any]:
    """One item through a fresh session; its row (with the events' figures)."""
    from voice.app.build import build_session
    from voice.transports.simulate import Script, ScriptTurn, simulate

    started = time.perf_counter()
    turn = ScriptTurn(audio=item.audio, name=item.name, at_s=0.5, expect="turn")
    result = simulate(Script([turn]), build_session(settings, engines), engines)
    begin_ms = (turn.start_sample or 0) * 1000 / SAMPLE_RATE
    speech_ms = [(begin_ms + a * 1000, begin_ms + b * 1000) for a, b in item.speech]
    row: dict[str, Any] = {"name": item.name, "note": item.note, "pause_s": item.pause_s}
    spliced_ms = None
    if item.pause_at_s is not None and item.pause_s is not None:
        at_ms = begin_ms + item.pause_at_s * 1000
        spliced_ms = (at_ms, at_ms + item.pause_s * 1000)
    row.update(measure_turn(speech_ms, item.reference, result.events, spliced_ms))
    row["finals"] = [e["text"] for e in result.events if e["type"] == "final"]
    row["errors"] = [e.get("code") for e in result.events if e["type"] == "error"]
    row["wall_s"] = round(time.perf_counter() - started, 1)
    if row["cut_ins"] or not row["whole"]:  # what to look at: the turn's decisions, in order
        row["speech_ms"] = [[round(a), round(b)] for a, b in speech_ms]
        row["timeline"] = [
            {k: v for k, v in e.items() if k in TIMELINE_KEYS}
            for e in result.events
            if e["type"] not in ("partial", "audio_chunk", "reply_text", "state")
        ]
    return row


def with_decoding(engines: Any, settings: Settings) -> Any:
    """``engines`` with the recognizer decoding as a mode's ``[asr]`` settings say. The
    models load once for all modes, so a mode may change how a pass decodes (its
    loops, margins, word timing), not which model or how many threads."""
    asr = engines.asr
    if getattr(asr, "config", settings.asr) == settings.asr:
        return engines
    loaded = ("model", "compute_type", "threads")
    if any(getattr(asr.config, k) != getattr(settings.asr, k) for k in loaded):
        raise ConfigError(
            "a voice bench turns mode cannot change asr.model, compute_type or threads.",
            "Run the bench once per model instead (--asr-model, --asr-threads).",
        )
    decoding = copy.copy(asr)
    decoding.config = settings.asr
    return dataclasses.replace(engines, asr=decoding)


def whisper_model(engines: Any | None, settings: Settings) -> object:
    """The loaded faster-whisper model, or the configured one loaded for word timings
    (no engines, or an ASR engine that is not Whisper, has none to lend)."""
    model = getattr(getattr(engines, "asr", None), "model", None)
    if model is not None and hasattr(model, "transcribe"):
        return model
    from faster_whisper import WhisperModel

    from voice.models import resolve_asr_model

    path = resolve_asr_model(settings.asr.model)
    return WhisperModel(path, device="cpu", compute_type="int8", cpu_threads=2)


def splice_words(sets: list[str], settings: Settings) -> WordsOf | None:
    """Word timings for building ``sets`` offline (``voice bench prosody``, ``pauses``):
    the configured Whisper model's, where a hesitation set needs them to place its
    splices; None otherwise, and no model is loaded."""
    if not any(name.startswith("hesitation") for name in sets):
        return None
    return whisper_words(whisper_model(None, settings))


def bench_turns(
    settings: Settings,
    sets: list[str] | None = None,
    modes: list[str] | None = None,
    limit: int | None = None,
    corpus: str | Path | None = None,
) -> dict[str, Any]:
    from voice.app.build import load_engines

    sets = sets or list(SETS)
    modes = modes or ["default"]
    known_sets = SETS + EXTRA_SETS
    unknown = [m for m in modes if m not in MODES] + [s for s in sets if s not in known_sets]
    if unknown:
        raise ConfigError(
            f"unknown turn bench mode or set: {', '.join(unknown)}.",
            f"Modes: {', '.join(MODES)}; sets: {', '.join(known_sets)}.",
        )
    base, _ = mode_settings(settings, {})
    engines = load_engines(base)
    started = time.perf_counter()
    words_of = whisper_words(whisper_model(engines, base))
    root = Path(corpus) if corpus else None
    items = {name: build_set(name, words_of, root)[: limit or None] for name in sets}
    report: dict[str, Any] = {
        "reply_tokens_cap": TURN_REPLY_TOKENS,
        "setup_s": round(time.perf_counter() - started, 1),
        "sets": {name: len(found) for name, found in items.items()},
        "modes": {},
        "turns": {},
    }
    for mode in modes:
        mode_s, skipped = mode_settings(settings, MODES[mode])
        mode_engines = with_decoding(engines, mode_s)
        started = time.perf_counter()
        entry: dict[str, Any] = {"overrides": MODES[mode], "skipped_settings": skipped}
        rows_by_set = {}
        for name, found in items.items():
            rows_by_set[name] = [run_item(item, mode_s, mode_engines) for item in found]
            entry[name] = summarize_set(rows_by_set[name])
        every = [r for rows in rows_by_set.values() for r in rows]
        entry["whole_turn_rate_all_sets"] = _rate(sum(r["whole"] for r in every), len(every))
        entry["wall_s"] = round(time.perf_counter() - started, 1)
        # Virtual time charges real compute: under other load every decision comes late
        # (fewer cut-ins, seconds of voice-to-voice). Compare modes run at like load.
        entry["load_avg_1min_at_end"] = round(os.getloadavg()[0], 2)
        report["modes"][mode] = entry
        report["turns"][mode] = every
    return report
