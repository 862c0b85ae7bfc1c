"""One turn's timeline, put together from the events a session sends its client.

The conversation core reports a turn as events in its own audio time (``audio_ms``:
the position in the input stream when each became known) and sums it up in
:class:`~voice.events.TurnMetrics` when the reply is over. Operators want more than
that sum: the figures Prometheus histograms need (the final transcript after the
endpoint, the LLM's first token, the voice's first audio, what speculation gained or
threw away) and, for tracing, where each phase of the turn began and ended. All of it
is known from the events the server already passes on, so it is derived here, in the
serve layer, and the core knows nothing of Prometheus or OpenTelemetry.

Audio time becomes wall-clock time through an offset: the client streams in real
time, so ``wall - audio`` is almost constant; each event gives an upper bound (it was
taken a little after it became known), and the smallest one seen during the turn is
the estimate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from voice.events import (
    Event,
    Final,
    Interrupted,
    Paused,
    ReplyStarted,
    SpeculationCancelled,
    SpeculationStarted,
    SpeechEnd,
    TurnMetrics,
)

REMEMBERED = 64  # per kind: utterances and replies a turn may still refer to

# The child spans of a turn, in the order a turn goes through them.
SPAN_NAMES = (
    "speech",
    "endpoint",
    "recognition",
    "speculation",
    "llm.first_token",
    "tts.first_audio",
    "playback",
    "barge_in",
)


@dataclass(frozen=True)
class Phase:
    """A part of the turn in the session's audio time (ms)."""

    name: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class TurnTimeline:
    """One answered turn: its phases, and the figures the histograms take (ms, None
    where it did not happen)."""

    turn_id: int
    reply_id: int
    start_ms: float  # the user's speech began
    end_ms: float  # the reply is over (played, or cut)
    speculative: bool
    interrupted: bool
    phases: tuple[Phase, ...]
    voice_to_voice_ms: float | None
    barge_in_ms: float | None
    final_after_endpoint_ms: float | None
    llm_first_token_ms: float | None
    tts_first_audio_ms: float | None
    wall_offset_ns: int  # wall-clock ns = wall_offset_ns + audio ms * 1e6

    def wall_ns(self, audio_ms: float) -> int:
        return self.wall_offset_ns + int(audio_ms * 1_000_000)


@dataclass(frozen=True)
class SpeculationEnded:
    """A speculative reply was released (``used``: it had been prepared for ``held_ms``
    when the turn ended, its lead) or thrown away (``cancelled``: ``held_ms`` of work
    for nothing)."""

    outcome: Literal["used", "cancelled"]
    held_ms: float


Observation = TurnTimeline | SpeculationEnded


class _Recent(dict[int, float]):
    """An id -> audio time map that forgets its oldest entries beyond :data:`REMEMBERED`
    (a session that never finishes a turn must not grow it)."""

    def put(self, key: int, value: float) -> None:
        self.pop(key, None)
        self[key] = value
        while len(self) > REMEMBERED:
            del self[next(iter(self))]


