"""Benchmarks: ``voice bench NAME``, NAME one of asr, vad, reply, replies, conversation,
turns, pauses, prosody, eot, serve, scale, desk, disconnect, soak, hostile, fuzz, traces, wake,
endings.
Timing lives here (``fuzz`` is the exception: it counts crashes, not milliseconds).

Every latency is reported as p50 and p95 (never a mean alone), measured in
virtual audio time that is charged for real compute (see
:mod:`voice.listen.runner`), over a corpus folder with a ``manifest.jsonl``.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the annotation only: each benchmark imports what it runs when asked
    from voice.config import Settings


def run_bench(args: argparse.Namespace, settings: Settings) -> int:
    from voice.bench.corpus import load_corpus

    report: dict[str, Any]
    if args.what == "shapes":  # synthetic GGUFs in bigger models' shapes (--sets: names)
        from voice.bench.shapes import bench_shapes

        report = bench_shapes(settings, _names(args.sets) or None)
    elif args.what == "mandarin":  # character error rate of the multilingual model (--corpus)
        from voice.bench.mandarin import bench_mandarin

        report = bench_mandarin(settings, args.corpus)
    elif args.what == "languages":  # which language Whisper hears, open or from a list
        from voice.bench.languages import bench_languages

        report = bench_languages(settings, args.corpus)
    elif args.what == "fuzz":  # not a timing: libFuzzer on the protocol decoder (--limit: runs)
        from voice.bench.fuzz import fuzz_protocol

        report = fuzz_protocol(runs=args.limit or 200_000, seconds=120)
    elif args.what == "hostile":
        from voice.bench.hostile import bench_hostile

        report = bench_hostile(load_corpus(args.corpus), settings, seconds=args.minutes * 60)
    elif args.what == "soak":
        from voice.bench.soak import bench_soak

        counts = [int(n) for n in str(args.clients).split(",") if n.strip()]
        report = bench_soak(load_corpus(args.corpus), counts, minutes=args.minutes)
    elif args.what == "disconnect":
        from voice.bench.disconnect import bench_disconnect

        report = bench_disconnect(load_corpus(args.corpus), leavers=args.limit or 10)
    elif args.what == "desk":
        from voice.bench.desk import bench_desk

        report = bench_desk(
            load_corpus(args.corpus), busy=args.busy, starts=args.starts, sessions=args.sessions
        )
    elif args.what == "serve":
        from voice.bench.serve import bench_serve

        counts = [int(n) for n in str(args.clients).split(",") if n.strip()]
        # --url: a running server, or the balancer in front of several (ws:// or wss://).
        report = bench_serve(load_corpus(args.corpus), counts, config=args.config, url=args.url)
    elif args.what == "scale":
        from voice.bench.scale import bench_scale

        report = bench_scale(
            load_corpus(args.corpus),
            workers=[int(n) for n in str(args.workers).split(",") if n.strip()],
            clients=[int(n) for n in str(args.clients).split(",") if n.strip()],
            modes=_names(args.llm),
            config=args.config,
        )
    elif args.what == "turns":
        from voice.bench.turns import bench_turns

        report = bench_turns(
            settings,
            sets=_names(args.sets),
            modes=_names(args.modes),
            limit=args.limit,
            corpus=args.corpus,
        )
    elif args.what == "pauses":
        from voice.bench.pauses import bench_pauses
        from voice.bench.pauses import format_table as pauses_table

        report = bench_pauses(settings, sets=_names(args.sets), corpus=args.corpus)
        if not args.json:
            print(pauses_table(report))
            return 0
    elif args.what == "prosody":
        from voice.bench.prosody import bench_prosody, format_table

        report = bench_prosody(settings, args.onnx, sets=_names(args.sets), limit=args.limit)
        if not args.json:
            print(format_table(report))
            return 0
    elif args.what == "eot":
        from voice.bench.eot import bench_eot
        from voice.bench.eot import format_table as eot_table

        report = bench_eot(settings, sets=_names(args.sets), limit=args.limit, onnx=args.onnx)
        if not args.json:
            print(eot_table(report))
            return 0
    elif args.what == "traces":
        from voice.bench.traces import bench_traces

        # --clients: the first count (default 1); --limit: rounds of one run each way (2)
        first = str(args.clients).split(",")[0].strip()
        report = bench_traces(load_corpus(args.corpus), int(first or 1), rounds=args.limit or 2)
    elif args.what == "wake":
        from voice.bench.wake import bench_wake, format_table

        modes = _names(args.modes) or ["micro"]
        if "negatives" in modes:  # false wakes per hour at each cutoff, on hours of audio
            from voice.bench.wake_negatives import bench_negatives, negatives_table

            report = bench_negatives(settings, args.corpus)
            if not args.json:
                print(negatives_table(report))
        else:
            engine = modes[0]  # --modes open: openWakeWord
            report = bench_wake(settings, corpus=args.corpus, limit=args.limit, engine=engine)
            if not args.json:
                print(format_table(report))
    elif args.what == "endings":  # short turns ending in a short word ("What time is it?")
        from voice.bench.endings import bench_endings
        from voice.bench.endings import format_table as endings_table

        report = bench_endings(settings, limit=args.limit)
        if not args.json:
            print(endings_table(report))
            return 0
    elif args.what == "tools":  # tool calls chosen on NPC and kiosk utterances
        from voice.bench.tools import bench_tools
        from voice.bench.tools import format_table as tools_table

        report = bench_tools(settings, spoken=args.limit or 0)
        if not args.json:
            print(tools_table(report))
            return 0
    elif args.what == "knowledge":
        from voice.bench.knowledge import bench_knowledge
        from voice.bench.knowledge import format_table as knowledge_table

        report = bench_knowledge(
            settings,
            args.knowledge,
            args.questions,
            policies=_names(args.policies),
            spoken=args.limit or 0,
        )
        if not args.json:
            print(knowledge_table(report))
            return 0
    elif args.what == "conversation":
        from voice.bench.conversation import bench_conversation

        report = bench_conversation(
            load_corpus(args.corpus), settings, limit=args.limit, modes=_names(args.modes)
        )
    elif args.what == "replies" and args.runs:
        from voice.bench.replies_spoken import bench_replies_spoken, format_runs

        report = bench_replies_spoken(settings, runs=args.runs, limit=args.limit)
        if not args.json:
            print(format_runs(report))
            return 0
    elif args.what == "replies":
        from voice.bench.replies import bench_replies, format_table

        configs = [c.strip() for c in args.configs.split(",")] if args.configs else None
        report = bench_replies(settings, configs, limit=args.limit)
        if not args.json:
            print(format_table(report))
            return 0
    elif args.what == "reply":
        from voice.bench.reply import bench_reply

        report = bench_reply(settings, rounds=args.limit or 8)
    elif args.what == "asr":
        from voice.bench.asr import bench_asr

        report = bench_asr(load_corpus(args.corpus, limit=args.limit), settings)
    else:
        from voice.bench.vad import bench_vad

        report = bench_vad(load_corpus(args.corpus, limit=args.limit), settings)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0


def _names(text: str | None) -> list[str] | None:
    """A comma-separated flag as a list (None when not given: the bench's default)."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    return names or None


def format_report(report: dict[str, Any], indent: str = "") -> str:
    lines = []
    for key, value in report.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines.append(format_report(value, indent + "  "))
        elif isinstance(value, list):
            lines.append(f"{indent}{key}: {len(value)} rows (see --json)")
        else:
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines)
