"""``voice bench conversation``: whole conversations through the real models.

Scripted conversations are built from the corpus (users' turns, barge-ins with
words and with "stop", backchannels and noise over replies) and run through a
session in honest virtual time (each engine pass's real compute is charged to
the audio clock). Reported, p50/p95:

- voice-to-voice: end of the user's speech (the clip's last loud frame, known from
  the script, not the session's VAD) to the first reply sample played;
- barge-in: onset of speech over a reply (the clip's first loud frame) to its audio
  stopping;
- speculation hit rate, cut-in rate (a reply started while the user's clip
  still had speech to come), false barge-ins (a reply killed by noise or a
  backchannel).

In the same run: the same user turns with speculation off, with the end of
turn judged with the LLM's end-of-turn probability too and by a fixed silence
(what each signal buys), with a patient end of turn (``PATIENT_SILENCE_MS``
after finished-looking words: the other end of the latency / cut-in trade-off),
with the filler phrase on, and a naive sequential pipeline (fixed 600 ms endpoint,
full-window transcription, the whole reply, then its whole synthesis), as ratios.

Replies are capped at ``BENCH_REPLY_TOKENS`` in every mode: the first audio
does not depend on the length, and the run stays in minutes.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.app.build import build_session, load_engines
from voice.audio.format import SAMPLE_RATE
from voice.bench.corpus import Clip, longest_pause_s, speech_end_s, speech_start_s
from voice.config import Settings
from voice.conversation.metrics import summarize
from voice.errors import ConfigError
from voice.runtime.engines import Engines
from voice.stats import p50_p95
from voice.think.backend import Message
from voice.transports.simulate import Script, ScriptTurn, simulate

Float32Array = npt.NDArray[np.float32]

BENCH_REPLY_TOKENS = 48
FILLER_AFTER_MS = 700  # the "filler" mode: say "Let me think." if the reply is later
PATIENT_SILENCE_MS = 800  # the "patient" mode's turn.complete_silence_ms
NOISE_S = 4.0  # noise clips are cut to this length
TURNS_PER_CONVERSATION = 3
SHORT_TURN_S = 6  # also reported: turns of at most this much speech (commands, questions)
SHORT_TURNS = f"user_turns_under_{SHORT_TURN_S}s"
SHORT_CUT_INS = f"cut_ins_under_{SHORT_TURN_S}s"
SKIP_AS_TURNS = ("speechcommands_", "ami_", "mix_", "twospk_")


@dataclass
class _Planned:
    name: str
    script: Script


def _turn(clip: Clip, audio: Float32Array, at_s: float | None = None, after: str = "reply_end",
          delay: float = 0.8, expect: str = "turn", seconds: float | None = None
          ) -> ScriptTurn:  # fmt: skip
    if seconds is not None:
        audio = audio[: int(seconds * SAMPLE_RATE)]
    return ScriptTurn(
        audio=audio,
        name=clip.name,
        at_s=at_s,
        after=None if at_s is not None else after,
        delay_s=delay,
        expect=expect,
    )


def plan_conversations(clips: list[Clip], limit: int | None = None) -> dict[str, list[_Planned]]:
    """The scripts: ``turns`` (plain turn-taking) and ``overlap`` (speech and noise
    over replies)."""
    speech = [c for c in clips if c.kind == "speech"]
    turns = [c for c in speech if c.text and not c.name.startswith(SKIP_AS_TURNS)]
    if limit:
        turns = turns[:limit]
    audio = {c.name: c.audio(lead_s=0.0) for c in clips}  # each file read once
    plain: list[_Planned] = []
    for i in range(0, len(turns), TURNS_PER_CONVERSATION):
        group = turns[i : i + TURNS_PER_CONVERSATION]
        script = [_turn(group[0], audio[group[0].name], at_s=0.5)]
        script += [_turn(c, audio[c.name]) for c in group[1:]]
        plain.append(_Planned(f"turns-{i // TURNS_PER_CONVERSATION + 1}", Script(script)))
    overlap: list[_Planned] = []
    # Openers without long inner pauses, so what is measured is the speech or noise
    # over the reply, not the opener's own continuation (cut-ins are counted above).
    smooth = [c for c in turns if longest_pause_s(audio[c.name]) < 0.3 and c.seconds < 6]
    opener = (smooth or turns)[:6]
    barge_words = [c for c in turns if 1.0 < c.seconds < 3.5][:4]
    stops = [c for c in speech if c.name.startswith("speechcommands_stop")]
    backchannels = [c for c in speech if c.name.startswith("speechcommands_yes")]
    noises = [c for c in clips if c.kind == "noise"]
    for n, (interrupter, expect, delay, seconds) in enumerate(
        [(c, "barge_in", 1.0, None) for c in barge_words + stops]
        + [(c, "backchannel", 1.0, None) for c in backchannels]
        + [(c, "noise", 0.8, NOISE_S) for c in noises]
    ):
        first = opener[n % len(opener)]
        script = [
            _turn(first, audio[first.name], at_s=0.5),
            _turn(
                interrupter,
                audio[interrupter.name],
                after="reply_start",
                delay=delay,
                expect=expect,
                seconds=seconds,
            ),
        ]
        overlap.append(_Planned(f"{expect}-{interrupter.name}", Script(script)))
    return {"turns": plain, "overlap": overlap}


def _mode_settings(settings: Settings, mode: str) -> Settings:
    s = copy.deepcopy(settings)
    s.llm.max_reply_tokens = BENCH_REPLY_TOKENS
    if mode == "no_speculation":
        s.conversation.speculate = False
    elif mode == "with_model":
        s.turn.use_model = True
    elif mode == "fixed_endpoint":
        s.turn.use_model = s.turn.use_text = False
    elif mode == "patient":
        s.turn.complete_silence_ms = PATIENT_SILENCE_MS
    elif mode == "filler":
        s.conversation.filler_after_ms = FILLER_AFTER_MS
    return s


def _recognition_under_load(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether recognition keeps its pace while the LLM and the voice work: final
    transcript after the endpoint, and first words of speech over a reply (not of the
    noise scripts, where "words" are Whisper's inventions, seconds into music)."""
    ends: dict[tuple[str, int], float] = {}
    starts: dict[tuple[str, int], float] = {}
    final_after_end, first_partial_over_reply = [], []
    replying: dict[str, bool] = {}
    for e in events:
        key = (e.get("conversation", ""), e.get("utterance_id", -1))
        kind = e["type"]
        if kind == "speech_end":
            ends[key] = e["audio_ms"]
        elif kind == "final" and key in ends:
            final_after_end.append(e["audio_ms"] - ends.pop(key))
        elif kind == "speech_start" and replying.get(key[0]) and not key[0].startswith("noise-"):
            starts[key] = e["start_ms"]
        elif kind == "partial" and key in starts and e["text"].strip():
            first_partial_over_reply.append(e["audio_ms"] - starts.pop(key))
        elif kind in ("reply_start", "reply_end"):
            replying[key[0]] = kind == "reply_start"
    return {
        "final_after_endpoint_ms": p50_p95(final_after_end),
        "first_words_over_a_reply_ms": p50_p95(first_partial_over_reply),
    }


