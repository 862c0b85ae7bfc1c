"""``voice bench replies``: what the assistant says, not how fast.

The turns of :mod:`voice.bench.replies_turns` (a desk assistant, a museum
kiosk, two game characters) run as multi-turn conversations through the real
reply path (history, LLM, reply guard, sentence chunker, Piper), once per
configuration: today's (no guard, the plain prompt, the whole history), each
measure alone, and all of them together. Per configuration it reports what a
user would hear (the spoken text and audio):

* reply length in words and in seconds of audio (p50/p95);
* loops: replies with a sentence said twice or a repeated 6-word run;
* repeats: replies that repeat an earlier reply as a listener hears it (the same
  sentence, a near-copy, a recurring clause, a copied opening: voice.reply.repeats);
* on topic: checkable questions whose reply holds the answer, and follow-ups
  whose reply uses the earlier turn;
* time to first audio (p50/p95), so nothing here costs latency.

Seeds are fixed (``llm.seed``, else 1), so a run repeats exactly.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from voice.config import Settings
from voice.reply.guard import has_loop, words_of
from voice.reply.history import History
from voice.reply.pipeline import ReplyDone, SpokenAudio, speak_reply
from voice.reply.repeats import find_repeats
from voice.speak.tts import PiperTts
from voice.stats import p50_p95
from voice.think.backend import LlmBackend, LlmConfig, make_backend, prefill

from .replies_turns import DIALOGUES, Dialogue

log = logging.getLogger(__name__)

LOOP_NGRAM = 6  # the bench's own loop test, whatever the guard is set to


def _today(llm: LlmConfig) -> None:
    """Before issue 24: the instruction alone, llama.cpp's default sampling, all history."""
    llm.reply_sentences = llm.reply_max_chars = llm.loop_ngram = llm.repeat_window = 0
    llm.reply_max_audio_s = llm.reply_resamples = 0
    llm.fallback_reply = ""
    llm.history_tokens = 0
    llm.prompt_examples = False
    llm.repeat_penalty, llm.presence_penalty, llm.frequency_penalty = 1.0, 0.0, 0.0
    llm.min_p = 0.05


def _with(**changes: Any) -> Callable[[LlmConfig], None]:
    def apply(llm: LlmConfig) -> None:
        _today(llm)
        for name, value in changes.items():
            setattr(llm, name, value)

    return apply


def _all(llm: LlmConfig) -> None:
    """Everything on: the shipped defaults (each dialogue's persona still applies)."""


CAPS = {"reply_sentences": 2, "reply_max_chars": 120}
LOOPS = {"loop_ngram": 6, "repeat_window": 3}
CONFIGS: dict[str, Callable[[LlmConfig], None]] = {
    "today": _today,
    "sentence+length cap": _with(**CAPS),
    "loop+repeat stop": _with(**LOOPS),
    "repeat_penalty 1.15": _with(repeat_penalty=1.15),
    "presence_penalty 0.6": _with(presence_penalty=0.6),
    "frequency_penalty 0.6": _with(frequency_penalty=0.6),
    "min_p 0.1": _with(min_p=0.1),
    "history 256 tokens": _with(history_tokens=256),
    "example exchanges": _with(prompt_examples=True),
    "all (defaults)": _all,
    "all but the frequency penalty": lambda llm: setattr(llm, "frequency_penalty", 0.0),
}


def _settings_for(
    base: Settings, dialogue: Dialogue, configure: Callable[[LlmConfig], None]
) -> Settings:
    settings = dialogue.persona.apply(base) if dialogue.persona else copy.deepcopy(base)
    sentences, chars = settings.llm.reply_sentences, settings.llm.reply_max_chars
    configure(settings.llm)
    if configure is not _today and settings.llm.reply_sentences:
        # A persona's reply_length sets the caps; a configuration only turns them on.
        settings.llm.reply_sentences, settings.llm.reply_max_chars = sentences, chars
    if settings.llm.seed < 0:
        settings.llm.seed = 1
    return settings


def _use_sampling(llm: LlmBackend, config: LlmConfig) -> None:
    """Sampling is the backend's own setting (one model serves every conversation):
    the benchmark sets it on the one backend it shares between configurations."""
    own = getattr(llm, "config", None)
    if isinstance(own, LlmConfig):
        for name in SAMPLING:
            setattr(own, name, getattr(config, name))


SAMPLING = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repeat_penalty",
    "presence_penalty",
    "frequency_penalty",
)


