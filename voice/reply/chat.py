"""A typed conversation: the reply path without the ears (``voice chat``).

Each user line goes through the history (trimmed to the context window), the
streaming reply (LLM -> sentence chunks -> Piper), and comes back as text on
the terminal and one WAV file per turn.

It takes the LLM's and the voice's own sections, not the whole ``Settings``: the
reply pipeline sits below the layer that reads settings (see docs/architecture.md).
With a knowledge file, the caller passes its ``grounding``, and a line is answered
as every other way in answers it (docs/knowledge.md): an entry, the unknown reply or a
question back said as written, the model with the entry's facts, or the model.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

import numpy as np

from voice.audio import write_wav
from voice.errors import VoiceError
from voice.knowledge.policy import Decision, context_prompt, turn_decision
from voice.reply.history import History, Prompt
from voice.reply.pipeline import ReplyDone, SpokenAudio, TextDelta, speak_reply
from voice.speak.tts import PiperTts, TtsConfig
from voice.think.backend import LlmConfig, Message, make_backend, prefill


def run_chat(
    llm_config: LlmConfig,
    tts_config: TtsConfig,
    lines: Iterable[str],
    out_dir: Path,
    out: TextIO = sys.stdout,
    grounding: Callable[[str], Decision] | None = None,
) -> int:
    llm = make_backend(llm_config)
    tts = PiperTts(tts_config)
    tts.warm_up()
    history = History.for_backend(llm, llm_config, tts_config.speaking_rate)
    out_dir.mkdir(parents=True, exist_ok=True)
    turn = 0
    asked: Decision | None = None  # the question back the next line answers
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            messages = history.prompt_for(text)
        except VoiceError as exc:
            print(f"voice: {exc}", file=out, flush=True)
            continue
        turn += 1
        if grounding is not None:
            try:
                decision, asked = turn_decision(grounding, asked, text, history.last_said())
            except Exception as exc:  # retrieval must never silence the assistant
                print(f"voice: knowledge lookup failed ({exc}); the model answers", file=out)
                decision = None
            if decision is not None and decision.spoken_as_written:
                _say_as_written(decision, text, tts, history, out_dir / f"turn_{turn:03d}.wav", out)
                continue
            if decision is not None and decision.kind == "context":
                system, *rest = messages
                facts = Message(system.role, context_prompt(system.content, decision.text))
                messages = Prompt([facts, *rest], messages.seed, messages.limits)
        audio: list[np.ndarray] = []
        print("assistant> ", end="", file=out, flush=True)
        done: ReplyDone | None = None
        chunking = tts_config.first_chunk_max_chars
        try:
            for item in speak_reply(llm, tts, messages, first_chunk_max_chars=chunking):
                if isinstance(item, TextDelta):
                    print(item.text, end="", file=out, flush=True)
                elif isinstance(item, SpokenAudio):
                    audio.append(item.audio)
                elif isinstance(item, ReplyDone):
                    done = item
        except VoiceError as exc:  # the LLM server went away, a voice failed: this turn only
            print(f"\nvoice: {exc}\n  (this line was not answered; type it again)", file=out)
            continue
        assert done is not None
        history.add_turn(text, done.text)
        path = out_dir / f"turn_{turn:03d}.wav"
        write_wav(
            path, np.concatenate(audio) if audio else np.zeros(0, np.float32), tts.output_rate
        )
        t = done.timings
        print(
            f"\n  [first token {_ms(t.first_token_s)}, first audio {_ms(t.first_audio_s)}, "
            f"{t.tokens} tokens, audio: {path}]",
            file=out,
            flush=True,
        )
        prefill(llm, history.so_far())  # while the user types the next line
    return 0


def _say_as_written(
    decision: Decision, text: str, tts: PiperTts, history: History, path: Path, out: TextIO
) -> None:
    """The knowledge's answer (an entry, the unknown reply, a question back): no model."""
    print(f"assistant> {decision.text}", file=out, flush=True)
    write_wav(path, tts.synthesize_all(decision.text), tts.output_rate)
    history.add_turn(text, decision.text)
    print(f"  [{decision.kind}: as written, from the knowledge; audio: {path}]", file=out)


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"
