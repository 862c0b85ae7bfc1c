"""A typed conversation: the reply path without the ears (``voice chat``).

Each user line goes through the history (trimmed to the context window), the
streaming reply (LLM -> sentence chunks -> Piper), and comes back as text on
the terminal and one WAV file per turn.

It takes the LLM's and the voice's own sections, not the whole ``Settings``: the
reply pipeline sits below the layer that reads settings (see docs/architecture.md).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

import numpy as np

from voice.audio import write_wav
from voice.errors import VoiceError
from voice.reply.history import History
from voice.reply.pipeline import ReplyDone, SpokenAudio, TextDelta, speak_reply
from voice.speak.tts import PiperTts, TtsConfig
from voice.think.backend import LlmConfig, make_backend, prefill


def run_chat(
    llm_config: LlmConfig,
    tts_config: TtsConfig,
    lines: Iterable[str],
    out_dir: Path,
    out: TextIO = sys.stdout,
) -> int:
    llm = make_backend(llm_config)
    tts = PiperTts(tts_config)
    tts.warm_up()
    history = History.for_backend(llm, llm_config, tts_config.speaking_rate)
    out_dir.mkdir(parents=True, exist_ok=True)
    turn = 0
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


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"