def run_dialogue(
    llm: LlmBackend, tts: PiperTts, settings: Settings, dialogue: Dialogue, seed: int
) -> list[dict[str, Any]]:
    """One conversation; per turn what was said, heard and how soon."""
    config = dataclasses.replace(settings.llm, seed=seed)
    history = History.for_backend(llm, config, settings.tts.speaking_rate)
    reset = getattr(llm, "reset_cache", None)
    if reset is not None:
        reset()  # every conversation starts alike, whatever ran before
    rows: list[dict[str, Any]] = []
    exchanges: list[tuple[str, str]] = []
    for turn in dialogue.turns:
        messages = history.prompt_for(turn.text)
        samples = 0
        done: ReplyDone | None = None
        for item in speak_reply(
            llm, tts, messages, first_chunk_max_chars=settings.tts.first_chunk_max_chars
        ):
            if isinstance(item, SpokenAudio):
                samples += item.audio.size
            elif isinstance(item, ReplyDone):
                done = item
        assert done is not None
        text = done.text.strip()
        exchanges.append((turn.text, text))
        repeats = [
            h
            for h in find_repeats(exchanges, skip=settings.llm.fallback_reply)
            if h["turn"] == len(exchanges) - 1
        ]
        words = set(words_of(text))
        hit = any(e in words or (" " in e and e in text.lower()) for e in turn.expect)
        rows.append(
            {
                "dialogue": dialogue.name,
                "user": turn.text,
                "kind": turn.kind,
                "reply": text,
                "words": len(text.split()),
                "audio_s": round(samples / tts.output_rate, 2),
                "first_audio_ms": (
                    None
                    if done.timings.first_audio_s is None
                    else round(done.timings.first_audio_s * 1000)
                ),
                "tokens": done.timings.tokens,
                "stop": done.stop,
                # Nothing of the model's reply could be said: the fallback was.
                "fallback": bool(text) and text == settings.llm.fallback_reply.strip(),
                "loop": has_loop(text, LOOP_NGRAM),
                # As a listener hears it (voice.reply.repeats): a sentence, a near-copy,
                # a clause or an opening of one of the five replies before.
                "repeat": bool(repeats),
                "hit": hit if turn.expect else None,
            }
        )
        history.add_turn(turn.text, done.text)
        prefill(llm, history.so_far())  # idle time: a real user is speaking now
    return rows


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def share(kind: str) -> str:
        checked = [r["hit"] for r in rows if r["kind"] == kind]
        return f"{sum(checked)}/{len(checked)}"

    stops: dict[str, int] = {}
    for row in rows:
        stops[str(row["stop"])] = stops.get(str(row["stop"]), 0) + 1
    first_audio = [float(r["first_audio_ms"]) for r in rows if r["first_audio_ms"] is not None]
    return {
        "turns": len(rows),
        "words": p50_p95([float(r["words"]) for r in rows]),
        "audio_s": p50_p95([float(r["audio_s"]) for r in rows]),
        "loops": sum(r["loop"] for r in rows),
        "silent": sum(not r["reply"] for r in rows),
        "fallbacks": sum(r["fallback"] for r in rows),
        "repeats": sum(r["repeat"] for r in rows),
        "on_topic": share("question"),
        "followups_use_earlier_turn": share("followup"),
        "first_audio_ms": p50_p95(first_audio),
        "stops": stops,
    }


def bench_replies(
    settings: Settings, configs: list[str] | None = None, limit: int | None = None
) -> dict[str, Any]:
    """Every configuration (or those named) over the dialogues (the first ``limit``)."""
    names = configs or list(CONFIGS)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        from voice.errors import ConfigError

        raise ConfigError(
            f"unknown configuration(s) {', '.join(unknown)}.", f"Known: {', '.join(CONFIGS)}."
        )
    llm = make_backend(settings.llm)
    tts = PiperTts(settings.tts)
    tts.warm_up()
    dialogues = DIALOGUES[:limit] if limit else DIALOGUES
    seed = settings.llm.seed if settings.llm.seed >= 0 else 1
    report: dict[str, Any] = {
        "llm": f"{settings.llm.backend}:{settings.llm.model}",
        "max_reply_tokens": settings.llm.max_reply_tokens,
        "seed": seed,
        "configs": {},
        "replies": {},
    }
    # Dialogue by dialogue, every configuration in turn: a load that comes and goes on
    # the machine then weighs on each configuration's time to first audio alike.
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for number, dialogue in enumerate(dialogues):
        for name in names:
            local = _settings_for(settings, dialogue, CONFIGS[name])
            _use_sampling(llm, local.llm)
            rows[name] += run_dialogue(llm, tts, local, dialogue, seed + number)
    for name in names:
        report["configs"][name] = _summary(rows[name])
        report["replies"][name] = rows[name]
    return report


def format_table(report: dict[str, Any]) -> str:
    """The configurations as a markdown table (docs/replies.md)."""
    head = (
        "| configuration | words p50/p95 | audio s p50/p95 | loops | repeats | on topic "
        "| follow-ups | first audio ms p50/p95 |"
    )
    lines = [head, "|" + " --- |" * 8]
    for name, s in report["configs"].items():
        lines.append(
            f"| {name} | {_pair(s['words'], 0)} | {_pair(s['audio_s'], 1)} | {s['loops']} "
            f"| {s['repeats']} | {s['on_topic']} | {s['followups_use_earlier_turn']} "
            f"| {_pair(s['first_audio_ms'], 0)} |"
        )
    return "\n".join(lines)


def _pair(stats: dict[str, Any], digits: int) -> str:
    return " / ".join(
        "n/a" if stats[k] is None else f"{stats[k]:.{digits}f}" for k in ("p50", "p95")
    )
