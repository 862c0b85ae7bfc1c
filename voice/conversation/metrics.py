"""Per-turn figures and their summary: p50/p95, never averages alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voice.conversation.generation import Generation, Playback
from voice.events import TurnMetrics
from voice.stats import p50_p95


@dataclass
class TurnRecord:
    """What the metrics of a reply's turn need, gathered as it happens."""

    uid: int
    user_start_ms: float
    user_end_ms: float
    asr_final_ms: float | None
    end_silence_ms: float
    speculative: bool

    def event(
        self,
        gen: Generation,
        playback: Playback,
        now_ms: float,
        barge_in_ms: float | None,
        interrupted: bool,
    ) -> TurnMetrics:
        def since_end(ms: float | None) -> float | None:
            return None if ms is None else ms - self.user_end_ms

        first_token = None if gen.first_token_ms is None else gen.first_token_ms - gen.started_ms
        return TurnMetrics(
            audio_ms=now_ms,
            turn_id=self.uid,
            reply_id=gen.gen_id,
            user_text=gen.user_text,
            user_start_ms=self.user_start_ms,
            user_end_ms=self.user_end_ms,
            end_silence_ms=self.end_silence_ms,
            eot_probability=gen.eot_probability,
            speculative=self.speculative,
            asr_final_ms=self.asr_final_ms,
            llm_first_token_ms=first_token,
            first_audio_ready_ms=since_end(gen.first_audio_ready_ms),
            voice_to_voice_ms=since_end(playback.first_played_ms),
            barge_in_ms=barge_in_ms,
            interrupted=interrupted,
        )


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    """``metrics.json``: every turn's ``turn_metrics`` and a summary of them."""
    turns = [e for e in events if e.get("type") == "turn_metrics"]
    v2v = [t["voice_to_voice_ms"] for t in turns if t.get("voice_to_voice_ms") is not None]
    barge = [t["barge_in_ms"] for t in turns if t.get("barge_in_ms") is not None]
    replies = [e for e in events if e.get("type") == "reply_start"]
    spec_started = sum(1 for e in events if e.get("type") == "speculation_start")
    spec_used = sum(1 for e in replies if e.get("speculative"))
    return {
        "turns": turns,
        "summary": {
            "turns": len(turns),
            "voice_to_voice_ms": p50_p95(v2v),
            "barge_in_ms": p50_p95(barge),
            "interrupted": sum(1 for t in turns if t.get("interrupted")),
            "resumed": sum(1 for e in events if e.get("type") == "resumed"),
            "speculations": spec_started,
            "speculations_used": spec_used,
            "speculation_hit_rate": round(spec_used / spec_started, 3) if spec_started else None,
            "errors": [e for e in events if e.get("type") == "error"],
        },
    }
