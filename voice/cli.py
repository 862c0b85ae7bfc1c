"""The ``voice`` command line.

Every failure a user can fix is a :class:`~voice.errors.VoiceError`; it is
printed as one line saying what to do, with exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from voice.errors import ConfigError, VoiceError


def _settings_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="TOML settings file (default: $VOICE_CONFIG)")
    parser.add_argument("--persona", help="persona TOML: name, prompt, voice, greeting, ...")
    parser.add_argument("--asr-model", help="faster-whisper model: 'default', a size, or a dir")
    parser.add_argument("--asr-threads", type=int, help="CPU threads for recognition")
    parser.add_argument(
        "--language", help="ISO 639-1 language of the conversation (en, zh, fr, ...)"
    )
    parser.add_argument(
        "--asr-languages",
        help="languages a turn may be in, e.g. en,de,zh: Whisper picks among them per pass",
    )
    parser.add_argument("--vad-aggressiveness", type=int, choices=[0, 1, 2, 3])
    parser.add_argument("--end-silence-ms", type=int, help="silence that ends an utterance")
    parser.add_argument(
        "--silero",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Silero as a second VAD opinion (default: on)",
    )
    parser.add_argument(
        "--wake-word",
        help="answer only after a wake word: hey_jarvis, okay_nabu, hey_mycroft, alexa, or "
        "a microWakeWord model's .json (default: off, always listening)",
    )
    parser.add_argument(
        "--follow-up-s", type=float, help="after a reply, speech without the wake word (8)"
    )
    parser.add_argument("--earcon", help="sound on waking: tone, none, or a WAV file")


def _settings(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from voice.config import load_settings

    settings = load_settings(args.config)
    for (section, name), flag in _FLAGS.items():
        value = getattr(args, flag, None)  # a subcommand may not have every flag
        if value is not None:
            settings.set(section, name, value)
    if getattr(args, "persona", None):
        from voice.assistant.persona import load_persona

        settings = load_persona(args.persona).apply(settings)
        if getattr(args, "knowledge", None):  # the flag beats the persona's file
            settings.knowledge.path = args.knowledge
    if settings.knowledge.path:  # a broken file fails now, not after the models load
        from voice.knowledge.parse import read_knowledge

        read_knowledge(settings.knowledge.path)
    from voice.config import prepared

    return prepared(settings)


def _knowledge_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--knowledge",
        help="Markdown file (or folder) of what the assistant knows: '## ' entries said "
        "as written (docs/knowledge.md)",
    )


# Command-line flags (argparse dest) that override settings (section, field).
_FLAGS = {
    ("asr", "model"): "asr_model",
    ("asr", "threads"): "asr_threads",
    ("vad", "aggressiveness"): "vad_aggressiveness",
    ("vad", "end_silence_ms"): "end_silence_ms",
    ("vad", "silero"): "silero",
    ("llm", "backend"): "backend",
    ("llm", "url"): "url",
    ("llm", "model"): "llm_model",
    ("tts", "voice"): "tts_voice",
    ("tts", "speaking_rate"): "tts_rate",
    ("tts", "threads"): "tts_threads",
    ("conversation", "language"): "language",
    ("asr", "languages"): "asr_languages",
    ("wake", "wake_word"): "wake_word",
    ("wake", "follow_up_s"): "follow_up_s",
    ("wake", "earcon"): "earcon",
    ("knowledge", "path"): "knowledge",
}


def _llm_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["embedded", "http"], help="LLM backend")
    parser.add_argument(
        "--url",
        help="OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (voice bench serve: "
        "the WebSocket URL of a running server or balancer, e.g. wss://HOST/ws)",
    )
    parser.add_argument("--llm-model", help="GGUF path (embedded) or model name (http)")
    parser.add_argument("--voice", dest="tts_voice", help="Piper voice .onnx (with .onnx.json)")


def cmd_chat(args: argparse.Namespace) -> int:
    from voice.app.build import load_grounding
    from voice.reply.chat import run_chat

    settings = _settings(args)
    grounding = load_grounding(settings.knowledge)  # a persona's or --knowledge's file
    if sys.stdin.isatty():
        print("Type a message and press Enter; Ctrl-D ends.", file=sys.stderr)
    return run_chat(settings.llm, settings.tts, sys.stdin, Path(args.out_dir), grounding=grounding)


def sample_path() -> Path:
    return Path(str(resources.files("voice") / "data" / "jfk_inaugural_1961.wav"))


def demo_script_path() -> Path:
    return Path(str(resources.files("voice") / "data" / "demo" / "script.json"))


def _format_event(event: dict[str, object]) -> str:
    stamp = f"[{float(event['audio_ms']) / 1000:7.2f}s]"  # type: ignore[arg-type]
    kind = event["type"]
    if kind == "partial":
        committed, unstable = event["committed"], event["unstable"]
        dim, reset = ("\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "")
        return f"{stamp} partial  {committed} {dim}{unstable}{reset}".rstrip()
    if kind == "final":
        return f"{stamp} final    {event['text']}  ({float(event['compute_ms']):.0f} ms)"  # type: ignore[arg-type]
    if kind == "speech_start":
        return f"{stamp} speech   started at {float(event['start_ms']) / 1000:.2f}s"  # type: ignore[arg-type]
    if kind == "speech_end":
        return f"{stamp} speech   ended at {float(event['end_ms']) / 1000:.2f}s"  # type: ignore[arg-type]
    return f"{stamp} {kind} {event}"


def cmd_transcribe(args: argparse.Namespace) -> int:
    from voice.app.build import build_listener, load_recognizer
    from voice.audio import read_wav
    from voice.listen.runner import listen_realtime, listen_virtual

    settings = _settings(args)
    path = Path(args.file) if args.file else sample_path()
    audio = read_wav(path)
    engine = load_recognizer(settings)
    run = listen_realtime if args.realtime else listen_virtual
    for event in run(build_listener(settings), engine, audio):
        data = event.to_dict()
        print(json.dumps(data) if args.json else _format_event(data), flush=True)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from voice.bench import run_bench

    return run_bench(args, _settings(args))


def cmd_say(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from voice.audio import write_wav
    from voice.audio.resample import Float32Array
    from voice.speak.speakable import to_speakable
    from voice.speak.tts import PiperTts

    if not to_speakable(args.text).strip():
        raise VoiceError(
            "nothing to say: the text is empty.",
            'Try `voice say "Hello there."`.',
            code="empty_text",
        )
    settings = _settings(args)
    settings.tts.output_rate = 0  # the file keeps the voice's native rate
    started = time.perf_counter()
    tts = PiperTts(settings.tts)
    loaded = time.perf_counter()
    chunks: list[Float32Array] = []
    first = 0.0
    for chunk in tts.synthesize(args.text):
        if not chunks:
            first = time.perf_counter() - loaded
        chunks.append(chunk)
    compute = time.perf_counter() - loaded
    audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    duration = audio.size / tts.output_rate
    write_wav(args.output, audio, tts.output_rate)
    rtf = compute / duration if duration else float("nan")
    print(
        f"{args.output}  {duration:.2f} s of audio at {tts.output_rate} Hz  "
        f"first audio {first * 1000:.0f} ms  RTF {rtf:.3f}  "
        f"(voice loaded in {loaded - started:.2f} s)"
    )
    return 0


SIMULATE_SEED = 1  # `voice simulate`'s sampling seed where none is configured


def cmd_simulate(args: argparse.Namespace) -> int:
    from voice.app.build import build_session, load_engines
    from voice.transports.simulate import Script, simulate, write_outputs

    settings = _settings(args)
    if args.seed is not None:
        settings.llm.seed = args.seed
    elif settings.llm.seed < 0:
        # A fresh seed per conversation suits live sessions; a simulation is there to be
        # run again with one thing changed, so it samples alike unless told otherwise.
        settings.llm.seed = SIMULATE_SEED
    if args.repeatable:
        if args.realtime:
            raise ConfigError("--repeatable runs on the virtual clock, not with --realtime.")
        settings.tts.variation = False
    script = Script.load(args.script or demo_script_path())
    engines = load_engines(settings)
    session = build_session(settings, engines)
    result = simulate(script, session, engines, realtime=args.realtime, repeatable=args.repeatable)
    metrics = write_outputs(result, args.out_dir, title=Path(args.script or "demo").name)
    summary = metrics["summary"]
    if args.json:
        print(json.dumps(summary))
        return 0
    for event in result.events:
        line = _format_conversation_event(event)
        if line:
            print(line)
    v2v, barge = summary["voice_to_voice_ms"], summary["barge_in_ms"]
    print(
        f"{summary['turns']} turns; voice-to-voice p50 {v2v['p50']} ms p95 {v2v['p95']} ms; "
        f"barge-in p50 {barge['p50']} ms p95 {barge['p95']} ms; "
        f"{summary['audio_s']} s of conversation in {summary['wall_s']} s; "
        f"wrote {args.out_dir}/{{conversation.wav,events.jsonl,metrics.json,timeline.png}}"
    )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from voice.app.serve import run_server
    from voice.serve.access import Access
    from voice.serve.limits import Limits
    from voice.serve.server import ServeConfig
    from voice.serve.tracing import TraceConfig

    config = ServeConfig(
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        access=Access.from_options(args.token, args.allow_origin),
        limits=Limits(max_session_s=args.max_session_s, idle_timeout_s=args.idle_timeout_s),
        certfile=args.certfile or "",
        keyfile=args.keyfile or "",
        transcripts=Path(args.transcripts) if args.transcripts else None,
        record_audio=args.record_audio,
        drain_s=_drain_s(args.drain_s),
        store=args.store or os.environ.get("VOICE_SERVE_STORE", "") or "memory",
        store_ttl_s=args.store_ttl_s,
        traces=TraceConfig(on=args.traces, conversation_id=args.trace_conversation_id),
    )
    if args.record_audio and not args.transcripts:
        raise VoiceError("--record-audio needs --transcripts DIR (where the audio goes).")
    if args.web_dir:
        config.web_dir = Path(args.web_dir)
    return run_server(_settings(args), config)


def _drain_s(flag: float | None) -> float:
    """--drain-s, else $VOICE_SERVE_DRAIN_S, else the default (a reply's length and more)."""
    from voice.serve.lifecycle import DRAIN_S

    raw = os.environ.get("VOICE_SERVE_DRAIN_S", "") if flag is None else str(flag)
    try:
        value = float(raw) if raw.strip() else DRAIN_S
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise VoiceError(
            f"the drain deadline must be a number of seconds (0 or more), not {raw!r}.",
            "Pass e.g. --drain-s 20 (or set VOICE_SERVE_DRAIN_S).",
            code="config",
        )
    return value


def cmd_devices(args: argparse.Namespace) -> int:
    from voice.transports.desk import list_devices

    devices = list_devices()
    if not devices:
        print("No audio devices found. Plug one in, or start PulseAudio/PipeWire.")
        return 1
    for d in devices:
        marks = " ".join(
            m
            for m, on in (
                ("[default in]", d["default_input"]),
                ("[default out]", d["default_output"]),
            )
            if on
        )
        print(f"{d['index']:>3}  {d['name']}  in {d['inputs']} / out {d['outputs']}  "
              f"{d['rate']} Hz {marks}".rstrip())  # fmt: skip
    return 0


def cmd_listen(args: argparse.Namespace) -> int:
    from voice.assistant.desk import run_listen
    from voice.transports.terminal import TerminalView

    settings = _settings(args)
    if args.input is not None:
        settings.desk.input = args.input
    if args.output is not None:
        settings.desk.output = args.output
    if args.echo is not None:
        settings.desk.echo = args.echo
    print("Loading the models...", file=sys.stderr, flush=True)
    return run_listen(settings, JsonLines() if args.json else TerminalView())


class JsonLines:
    """Every event as one JSON line (for scripts and tests)."""

    def show(self, event: Any) -> None:
        print(json.dumps(event.to_dict()), flush=True)

    def played(self, reply_id: int, samples: int) -> None:
        pass  # the events say it (playback_start, reply_end's heard_text)

    def close(self) -> None:
        pass


def _format_conversation_event(event: dict[str, object]) -> str:
    """The lines a person wants to follow a conversation; partials and deltas are left out."""
    stamp = f"[{float(event['audio_ms']) / 1000:7.2f}s]"  # type: ignore[arg-type]
    kind = event["type"]
    if kind == "final":
        return f"{stamp} user      {event['text']}"
    if kind == "reply_end":
        cut = " [interrupted]" if event["interrupted"] else ""
        return f"{stamp} assistant {event['heard_text'] or '(nothing heard)'}{cut}"
    if kind == "turn_metrics":
        v2v, barge = event["voice_to_voice_ms"], event["barge_in_ms"]
        return f"{stamp} metrics   voice-to-voice {v2v} ms, barge-in {barge} ms"
    if kind == "turn_continued":
        return f"{stamp} continued the user went on: the turn is heard again as a whole"
    if kind == "turn_restored":
        return f"{stamp} restored  it was a stop: the turn stays as heard ({event['stop_text']})"
    if kind in ("paused", "resumed", "speculation_cancel", "error"):
        return f"{stamp} {kind:<9} {event.get('reason') or event.get('message') or ''}".rstrip()
    if kind in ("wake", "idle"):
        return f"{stamp} {kind:<9} {event['reason']}"
    return ""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voice", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("transcribe", help="stream a WAV file through VAD and incremental ASR")
    p.add_argument("file", nargs="?", help="WAV file, any rate, mono or stereo (default: sample)")
    p.add_argument("--realtime", action="store_true", help="pace the input at real time")
    p.add_argument("--json", action="store_true", help="one JSON event per line")
    _settings_args(p)
    p.set_defaults(func=cmd_transcribe)

    p = sub.add_parser("bench", help="measure latency and accuracy (not a test)")
    p.add_argument(
        "what",
        choices=[
            "asr",
            "vad",
            "reply",
            "replies",
            "conversation",
            "turns",
            "pauses",
            "prosody",
            "eot",
            "serve",
            "scale",
            "desk",
            "disconnect",
            "soak",
            "hostile",
            "fuzz",
            "traces",
            "mandarin",
            "languages",
            "shapes",
            "wake",
            "knowledge",
            "tools",
            "endings",
        ],
        help="which benchmark",
    )
    p.add_argument(
        "--clients",
        default="1,2,3,4",
        help="serve, soak, scale: concurrent clients, e.g. 1,2,4 (one run each)",
    )
    p.add_argument(
        "--workers",
        default="1,2,3",
        help="scale: voice serve workers behind nginx, e.g. 1,2,3 (one set-up each)",
    )
    p.add_argument(
        "--llm",
        help="scale: embedded (each worker its own model), shared (one llama.cpp server "
        "for all), or both: embedded,shared (default: embedded)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        default=3.0,
        help="soak: how long each N runs; hostile: minutes of speech (default 3)",
    )
    p.add_argument(
        "--busy",
        type=int,
        default=0,
        help="desk: N processes keep a core busy each during the device trials",
    )
    p.add_argument(
        "--starts",
        type=int,
        help="desk: fresh voice listen starts for the echo trials, a reply each "
        "(default: one per opener)",
    )
    p.add_argument(
        "--sessions",
        type=int,
        default=0,
        help="desk: only one-minute drift sessions, N with the clock-drift correction on "
        "and N off (with --busy 2 the rig's echo path drifts)",
    )
    p.add_argument(
        "--sets",
        help="turns, pauses, eot, prosody: comma-separated sets of hesitation, pairs, conversation "
        "(default: those three), hesitation_heldout, hesitation_early (pauses where the rules "
        "were not tuned), hesitation_noisy, pairs_noisy (under a steady background)",
    )
    p.add_argument(
        "--modes",
        help="turns: comma-separated modes, e.g. default,patient,model,fixed (default: default); "
        "conversation: which of its modes to run, e.g. default,no_speculation,filler (default: "
        "all); wake: micro (microWakeWord, default) or open (openWakeWord, for comparison)",
    )
    p.add_argument(
        "--configs",
        help="replies: configurations to run, comma-separated (default: all; see "
        "voice/bench/replies.py)",
    )
    p.add_argument(
        "--runs",
        type=int,
        help="replies: say the dialogues aloud through whole conversations N times, each "
        "with other pauses and recognition timing; reports the worst run beside the median",
    )
    p.add_argument(
        "--onnx",
        help="prosody, eot: an end-of-turn ONNX model (smart-turn-v3.2-cpu.onnx from the "
        "pipecat-ai wheel)",
    )
    p.add_argument("--corpus", help="folder with manifest.jsonl (default: the copy in tests)")
    p.add_argument(
        "--limit",
        type=int,
        help="use only the first N clips (turns: N per set; knowledge: N questions spoken; "
        "tools: N utterances per tool set spoken, and a barge-in pass)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--questions",
        help="knowledge: JSON-lines questions (default: the knowledge file's "
        ".questions.jsonl beside it)",
    )
    p.add_argument(
        "--policies", help="knowledge: comma-separated of prompt,generate,auto,verbatim (all)"
    )
    _settings_args(p)
    _llm_args(p)
    _knowledge_arg(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("simulate", help="play a scripted conversation into a session")
    p.add_argument(
        "script",
        nargs="?",
        help="JSON script: turns of WAV clips placed in time; or one WAV file, said as one "
        "turn (default: demo)",
    )
    p.add_argument("-o", "--out-dir", default="simulation", help="where the outputs go")
    p.add_argument("--realtime", action="store_true", help="run at wall-clock pace")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--repeatable",
        action="store_true",
        help="the same words every run: jobs charged a modelled cost instead of their "
        "compute time, the voice rendered without Piper's random variation (latencies "
        "are then modelled, not measured)",
    )
    p.add_argument(
        "--seed",
        type=int,
        help=f"the replies' sampling seed (default: llm.seed if set, else {SIMULATE_SEED}: "
        "the same script gives the same replies)",
    )
    _settings_args(p)
    _llm_args(p)
    _knowledge_arg(p)
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("listen", help="talk at your desk: default microphone and speakers")
    p.add_argument("--input", help="microphone: index or part of a name (see `voice devices`)")
    p.add_argument("--output", help="speakers: index or part of a name")
    p.add_argument(
        "--echo", choices=["cancel", "headset", "half-duplex"], help="how to handle its own voice"
    )
    p.add_argument("--json", action="store_true", help="every event as a JSON line")
    _settings_args(p)
    _llm_args(p)
    _knowledge_arg(p)
    p.set_defaults(func=cmd_listen)

    p = sub.add_parser("devices", help="list audio devices for `voice listen`")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("serve", help="talk in a browser: web client and WebSocket on one port")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    p.add_argument("--max-sessions", type=int, default=4, help="refuse connections beyond this")
    p.add_argument("--web-dir", help="serve the client from here (default: the repo's web/)")
    p.add_argument(
        "--token", help="clients must present this (default: $VOICE_SERVE_TOKEN; none if unset)"
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        metavar="ORIGIN",
        help="also accept browser pages from ORIGIN, e.g. https://kiosk.example (repeatable)",
    )
    p.add_argument("--certfile", help="TLS certificate (PEM): serve https and wss")
    p.add_argument("--keyfile", help="the certificate's private key (PEM)")
    p.add_argument(
        "--max-session-s", type=float, default=3600, help="close sessions this old (default 3600)"
    )
    p.add_argument(
        "--idle-timeout-s",
        type=float,
        default=60,
        help="close connections silent this long (default 60)",
    )
    p.add_argument(
        "--drain-s",
        type=float,
        help="on SIGTERM, let open conversations finish their reply for up to this long "
        "(default: $VOICE_SERVE_DRAIN_S, else 20)",
    )
    p.add_argument(
        "--store",
        metavar="URL",
        help="where conversations are kept so a client can go on after a reconnect: memory "
        "(default), or redis://HOST:PORT/DB shared by several workers (or $VOICE_SERVE_STORE)",
    )
    p.add_argument(
        "--store-ttl-s",
        type=float,
        default=3600,
        help="forget a conversation this long after its last reply (default 3600)",
    )
    p.add_argument("--transcripts", metavar="DIR", help="write a JSONL transcript per session")
    p.add_argument(
        "--record-audio", action="store_true", help="also store each session's microphone audio"
    )
    p.add_argument(
        "--traces",
        action="store_true",
        help="send a trace per turn over OTLP/HTTP (also on when OTEL_EXPORTER_OTLP_ENDPOINT "
        "is set; endpoint and service name from the standard OTEL_* variables)",
    )
    p.add_argument(
        "--trace-conversation-id",
        action="store_true",
        help="put the conversation id on each turn's trace (off: traces stay unlinked to "
        "people; or $VOICE_TRACE_CONVERSATION_ID=1)",
    )
    _settings_args(p)
    _llm_args(p)
    _knowledge_arg(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("chat", help="typed conversation: replies stream as text and speech")
    p.add_argument("--out-dir", default="chat", help="one WAV per reply goes here")
    _llm_args(p)
    _settings_args(p)
    _knowledge_arg(p)
    p.set_defaults(func=cmd_chat)

    p = sub.add_parser("say", help="speak text into a WAV file with Piper")
    p.add_argument("text", help="what to say (markdown, URLs and emoji are made speakable)")
    p.add_argument("-o", "--output", default="say.wav", help="WAV file (default: say.wav)")
    p.add_argument(
        "--voice", dest="tts_voice", help="Piper .onnx voice, or 'default' (the bundled voice)"
    )
    p.add_argument(
        "--rate", dest="tts_rate", type=float, help="speaking rate: 1.0 the voice's pace"
    )
    p.add_argument("--threads", dest="tts_threads", type=int, help="synthesis CPU threads")
    p.add_argument("--config", help="TOML settings file (default: $VOICE_CONFIG)")
    p.set_defaults(func=cmd_say)

    p = sub.add_parser("models", help="the model catalogue: list, pull, rm, verify")
    msub = p.add_subparsers(dest="models_command", required=True)
    m = msub.add_parser("list", help="catalogue models, what they need, which are pulled")
    m.add_argument("--role", choices=["llm", "asr", "tts"], help="only this role")
    m.add_argument("--language", help="only models for this language (ISO 639-1)")
    m = msub.add_parser("pull", help="fetch models from the hub ($HF_ENDPOINT, $HF_TOKEN)")
    m.add_argument("names", nargs="+", help="catalogue names (voice models list)")
    m.add_argument("--no-progress", action="store_true", help="no progress bars")
    m = msub.add_parser("rm", help="delete pulled models")
    m.add_argument("names", nargs="+")
    m = msub.add_parser("verify", help="re-check pulled models' sha256 (offline)")
    m.add_argument("names", nargs="*", help="default: every pulled model")
    p.set_defaults(func=cmd_models)
    return parser


def cmd_models(args: argparse.Namespace) -> int:
    from voice.catalog import commands

    if args.models_command == "list":
        return commands.cmd_list(args.role, args.language)
    if args.models_command == "pull":
        return commands.cmd_pull(args.names, progress=not args.no_progress)
    if args.models_command == "rm":
        return commands.cmd_rm(args.names)
    return commands.cmd_verify(args.names)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if hasattr(signal, "SIGUSR1"):
        # `kill -USR1 <pid>` prints where every thread is, to stderr: what to send with
        # a report of a process that hangs (a native library stuck in a call).
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    code = _run(args)
    if _audio_left_open():
        # An audio device that would not close (its sound server went away) would hang
        # PortAudio's clean-up at interpreter exit: everything is said and saved, so
        # the process ends here instead, once the logs and output are written out.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _run(args: argparse.Namespace) -> int:
    """The command, and its exit status; a :class:`VoiceError` is its message."""
    try:
        return int(args.func(args))
    except VoiceError as exc:
        print(f"voice: error [{exc.code}]: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _audio_left_open() -> bool:
    """Whether a desk session left a device stream open (only if one ran: the check
    does not import the audio stack)."""
    desk = sys.modules.get("voice.transports.desk")
    return desk is not None and bool(desk.streams_left_open())


if __name__ == "__main__":
    sys.exit(main())
