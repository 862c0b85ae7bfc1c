"""Endpointing: turning per-frame speech decisions into utterances.

A pure state machine over booleans (one per 20 ms frame) with no clock of its
own, so it runs identically on files, live audio and scripted test timelines.

- Start: at least ``start_voiced_ms`` of voiced frames inside the last
  ``window_ms``. A lone click is too short to start; the onset reported is the
  first voiced frame of that window, so nothing of the first syllable is lost,
  and the listener adds ``preroll_ms`` of audio before it on top.
- Hysteresis: while speaking, a voiced frame counts as speech only when the
  window also holds ``resume_voiced_ms`` of voiced audio, so one noisy frame in
  a pause does not restart the silence clock, and one unvoiced frame inside a
  word never ends anything.
- End: ``end_silence_ms`` of continuous silence after the last speech. The
  value may be changed between frames (adaptive endpointing).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from voice.audio.format import FRAME_MS
from voice.errors import ConfigError


@dataclass
class EndpointConfig:
    window_ms: int = 200
    start_voiced_ms: int = 120
    resume_voiced_ms: int = 60
    end_silence_ms: int = 600
    preroll_ms: int = 300

    def validate(self) -> None:
        for name in ("window_ms", "start_voiced_ms", "resume_voiced_ms", "end_silence_ms"):
            if getattr(self, name) < FRAME_MS:
                raise ConfigError(f"vad.{name} must be at least {FRAME_MS} ms.")
        if self.start_voiced_ms > self.window_ms or self.resume_voiced_ms > self.window_ms:
            raise ConfigError(
                "vad.start_voiced_ms and vad.resume_voiced_ms must fit in vad.window_ms."
            )
        if self.preroll_ms < 0:
            raise ConfigError("vad.preroll_ms must not be negative.")


@dataclass(frozen=True)
class Started:
    """Speech began at frame ``onset_frame`` (detected at the current frame)."""

    onset_frame: int


@dataclass(frozen=True)
class Ended:
    """Speech ended after frame ``last_speech_frame`` (detected at the current frame)."""

    onset_frame: int
    last_speech_frame: int


EndpointEvent = Started | Ended


class Endpointer:
    """Feed one boolean per frame; get at most one Started or Ended back."""

    def __init__(self, config: EndpointConfig | None = None) -> None:
        self.config = config or EndpointConfig()
        self.config.validate()
        self._window: deque[tuple[int, bool]] = deque()
        self._frame = -1
        self.speaking = False
        self.onset_frame = -1
        self.last_speech_frame = -1

    @property
    def frames_seen(self) -> int:
        return self._frame + 1

    @property
    def silence_ms(self) -> int:
        """Silence since the last speech frame of the current utterance (0 when idle)."""
        if not self.speaking:
            return 0
        return (self._frame - self.last_speech_frame) * FRAME_MS

    def _voiced_in_window(self) -> int:
        return sum(1 for _, voiced in self._window if voiced)

    def _is_speech_evidence(self) -> bool:
        """A voiced frame continues speech right away; after a gap, it takes
        ``resume_voiced_ms`` of voiced frames since the last speech to count."""
        if self.last_speech_frame == self._frame - 1:
            return True
        fresh = sum(1 for i, v in self._window if v and i > self.last_speech_frame)
        return fresh * FRAME_MS >= self.config.resume_voiced_ms

    def push(self, voiced: bool) -> EndpointEvent | None:
        cfg = self.config
        self._frame += 1
        self._window.append((self._frame, voiced))
        while len(self._window) > max(1, cfg.window_ms // FRAME_MS):
            self._window.popleft()
        voiced_ms = self._voiced_in_window() * FRAME_MS

        if not self.speaking:
            if voiced and voiced_ms >= cfg.start_voiced_ms:
                self.speaking = True
                self.onset_frame = next(i for i, v in self._window if v)
                self.last_speech_frame = self._frame
                return Started(self.onset_frame)
            return None

        if voiced and self._is_speech_evidence():
            self.last_speech_frame = self._frame
        elif self.silence_ms >= cfg.end_silence_ms:
            event = Ended(self.onset_frame, self.last_speech_frame)
            self.speaking = False
            self._window.clear()
            return event
        return None

    def force_end(self) -> Ended | None:
        """End the utterance now (end of input): the caller decides, not the silence timer."""
        if not self.speaking:
            return None
        self.speaking = False
        self._window.clear()
        return Ended(self.onset_frame, self.last_speech_frame)