def run_mode(
    planned: list[_Planned], settings: Settings, engines: Engines
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run every script; return all events (tagged) and what was measured against the
    script itself: where each clip's speech really starts and ends (its loud frames),
    not where the session's VAD thought it did."""
    events: list[dict[str, Any]] = []
    counts = new_counts()
    for plan in planned:
        result = simulate(plan.script, build_session(settings, engines), engines)
        for event in result.events:
            event["conversation"] = plan.name
        events.extend(result.events)
        _measure(plan.name.startswith("turns-"), result.turns, result.events, counts)
    return events, counts


def new_counts() -> dict[str, Any]:
    """What :func:`_measure` adds up over a mode's scripts (counts, and per-turn lists
    that the report turns into percentiles)."""
    return {
        "user_turns": 0, "cut_ins": 0, "cut_in_replies": 0, SHORT_TURNS: 0, SHORT_CUT_INS: 0,
        "opener_turns": 0, "opener_cut_ins": 0, "barge_ins": 0, "barge_ins_stopped": 0,
        "false_barge_in_trials": 0, "false_barge_ins": 0, "cut_in_clips": [],
        "noise_trials": 0, "noise_trials_paused": 0, "noise_pauses": 0,
        "v2v": [], "v2v_short": [], "barge_in": [], "endpointed": [],
    }  # fmt: skip


def _measure(
    plain: bool, turns: list[ScriptTurn], events: list[dict[str, Any]], counts: dict[str, Any]
) -> None:
    """One script's turns against its events (see :func:`run_mode`).

    - A cut-in: a reply started while the clip still had speech to come (counted per
      clip, and per reply in ``cut_in_replies``). Headline figures are over the plain
      turn-taking scripts; the overlap scripts' openers are counted apart.
    - Voice-to-voice: the clip's last loud frame to the first reply sample played
      after it, before the next clip; a clip cut in on whose reply played on over its
      end has none (it is a cut-in).
    - Barge-in: the interrupting clip's first loud frame to the reply's audio stopping
      (paused or cleared).
    - Noise over a reply: a kill is a false barge-in; the pauses it caused (each one a
      gap in the reply until it resumes) are counted too."""
    starts = [e["audio_ms"] for e in events if e["type"] == "reply_start"]
    played = [e["audio_ms"] for e in events if e["type"] == "playback_start"]
    ended = [e["audio_ms"] for e in events if e["type"] == "speech_end"]
    stops = [e["audio_ms"] for e in events if e["type"] in ("paused", "interrupted")]
    interrupts = [e["audio_ms"] for e in events if e["type"] == "interrupted"]
    pauses = [e["audio_ms"] for e in events if e["type"] == "paused"]
    live = _live_replies(events)
    placed = sorted((t for t in turns if t.start_sample is not None), key=_begin_ms)
    for k, turn in enumerate(placed):
        begin_ms = _begin_ms(turn)
        if turn.expect == "turn":
            speech_s = speech_end_s(turn.audio)
            end_ms = begin_ms + speech_s * 1000
            early = [t for t in starts if begin_ms < t < end_ms]
            if plain:
                counts["user_turns"] += 1
                counts["cut_ins"] += bool(early)
                counts["cut_in_replies"] += len(early)
                if early:
                    counts["cut_in_clips"].append(turn.name)
                short = speech_s <= SHORT_TURN_S
                counts[SHORT_TURNS] += short
                counts[SHORT_CUT_INS] += short and bool(early)
                until = _begin_ms(placed[k + 1]) if k + 1 < len(placed) else float("inf")
                endpoint = [t - end_ms for t in ended if end_ms <= t < until]
                counts["endpointed"].append(endpoint[0] if endpoint else None)
                after = [t for t in played if end_ms <= t < until]
                talking_over_end = any(lo < end_ms < hi for lo, hi in live)
                if after and not talking_over_end:
                    counts["v2v"].append(after[0] - end_ms)
                    if short:
                        counts["v2v_short"].append(after[0] - end_ms)
            else:
                counts["opener_turns"] += 1
                counts["opener_cut_ins"] += bool(early)
        elif not any(lo <= begin_ms + 100 < hi for lo, hi in live):
            continue  # the reply was over before the clip began: not a trial
        elif turn.expect == "barge_in":
            counts["barge_ins"] += 1
            stopped = any(t >= begin_ms for t in interrupts)
            counts["barge_ins_stopped"] += stopped
            onset_ms = begin_ms + speech_start_s(turn.audio) * 1000
            reaction = [t - onset_ms for t in stops if t >= begin_ms]
            if stopped and reaction:
                counts["barge_in"].append(reaction[0])
        else:
            counts["false_barge_in_trials"] += 1
            counts["false_barge_ins"] += any(t >= begin_ms for t in interrupts)
            if turn.expect == "noise":  # what a pause-first barge-in costs: a gap
                over = begin_ms + len(turn.audio) * 1000 / SAMPLE_RATE
                heard = [t for t in pauses if begin_ms <= t < over]
                counts["noise_trials"] += 1
                counts["noise_trials_paused"] += bool(heard)
                counts["noise_pauses"] += len(heard)


def _begin_ms(turn: ScriptTurn) -> float:
    assert turn.start_sample is not None
    return turn.start_sample * 1000 / SAMPLE_RATE


def _live_replies(events: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(first sample played, end) of every reply: when speech over it is a barge-in."""
    played = {e["reply_id"]: e["audio_ms"] for e in events if e["type"] == "playback_start"}
    return [
        (played[e["reply_id"]], e["audio_ms"])
        for e in events
        if e["type"] == "reply_end" and e["reply_id"] in played
    ]


def _naive(
    turns: list[Float32Array],
    endpoints: list[float | None],
    settings: Settings,
    engines: Engines,
) -> list[float]:
    """Voice-to-voice of the sequential pipeline, per turn: the fixed endpoint (as the
    fixed-endpoint mode's VAD fired it after the clip's real end: the same reference
    as ours) + full-window transcription + whole reply + whole synthesis, each measured."""
    full_window = getattr(engines.asr, "transcribe_full_window", None)
    out = []
    for k, audio in enumerate(turns):
        endpoint = endpoints[k] if k < len(endpoints) else None
        waited = settings.vad.end_silence_ms if endpoint is None else endpoint
        started = time.perf_counter()
        text = str(full_window(audio)) if full_window else ""
        messages = [Message("system", settings.llm.system_prompt), Message("user", text)]
        reply = "".join(engines.llm.stream(messages, max_tokens=BENCH_REPLY_TOKENS))
        for _ in engines.tts.synthesize(reply):
            pass
        out.append(waited + (time.perf_counter() - started) * 1000)
    return out


MODES = ("default", "no_speculation", "with_model", "fixed_endpoint", "patient", "filler")
NAIVE = "naive_sequential"  # whole-window Whisper, then the whole reply, then its speech


def bench_conversation(
    clips: list[Clip],
    settings: Settings,
    limit: int | None = None,
    modes: list[str] | None = None,
) -> dict[str, Any]:
    """Every mode of :data:`MODES` and the naive sequential pipeline, or those named in
    ``modes`` ("default" always among them: the others are reported against it)."""
    unknown = sorted(set(modes or ()) - {*MODES, NAIVE})
    if unknown:
        raise ConfigError(
            f"no conversation bench mode {', '.join(unknown)}.",
            f"Use some of {', '.join((*MODES, NAIVE))}.",
        )
    chosen = [m for m in MODES if m == "default" or not modes or m in modes]
    plans = plan_conversations(clips, limit)
    engines = load_engines(_mode_settings(settings, "default"))
    report: dict[str, Any] = {"reply_tokens_cap": BENCH_REPLY_TOKENS, "modes": {}}
    default_v2v: list[float] = []
    fixed_endpoints: list[float | None] = []
    for mode in chosen:
        mode_settings = _mode_settings(settings, mode)
        planned = plans["turns"] + (plans["overlap"] if mode == "default" else [])
        started = time.perf_counter()
        events, counts = run_mode(planned, mode_settings, engines)
        summary = summarize(events)["summary"]
        turn_v2v = counts.pop("v2v")
        short_v2v = counts.pop("v2v_short")
        barge_in = counts.pop("barge_in")
        endpointed = counts.pop("endpointed")
        if mode == "fixed_endpoint":
            fixed_endpoints = endpointed
        if mode == "default":
            default_v2v = turn_v2v
        entry: dict[str, Any] = {
            "voice_to_voice_ms": p50_p95(turn_v2v),
            f"voice_to_voice_under_{SHORT_TURN_S}s_ms": p50_p95(short_v2v),
            # The session's own figure, from its own end of speech (what /metrics shows).
            "voice_to_voice_vad_ms": p50_p95(_v2v_of_user_turns(events, planned)),
            "speculation_hit_rate": summary["speculation_hit_rate"],
            "cut_in_rate": _rate(counts["cut_ins"], counts["user_turns"]),
            f"cut_in_rate_under_{SHORT_TURN_S}s": _rate(counts[SHORT_CUT_INS], counts[SHORT_TURNS]),
            "end_silence_ms": p50_p95(
                [e["end_silence_ms"] for e in events if e["type"] == "turn_metrics"]
            ),
            "errors": len(summary["errors"]),
            "wall_s": round(time.perf_counter() - started, 1),
            **counts,
        }
        if mode == "default":
            entry["recognition_under_load"] = _recognition_under_load(events)
            entry["barge_in_ms"] = p50_p95(barge_in)
            entry["barge_in_vad_ms"] = summary["barge_in_ms"]
            entry["barge_in_success_rate"] = _rate(counts["barge_ins_stopped"], counts["barge_ins"])
            entry["false_barge_in_rate"] = _rate(
                counts["false_barge_ins"], counts["false_barge_in_trials"]
            )
        report["modes"][mode] = entry
    ours = p50_p95(default_v2v)["p50"]
    if not modes or NAIVE in modes:
        turn_audio = [t.audio for plan in plans["turns"] for t in plan.script.turns]
        naive = _naive(turn_audio, fixed_endpoints, _mode_settings(settings, "naive"), engines)
        report["modes"][NAIVE] = {"voice_to_voice_ms": p50_p95(naive)}
        theirs = p50_p95(naive)["p50"]
        report["naive_over_default_p50"] = round(theirs / ours, 2) if ours and theirs else None
    for mode in chosen[1:]:
        p50 = report["modes"][mode]["voice_to_voice_ms"]["p50"]
        report[f"{mode}_over_default_p50"] = round(p50 / ours, 2) if ours and p50 else None
    return report


def _v2v_of_user_turns(events: list[dict[str, Any]], planned: list[_Planned]) -> list[float]:
    """The session's own voice-to-voice (from the end of speech its endpointer found) of
    the plain turn conversations: every reply, also those that cut in on a pause."""
    plain = {p.name for p in planned if p.name.startswith("turns-")}
    return [
        e["voice_to_voice_ms"]
        for e in events
        if e["type"] == "turn_metrics"
        and e.get("conversation") in plain
        and e["voice_to_voice_ms"] is not None
    ]


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None
