"""``voice bench reply``: how fast text becomes speech, and how fast it stops.

Measured in one run on the configured LLM and voice: time to first token
with an empty KV cache (cold) and with the conversation so far cached (warm),
decode speed, time from the first chunk's text to its first audio, Piper's
real-time factor, cancel latency (cancel to the model being free), time
to first audio with sentence chunking against waiting for the whole reply
and synthesising it at once, and how much near-silence opens the first audio
(what the user waits through after it starts to play: ``tts.lead_in_ms``).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from voice.audio.format import sound_onset
from voice.bench.asr import peak_rss_mb
from voice.config import Settings
from voice.reply.history import History
from voice.reply.pipeline import ReplyDone, SpokenAudio, speak_reply
from voice.speak.tts import PiperTts
from voice.stats import p50_p95, percentile
from voice.think.backend import LlmBackend, make_backend, prefill

QUESTIONS = [
    "What is a good name for a cat?",
    "How do I boil an egg?",
    "Tell me something interesting about the moon.",
    "What should I cook for dinner tonight?",
    "Why is the sky blue?",
    "Give me a tip for sleeping better.",
    "What is your favourite season and why?",
    "How far away is the sun?",
    "Suggest a short name for a band.",
    "What is a fun thing to do on a rainy day?",
]


def _first_token_s(llm: LlmBackend, messages: list[Any]) -> tuple[float, int, float]:
    """(time to first token, tokens, decode tokens per second) for one full reply."""
    started = time.perf_counter()
    first, tokens = None, 0
    for _ in llm.stream(messages):
        tokens += 1
        if first is None:
            first = time.perf_counter() - started
    total = time.perf_counter() - started
    first = first if first is not None else total
    rate = (tokens - 1) / (total - first) if tokens > 1 and total > first else 0.0
    return first, tokens, rate


def _cancel_latency_s(llm: LlmBackend, messages: list[Any], after_tokens: int = 8) -> float:
    """Cancel mid-reply from another thread; time until the stream has ended."""
    cancel = threading.Event()
    cancelled_at: list[float] = []
    stream = llm.stream(messages, cancel, max_tokens=400)
    for count, _ in enumerate(stream, 1):
        if count == after_tokens:
            cancel.set()
            cancelled_at.append(time.perf_counter())
    stream.close()  # type: ignore[attr-defined]
    return time.perf_counter() - cancelled_at[0] if cancelled_at else 0.0


def bench_reply(settings: Settings, rounds: int = 8) -> dict[str, Any]:
    llm = make_backend(settings.llm)
    tts = PiperTts(settings.tts)
    tts.warm_up()
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(rounds)]
    history = History.for_backend(llm, settings.llm, settings.tts.speaking_rate)
    reset = getattr(llm, "reset_cache", None)
    prompts = []
    cold: list[float] = []
    warm: list[float] = []
    rates: list[float] = []
    chunk_to_audio: list[float] = []
    ttfa_chunked: list[float] = []
    ttfa_whole: list[float] = []
    cancels: list[float] = []
    lead_ins: list[float] = []
    tts_compute = tts_audio = 0.0
    for number, question in enumerate(questions):
        messages = history.prompt_for(question)
        # The real turn. Warm: the cache holds the conversation so far, reply included,
        # so only the new user turn is pre-filled (the first round starts cold).
        done: ReplyDone | None = None
        lead_in: float | None = None
        chunking = settings.tts.first_chunk_max_chars
        for item in speak_reply(llm, tts, messages, first_chunk_max_chars=chunking):
            if isinstance(item, ReplyDone):
                done = item
            elif isinstance(item, SpokenAudio) and lead_in is None:  # the reply's first
                lead_in = sound_onset(item.audio) * 1000 / tts.output_rate
        assert done is not None
        if lead_in is not None:
            lead_ins.append(lead_in)
        t = done.timings
        if t.first_token_s is not None and number > 0:
            warm.append(t.first_token_s * 1000)
        if t.first_audio_s is not None and t.first_chunk_s is not None:
            chunk_to_audio.append((t.first_audio_s - t.first_chunk_s) * 1000)
            ttfa_chunked.append(t.first_audio_s * 1000)
        history.add_turn(question, done.text)
        prefill(llm, history.so_far())  # idle time: a real user is speaking now
        prompts.append(messages)

    # Then, off the conversation (they disturb its cache): cold start, the unchunked
    # whole-reply way, and cancel latency, on the same prompts.
    for messages in prompts:
        if reset is not None:  # cold: the same prompt with an empty cache
            reset()
        first, _, rate = _first_token_s(llm, messages)
        cold.append(first * 1000)
        rates.append(rate)

        started = time.perf_counter()  # the unchunked way: whole reply, then whole synthesis
        text = "".join(llm.stream(messages))
        synth_started = time.perf_counter()
        audio = tts.synthesize_all(text)
        finished = time.perf_counter()
        ttfa_whole.append((finished - started) * 1000)
        tts_compute += finished - synth_started
        tts_audio += audio.size / tts.output_rate
        cancels.append(_cancel_latency_s(llm, messages) * 1000)
    p50_chunked = percentile(ttfa_chunked, 50) or 0.0
    p50_whole = percentile(ttfa_whole, 50) or 0.0
    return {
        "llm": f"{settings.llm.backend}:{settings.llm.model}",
        "llm_threads": {"decode": settings.llm.threads, "prefill": settings.llm.threads_batch},
        "tts_voice": settings.tts.voice,
        "tts_threads": settings.tts.threads,
        "rounds": rounds,
        "first_token_cold_ms": p50_p95(cold),
        "first_token_warm_ms": p50_p95(warm),
        "decode_tokens_per_s": p50_p95(rates),
        "first_chunk_text_to_first_audio_ms": p50_p95(chunk_to_audio),
        "tts_real_time_factor": round(tts_compute / max(tts_audio, 1e-9), 3),
        "cancel_latency_ms": p50_p95(cancels),
        "first_audio_chunked_ms": p50_p95(ttfa_chunked),
        "first_audio_lead_in_ms": p50_p95(lead_ins),
        "first_audio_whole_reply_ms": p50_p95(ttfa_whole),
        "first_audio_speedup_p50_chunked_vs_whole": round(p50_whole / max(p50_chunked, 1.0), 2),
        "peak_rss_mb": peak_rss_mb(),
    }
