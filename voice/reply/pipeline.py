"""The reply pipeline: a streaming reply, from LLM tokens to spoken audio, as early as possible.

Two workers overlap: the LLM streams text while the synthesiser speaks the
sentences already complete, so first audio comes after the first *chunk*, not
after the whole reply. One ``cancel`` event stops both within a token or a
synthesis chunk, and anything produced after it is dropped, never yielded.

Thread budget on two cores: the LLM decodes on ``llm.threads`` (1 by default)
while Piper synthesises on ``tts.threads`` (1), so they never fight for a core.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from voice.reply.guard import ReplyGuard, ReplyLimits
from voice.speak.chunking import SentenceChunker
from voice.speak.tts import Synthesizer
from voice.think.backend import LlmBackend, Message

Float32Array = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TextDelta:
    """Text released to be spoken (whole chunks: what the guard dropped never shows)."""

    text: str


@dataclass(frozen=True)
class SpokenAudio:
    """Audio of chunk ``index`` (its text in ``text``), at the synthesiser's output rate."""

    index: int
    text: str
    audio: Float32Array


@dataclass
class ReplyTimings:
    """Seconds from the start of the reply."""

    first_token_s: float | None = None
    first_chunk_s: float | None = None
    first_audio_s: float | None = None
    done_s: float | None = None
    tokens: int = 0


@dataclass(frozen=True)
class ReplyDone:
    text: str  # what was spoken: the history's copy of the reply
    cancelled: bool
    timings: ReplyTimings = field(default_factory=ReplyTimings)
    stop: str | None = None  # why the guard ended it: sentences, length, loop, repeat
    generated: str = ""  # everything the model wrote, said or not (benchmarks)


ReplyItem = TextDelta | SpokenAudio | ReplyDone

_END = object()


def speak_reply(
    llm: LlmBackend,
    tts: Synthesizer,
    messages: list[Message],
    cancel: threading.Event | None = None,
    first_chunk_max_chars: int = 24,
    limits: ReplyLimits | None = None,
) -> Iterator[ReplyItem]:
    """Stream a reply: text as it is released to be spoken, audio per chunk as
    synthesised, then done. ``limits`` (by default the prompt's, when it is a
    History's Prompt) end the reply early: the model stops there too."""
    cancel = cancel or threading.Event()
    chunker = SentenceChunker(first_chunk_max_chars=first_chunk_max_chars)
    if limits is None:
        limits = getattr(messages, "limits", None) or ReplyLimits()
    guard = ReplyGuard(chunker, limits.for_attempt(0))
    generated: list[str] = []
    out: queue.Queue[object] = queue.Queue()
    chunks: queue.Queue[object] = queue.Queue()
    timings = ReplyTimings()
    started = time.perf_counter()
    text_parts: list[str] = []
    errors: list[BaseException] = []
    first_audio_out = threading.Event()

    def elapsed() -> float:
        return time.perf_counter() - started

    def think() -> None:
        nonlocal guard
        request = messages
        for attempt in range(limits.resamples + 1):
            if attempt:  # nothing of the last try could be said: sample it again
                resampled = getattr(messages, "resampled", None)
                if resampled is None or cancel.is_set() or errors:
                    break
                request = resampled(attempt)
                guard = ReplyGuard(chunker, limits.for_attempt(attempt))
            generate(request)
            if "".join(text_parts).strip():
                break
        chunks.put(_END)

    def generate(request: list[Message]) -> None:
        deltas = llm.stream(request, cancel)
        try:
            for delta in deltas:
                if cancel.is_set():
                    break
                if timings.first_token_s is None:
                    timings.first_token_s = elapsed()
                timings.tokens += 1
                generated.append(delta)
                for chunk in guard.push(delta):
                    _queue_chunk(chunk)
                if guard.stopped:
                    break  # said enough (or began to loop): closing frees the model
                if timings.first_chunk_s is not None and not first_audio_out.is_set():
                    # Yield the CPU (and the GIL) to the first chunk's synthesis: first
                    # audio is what the user waits for, and the model decodes ~10x
                    # faster than speech, so it catches up long before that audio ends.
                    while not first_audio_out.wait(0.05) and not cancel.is_set():
                        pass
            if not cancel.is_set():
                for chunk in guard.flush():
                    _queue_chunk(chunk)
        except BaseException as exc:  # surfaced to the caller below
            errors.append(exc)
        finally:
            close = getattr(deltas, "close", None)
            if close is not None:
                close()  # frees the model (or the server) now, not at garbage collection

    def _queue_chunk(chunk: str) -> None:
        text_parts.append(chunk)
        out.put(TextDelta(chunk))
        if chunk.strip():
            if timings.first_chunk_s is None:
                timings.first_chunk_s = elapsed()
            chunks.put(chunk)

    def speak() -> None:
        index = 0
        try:
            while True:
                chunk = chunks.get()
                if chunk is _END or cancel.is_set():
                    break
                assert isinstance(chunk, str)
                for audio in tts.synthesize(chunk, cancel):
                    if cancel.is_set():
                        break
                    if timings.first_audio_s is None:
                        timings.first_audio_s = elapsed()
                    out.put(SpokenAudio(index, chunk, audio))
                    first_audio_out.set()
                first_audio_out.set()  # a chunk with nothing speakable must not stall the LLM
                index += 1
        except BaseException as exc:
            errors.append(exc)
            cancel.set()  # nobody will hear the rest: the LLM stops too
        finally:
            first_audio_out.set()
            out.put(_END)

    workers = [
        threading.Thread(target=think, name="llm", daemon=True),
        threading.Thread(target=speak, name="tts", daemon=True),
    ]
    for worker in workers:
        worker.start()
    finished = False
    try:
        while True:
            item = out.get()
            if item is _END:
                finished = True
                break
            if not cancel.is_set():
                assert isinstance(item, TextDelta | SpokenAudio)
                yield item
    finally:
        cancel_requested = cancel.is_set()
        if not finished:
            cancel.set()  # a consumer that stopped early cancels the workers too
        while not chunks.empty():
            chunks.get_nowait()
        chunks.put(_END)
        for worker in workers:
            worker.join()
    if errors:
        raise errors[0]
    timings.done_s = elapsed()
    yield ReplyDone(
        "".join(text_parts), cancel_requested, timings, guard.reason, "".join(generated)
    )