@dataclass
class TurnTracker:
    """Feed it every event of one session, in order; it returns what it can tell."""

    clock_ns: Callable[[], int] = time.time_ns
    _speech_end: _Recent = field(default_factory=_Recent)  # utterance -> endpoint decided
    _final_at: _Recent = field(default_factory=_Recent)  # utterance -> final known
    _final_compute: _Recent = field(default_factory=_Recent)  # utterance -> its pass (ms)
    _spec_started: _Recent = field(default_factory=_Recent)  # gen id -> prepared from
    _reply_started: _Recent = field(default_factory=_Recent)  # reply id -> released
    _paused: _Recent = field(default_factory=_Recent)  # reply id -> first paused by speech
    _stopped: _Recent = field(default_factory=_Recent)  # reply id -> interrupted
    _offset_ns: int | None = None

    def observe(self, event: Event) -> Observation | None:
        offset = self.clock_ns() - int(event.audio_ms * 1_000_000)
        if self._offset_ns is None or offset < self._offset_ns:
            self._offset_ns = offset
        if isinstance(event, SpeechEnd):
            self._speech_end.put(event.utterance_id, event.audio_ms)
        elif isinstance(event, Final):
            self._final_at.put(event.utterance_id, event.audio_ms)
            self._final_compute.put(event.utterance_id, event.compute_ms)
        elif isinstance(event, SpeculationStarted):
            self._spec_started.put(event.gen_id, event.audio_ms)
        elif isinstance(event, SpeculationCancelled):
            started = self._spec_started.pop(event.gen_id, None)
            if started is not None:
                return SpeculationEnded("cancelled", max(0.0, event.audio_ms - started))
        elif isinstance(event, ReplyStarted):
            self._reply_started.put(event.reply_id, event.audio_ms)
            started = self._spec_started.get(event.reply_id)
            if event.speculative and started is not None:
                return SpeculationEnded("used", max(0.0, event.audio_ms - started))
        elif isinstance(event, Paused):
            if event.reply_id not in self._paused:
                self._paused.put(event.reply_id, event.audio_ms)
        elif isinstance(event, Interrupted):
            self._stopped.put(event.reply_id, event.audio_ms)
        elif isinstance(event, TurnMetrics):
            timeline = self._timeline(event)
            self._offset_ns = None  # the next turn makes its own estimate
            return timeline
        return None

    def _timeline(self, m: TurnMetrics) -> TurnTimeline:
        uid, rid = m.turn_id, m.reply_id
        phases = [Phase("speech", m.user_start_ms, m.user_end_ms)]
        endpoint_at = self._speech_end.pop(uid, None)
        if endpoint_at is None:
            endpoint_at = m.user_end_ms + m.end_silence_ms
        phases.append(Phase("endpoint", m.user_end_ms, max(m.user_end_ms, endpoint_at)))
        final_at = self._final_at.pop(uid, None)
        compute = self._final_compute.pop(uid, None)
        final_after: float | None = None
        if final_at is not None:
            final_after = max(0.0, final_at - endpoint_at)
            phases.append(Phase("recognition", final_at - (compute or 0.0), final_at))
        released = self._reply_started.pop(rid, m.audio_ms)
        spec_from = self._spec_started.pop(rid, None) if m.speculative else None
        if spec_from is not None:
            phases.append(Phase("speculation", spec_from, max(spec_from, released)))
        gen_from = spec_from if spec_from is not None else released
        first_token_at: float | None = None
        if m.llm_first_token_ms is not None:
            first_token_at = gen_from + m.llm_first_token_ms
            phases.append(Phase("llm.first_token", gen_from, first_token_at))
        tts_ms: float | None = None
        if first_token_at is not None and m.first_audio_ready_ms is not None:
            audio_at = m.user_end_ms + m.first_audio_ready_ms
            tts_ms = max(0.0, audio_at - first_token_at)
            phases.append(Phase("tts.first_audio", first_token_at, first_token_at + tts_ms))
        if m.voice_to_voice_ms is not None:
            played_at = m.user_end_ms + m.voice_to_voice_ms
            phases.append(Phase("playback", played_at, max(played_at, m.audio_ms)))
        paused_at = self._paused.pop(rid, None)
        stopped_at = self._stopped.pop(rid, None)
        if m.barge_in_ms is not None:
            stop = paused_at if paused_at is not None else stopped_at
            stop = m.audio_ms if stop is None else stop
            phases.append(Phase("barge_in", stop - m.barge_in_ms, stop))
        offset = self._offset_ns if self._offset_ns is not None else self.clock_ns()
        start = min(p.start_ms for p in phases)
        return TurnTimeline(
            turn_id=uid,
            reply_id=rid,
            start_ms=start,
            end_ms=max(m.audio_ms, *(p.end_ms for p in phases)),
            speculative=m.speculative,
            interrupted=m.interrupted,
            phases=tuple(phases),
            voice_to_voice_ms=m.voice_to_voice_ms,
            barge_in_ms=m.barge_in_ms,
            final_after_endpoint_ms=final_after,
            llm_first_token_ms=m.llm_first_token_ms,
            tts_first_audio_ms=tts_ms,
            wall_offset_ns=offset,
        )
