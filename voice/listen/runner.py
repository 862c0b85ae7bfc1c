"""Drive a :class:`Listener` over a recording, in virtual time or at real time.

Virtual time is honest, not instant: when a recognition pass takes 120 ms of
CPU, the clock moves on 120 ms of audio before its result is delivered, just
as a live microphone would have kept talking. So latencies measured on files
are the latencies a user would feel, while the run itself takes only as long
as the compute. ``realtime=True`` instead paces the audio at wall-clock speed
and runs recognition on a worker thread, as a device transport does.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

import numpy as np
import numpy.typing as npt

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE
from voice.events import Event
from voice.listen.agreement import says_committed
from voice.listen.listener import Listener, TranscribeRequest
from voice.listen.pitch import held_sound_s
from voice.listen.whisper import Transcription

Float32Array = npt.NDArray[np.float32]

DRAIN_LIMIT_S = 30.0  # after the input ends, give up waiting for finals after this long


class Recognizer(Protocol):
    def transcribe(
        self,
        audio: Float32Array,
        context: str = "",
        with_timestamps: bool = False,
        final: bool = False,
    ) -> Transcription: ...


def run_pass(engine: Recognizer, request: TranscribeRequest) -> Transcription:
    """One pass; a pass that covers a pause also times its words, where the engine can
    (``times_words``), and measures the voice held where the speech stopped (a few ms
    of numpy): what the end-of-turn judgement reads. A pass over a pause or an end that
    left words out (:func:`left_words_out`) is run again: without the prompt, then, if
    it still falls short, as a partial pass is. All of it counts as the pass's compute.
    A live pass is not: LocalAgreement commits nothing a single pass left out."""
    result = _transcribe(engine, request, request.context, request.final)
    if request.final and not request.live and left_words_out(request, result):
        spent_ms = result.compute_ms
        # The final mode without a prompt is a new reading only where there was a prompt.
        for final in (True, False) if request.context.strip() else (False,):
            again = _transcribe(engine, request, "", final)
            spent_ms += again.compute_ms
            if not left_words_out(request, again):
                result = again
                break
        result = dataclasses.replace(result, compute_ms=spent_ms)
    split = request.split_at_pause()
    if split is None:
        return result
    started = time.perf_counter()
    held_s = held_sound_s(*split)
    spent_ms = (time.perf_counter() - started) * 1000.0
    return dataclasses.replace(result, held_s=held_s, compute_ms=result.compute_ms + spent_ms)


# A pass left out the committed words when it says under half of them, and there were
# at least three: a rewording keeps most ("obvious what you're doing" for a committed
# "It's obvious what"; "Stuffered into you" for "stuff it into you"), and one word or two
# cannot tell.
LEFT_OUT_SHARE = 0.5
LEFT_OUT_MIN_COMMITTED = 3


def left_words_out(request: TranscribeRequest, result: Transcription) -> bool:
    """Whether a pass left out words two passes before it had agreed on: it says under
    half of the buffer's committed words. Whisper at times leaves out a buffer's first
    words where its prompt runs up to them (AMI MEO015: "know" for "know instead of
    having too many buttons and make it complicated for the user, maybe have a", after
    "...on the same lines you"), and its final mode at times writes nothing for speech
    that partial passes heard ("the sick purpose I have a cold."). The committed words
    are the measure, not the most words any pass said: two passes agreed on them, and
    a single pass during speech may run on into the silence after it."""
    committed = list(request.committed)
    return len(committed) >= LEFT_OUT_MIN_COMMITTED and not says_committed(
        committed, result.words, share=LEFT_OUT_SHARE
    )


def _transcribe(
    engine: Recognizer, request: TranscribeRequest, context: str, final: bool
) -> Transcription:
    """One pass over the request's audio with this prompt, in the final mode (its words
    timed, where the engine can) or the partial one."""
    if final and getattr(engine, "times_words", False):
        return engine.transcribe(  # type: ignore[call-arg]
            request.audio,
            context=context,
            with_timestamps=request.with_timestamps,
            final=True,
            word_timing=True,
        )
    return engine.transcribe(
        request.audio, context=context, with_timestamps=request.with_timestamps, final=final
    )


def _input_frames(audio: Float32Array, drain_s: float) -> Iterator[Float32Array]:
    """The recording, then silence: the stream goes on while the last finals are computed."""
    for i in range(0, len(audio), FRAME_SAMPLES):
        frame = audio[i : i + FRAME_SAMPLES]
        if len(frame) < FRAME_SAMPLES:
            frame = np.pad(frame, (0, FRAME_SAMPLES - len(frame)))
        yield frame
    silence = np.zeros(FRAME_SAMPLES, dtype=np.float32)
    for _ in range(int(drain_s * SAMPLE_RATE) // FRAME_SAMPLES):
        yield silence


def listen_virtual(listener: Listener, engine: Recognizer, audio: Float32Array) -> Iterator[Event]:
    """Run as fast as the CPU allows, charging each pass's compute time to the audio clock."""
    end = len(audio)
    in_flight: tuple[TranscribeRequest, Transcription, int] | None = None
    for frame in _input_frames(audio, DRAIN_LIMIT_S):
        if in_flight is not None and listener.sample >= in_flight[2]:
            yield from listener.on_result(in_flight[0], in_flight[1])
            in_flight = None
        if in_flight is None:
            request = listener.next_request()
            if request is not None:
                result = run_pass(engine, request)
                ready = listener.sample + int(result.compute_ms * SAMPLE_RATE / 1000)
                in_flight = (request, result, ready)
        if listener.sample >= end and not listener.busy and in_flight is None:
            return
        yield from listener.feed(frame)
    yield from listener.finish()


def listen_realtime(listener: Listener, engine: Recognizer, audio: Float32Array) -> Iterator[Event]:
    """Feed frames at wall-clock pace; recognition runs on one worker thread meanwhile."""
    end = len(audio)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="asr") as pool:
        in_flight: tuple[TranscribeRequest, Future[Transcription]] | None = None
        for frame in _input_frames(audio, DRAIN_LIMIT_S):
            if in_flight is not None and in_flight[1].done():
                yield from listener.on_result(in_flight[0], in_flight[1].result())
                in_flight = None
            if in_flight is None:
                request = listener.next_request()
                if request is not None:
                    in_flight = (request, pool.submit(run_pass, engine, request))
            if listener.sample >= end and not listener.busy and in_flight is None:
                return
            due = started + (listener.sample + FRAME_SAMPLES) / SAMPLE_RATE
            time.sleep(max(0.0, due - time.monotonic()))
            yield from listener.feed(frame)
        yield from listener.finish()
