"""``voice bench hostile``: one user who never stops talking.

Five minutes of corpus speech, joined with gaps too short to end a turn, fed
to a session (real models, honest virtual time). Reported: the most audio the
listener ever held for recognition (it must stay within one pass's 29 s
however long the speech), the process's resident memory before, at most and
after, the final transcript's length and its word error rate against the
joined references, and the compute it took.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import psutil

from voice.app.build import build_session, load_engines
from voice.audio.format import SAMPLE_RATE
from voice.bench.corpus import Clip, loud_frames
from voice.config import Settings
from voice.events import Event, Final, Partial, TurnContinued
from voice.runtime.clocks import VirtualClock
from voice.runtime.faults import make_lane
from voice.stats import wer

GAP_S = 0.15  # between clips: well under any end-of-turn silence


def endless_speech(clips: list[Clip], seconds: float) -> tuple[np.ndarray, str]:
    """Speech clips end to end (their own silences trimmed) up to ``seconds``."""
    pieces: list[np.ndarray] = []
    texts: list[str] = []
    total = 0
    speech = [c for c in clips if c.kind == "speech" and c.text]
    while total < seconds * SAMPLE_RATE:
        for clip in speech:
            audio = clip.audio(lead_s=0.0)
            loud = loud_frames(audio)
            if not len(loud):
                continue
            audio = audio[loud[0] * 320 : (loud[-1] + 1) * 320]
            pieces += [audio, np.zeros(int(GAP_S * SAMPLE_RATE), dtype=np.float32)]
            texts.append(clip.text)
            total += len(audio) + int(GAP_S * SAMPLE_RATE)
            if total >= seconds * SAMPLE_RATE:
                break
    return np.concatenate(pieces), " ".join(texts)


def standing_finals(events: list[Event]) -> list[Final]:
    """The finals that stand: each utterance's last (a turn heard again as one repeats
    its id), less those a later utterance continues (their words are in its final).
    Counting every final counted a turn joined after a pause once for each join."""
    continued = {e.continues for e in events if isinstance(e, TurnContinued)}
    last = {e.utterance_id: e for e in events if isinstance(e, Final)}
    return [final for uid, final in last.items() if uid not in continued]


def settled(events: list[Event]) -> bool:
    """Whether the newest utterance among ``events`` has a final that no later
    utterance continues."""
    uids = [e.utterance_id for e in events if isinstance(e, (Partial, Final, TurnContinued))]
    continued = {e.continues for e in events if isinstance(e, TurnContinued)}
    finals = {e.utterance_id for e in events if isinstance(e, Final)}
    return bool(uids) and max(uids) in finals and max(uids) not in continued


def bench_hostile(clips: list[Clip], settings: Settings, seconds: float = 300.0) -> dict[str, Any]:
    audio, reference = endless_speech(clips, seconds)
    engines = load_engines(settings)
    session = build_session(settings, engines)
    clock = VirtualClock(session, make_lane(engines, session.config.job_timeout_s))
    process = psutil.Process()
    rss = [process.memory_info().rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(1.0):
            rss.append(process.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    started = time.perf_counter()
    most = 0
    events: list[Event] = []
    frames = [audio[i : i + 320] for i in range(0, len(audio), 320)]
    silence = np.zeros(320, dtype=np.float32)
    end_ms = len(audio) * 1000 / SAMPLE_RATE
    settle_ms = settings.turn.continue_window_ms + 2000
    for frame in frames + [silence] * 1000:  # then up to 20 s of silence end the turn
        clock.advance(session.now_ms + 20)
        session.feed(frame)
        most = max(most, session.listener.buffered_samples)
        events += [e for e in session.take() if isinstance(e, Event)]
        if session.now_ms > end_ms + settle_ms and settled(events):
            break
    stop.set()
    finals = standing_finals(events)
    text = " ".join(f.text for f in finals)
    return {
        "speech_s": round(len(audio) / SAMPLE_RATE, 1),
        "utterances": len(finals),
        "max_buffered_s": round(most / SAMPLE_RATE, 1),
        "final_words": len(text.split()),
        "reference_words": len(reference.split()),
        "wer_percent": wer([(reference, text)]),
        "rss_mb_before": round(rss[0] / 2**20),
        "rss_mb_max": round(max(rss) / 2**20),
        "rss_mb_after": round(rss[-1] / 2**20),
        "compute_s": round(clock.compute_ms / 1000.0, 1),
        "wall_s": round(time.perf_counter() - started, 1),
    }
