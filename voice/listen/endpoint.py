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
- Where speech ends: the VAD's last voiced frame trails the last audible sound
  by ~110 ms (webrtcvad's hangover, Silero's decay), and every millisecond of
  that is added to the user's wait. Given each frame's level, the silence clock
  starts at the last voiced frame that is also audible: within
  ``AUDIBLE_BELOW_PEAK_DB`` of the utterance's loudest frame and
  ``AUDIBLE_OVER_FLOOR_DB`` over the noise floor heard before it, or an
  unvoiced frame as loud soon after it (a final "s" the VAD let go of, the
  burst of a final "p"). That end is never more than ``tail_trim_ms`` from the
  VAD's, so speech the level misjudges ends at most that much sooner or later
  than the VAD alone would end it.
- Not while the user is starting again: the VAD needs 60-120 ms of a new word
  before it calls it speech, and a pause a little longer than the wait would
  end the turn under the first syllable of the next sentence (the reply then
  starts over the user's words). If any of the last ``STIRRING_FRAMES`` is
  voiced, or audible and rising out of the pause (``AUDIBLE_OVER_FLOOR_DB``
  over the pause's own median level, so steady music or noise does not hold
  it), the end waits for the VAD to decide, at most ``resume_hold_ms`` longer.
- Not while a voice may be there: a run of ``voice_run_ms`` the VAD's hair trigger
  hears (Silero at a low threshold, the one that pauses a reply), audible over the
  floor, is sound the silence is counted from, for at most ``voice_hold_ms`` past
  the end the words were given. A soft voice the VAD does not call speech (a cold,
  a mumble) went on in such a run, and the reply started under it and was paused
  at once: a turn does not end on a sound that would pause its reply. A steady
  sound the hair trigger hears (music, a television) holds it no longer than that.
  A run the second opinion alone is sure of (Silero at 0.5) counts however soft,
  once past its own decay after the words: a voice 2-5 dB over a quiet room.
- The floor is the room's: frames with no signal at all (digital silence before a
  stream's sound, a transport's fill) are not its noise.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from voice.audio.format import FRAME_MS, SILENCE_DB
from voice.errors import ConfigError

AUDIBLE_BELOW_PEAK_DB = 30.0  # weak final consonants sit 20-30 dB under the vowels
AUDIBLE_OVER_FLOOR_DB = 6.0  # and stand out of the room's own noise
LOUD_BELOW_PEAK_DB = 20.0  # ... unless the noise is that close to the voice
FLOOR_FRAMES = 150  # the noise floor: the quietest tenth of the last 3 s heard outside speech
# ... of the sound heard: a frame under one step of 16-bit audio is no microphone's noise
# but no signal at all (a stream's first frames, a transport's fill, a file's digital
# silence). Counted, it set the floor of a noisy room at -180 dB, every frame of its
# noise was "audible", and the end of the speech came up to ``tail_trim_ms`` late.
NO_SIGNAL_DB = -90.0
# ... and it takes this many frames of the room to know it: speech right after a stream
# opens (or after its digital silence) leaves only its own first sounds, the ones the VAD
# had not called speech yet, and a floor of those (-33 dB under a -10 dB voice) took the
# words' last 100 ms for the room. Until then the floor is silence: the peak judges.
FLOOR_MIN_FRAMES = 10
# Silero stays sure ~100-150 ms past the words it heard (its decay, not more voice): what
# it is sure of counts as voice in the pause only this far past the speech's end.
SURE_AFTER_MS = 200
STIRRING_FRAMES = 3  # the end waits while any of the last 60 ms sounds like speech starting


def audible_threshold_db(peak_db: float, floor_db: float, guarded: bool = True) -> float:
    """The level a frame must pass to be speech rather than its tail: within
    ``AUDIBLE_BELOW_PEAK_DB`` of the peak and ``AUDIBLE_OVER_FLOOR_DB`` over the floor.
    ``guarded``: the floor never makes it stricter than ``LOUD_BELOW_PEAK_DB`` under the
    peak, so speech that barely stands out of the noise is not all taken for a tail.
    The benchmarks' ground truth (:func:`voice.bench.corpus.audible_frames`) uses it too."""
    over_floor = floor_db + AUDIBLE_OVER_FLOOR_DB
    if guarded:
        over_floor = min(over_floor, peak_db - LOUD_BELOW_PEAK_DB)
    return max(peak_db - AUDIBLE_BELOW_PEAK_DB, over_floor)


@dataclass
class EndpointConfig:
    window_ms: int = 200
    start_voiced_ms: int = 120
    resume_voiced_ms: int = 60
    end_silence_ms: int = 600
    preroll_ms: int = 300
    tail_trim_ms: int = 200  # the most the audible end may differ from the VAD's; 0: VAD only
    resume_hold_ms: int = 200  # the end waits this much at most for sound that may be speech
    voice_run_ms: int = 80  # a hair-trigger run this long in a pause is sound; 0: off
    voice_hold_ms: int = 1500  # ... that holds the end at most this much longer

    def validate(self) -> None:
        for name in ("window_ms", "start_voiced_ms", "resume_voiced_ms", "end_silence_ms"):
            if getattr(self, name) < FRAME_MS:
                raise ConfigError(f"vad.{name} must be at least {FRAME_MS} ms.")
        if self.tail_trim_ms < 0:
            raise ConfigError("vad.tail_trim_ms must not be negative (0 ends on the VAD alone).")
        if self.voice_run_ms < 0 or self.voice_hold_ms < 0:
            raise ConfigError(
                "vad.voice_run_ms and vad.voice_hold_ms must not be negative (0 turns it off)."
            )
        if self.resume_hold_ms < 0:
            raise ConfigError(
                "vad.resume_hold_ms must not be negative (0 ends on time even over a new word)."
            )
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
    """Feed one boolean per frame (and its level in dBFS, if known); get at most one
    Started or Ended back."""

    def __init__(self, config: EndpointConfig | None = None) -> None:
        self.config = config or EndpointConfig()
        self.config.validate()
        self._window: deque[tuple[int, bool]] = deque()
        self._frame = -1
        self.speaking = False
        self.onset_frame = -1
        self.last_speech_frame = -1  # the VAD's: the last voiced frame that counted
        self._last_audible_frame = -1  # the last of those that was also audible
        self._peak_db = -np.inf  # the utterance's loudest frame so far
        self._floor_db = -np.inf  # the noise floor when the utterance began
        window_frames = max(1, self.config.window_ms // FRAME_MS)
        self._levels: deque[tuple[int, float]] = deque(maxlen=window_frames)  # for the onset
        self._quiet: deque[float] = deque(maxlen=FLOOR_FRAMES)  # levels heard outside speech
        self._last_stirring_frame = -1  # the last frame in a pause that may be speech again
        self._voice_run = 0  # consecutive frames of voice in the pause (see _watch_voice)
        self._last_voice_frame = -1  # the last frame of such a run of voice_run_ms

    @property
    def frames_seen(self) -> int:
        return self._frame + 1

    @property
    def speech_end_frame(self) -> int:
        """The last frame of the current (or last) utterance's speech: where its sound
        ends, but never more than ``tail_trim_ms`` before the VAD's last voiced one."""
        trimmed = self.last_speech_frame - self.config.tail_trim_ms // FRAME_MS
        return max(self._last_audible_frame, trimmed)

    @property
    def silence_ms(self) -> int:
        """Silence since the end of the current utterance's speech (0 when idle)."""
        if not self.speaking:
            return 0
        return (self._frame - self.speech_end_frame) * FRAME_MS

    @property
    def quiet_ms(self) -> int:
        """The silence the end of the turn counts: since the speech's end, or since the
        last hair-trigger run in its pause, within ``voice_hold_ms`` of the end it
        would have had (0 when idle)."""
        silence = self.silence_ms
        if self._last_voice_frame <= self.speech_end_frame:
            return silence
        if silence >= self.config.end_silence_ms + self.config.voice_hold_ms:
            return silence
        return min(silence, (self._frame - self._last_voice_frame) * FRAME_MS)

    def _audible(self, level_db: float | None, voiced: bool = True) -> bool:
        """Whether a frame of the utterance is loud enough to be speech, not its tail;
        a frame whose level is unknown is. For a voiced frame the floor guard is never
        stricter than 20 dB under the peak: in a loud room, speech that barely stands
        out of the noise must not all be taken for its tail (the VAD's end holds then).
        An unvoiced frame must stand out of the floor to extend the speech."""
        if level_db is None:
            return True
        return level_db > audible_threshold_db(self._peak_db, self._floor_db, guarded=voiced)

    def _voiced_in_window(self) -> int:
        return sum(1 for _, voiced in self._window if voiced)

    def _is_speech_evidence(self) -> bool:
        """A voiced frame continues speech right away; after a gap, it takes
        ``resume_voiced_ms`` of voiced frames since the last speech to count."""
        if self.last_speech_frame == self._frame - 1:
            return True
        fresh = sum(1 for i, v in self._window if v and i > self.last_speech_frame)
        return fresh * FRAME_MS >= self.config.resume_voiced_ms

    def push(
        self,
        voiced: bool,
        level_db: float | None = None,
        burst_db: float | None = None,
        onset: bool = False,
        sure: bool = False,
    ) -> EndpointEvent | None:
        """``level_db``: the frame's RMS level in dBFS; without it speech ends where the
        VAD's voiced frames end. ``burst_db``: the level of its loudest part
        (:func:`voice.audio.format.burst_level_db`), which judges whether an unvoiced
        frame after the words is still their sound; ``level_db`` when not given.
        ``onset``: the VAD's hair trigger on the frame (none heard when not given).
        ``sure``: the VAD's second opinion alone calls it speech (Silero at 0.5, which
        hears voices too soft for webrtcvad)."""
        cfg = self.config
        self._frame += 1
        self._window.append((self._frame, voiced))
        while len(self._window) > max(1, cfg.window_ms // FRAME_MS):
            self._window.popleft()
        if level_db is not None:
            self._levels.append((self._frame, level_db))
        voiced_ms = self._voiced_in_window() * FRAME_MS
        self._watch_voice(onset, level_db, sure)

        if not self.speaking:
            if voiced and voiced_ms >= cfg.start_voiced_ms:
                self.speaking = True
                self.onset_frame = next(i for i, v in self._window if v)
                self.last_speech_frame = self._last_audible_frame = self._frame
                onset_levels = [db for i, db in self._levels if i >= self.onset_frame]
                self._peak_db = max(onset_levels, default=-np.inf)
                # Levels outside speech are only gathered between utterances: once per one.
                quiet = self._quiet
                known = len(quiet) >= FLOOR_MIN_FRAMES
                self._floor_db = float(np.percentile(quiet, 10)) if known else SILENCE_DB
                return Started(self.onset_frame)
            if level_db is not None and not voiced and level_db > NO_SIGNAL_DB:
                self._quiet.append(level_db)  # (a stream may open with speech: none yet)
            return None

        if voiced and self._is_speech_evidence():
            self.last_speech_frame = self._frame
            if level_db is not None:
                self._peak_db = max(self._peak_db, level_db)
            if self._audible(level_db):
                self._last_audible_frame = self._frame
            return None
        if self._still_sounding(level_db if burst_db is None else burst_db):
            self._last_audible_frame = self._frame
        elif voiced or self._rising(level_db):
            self._last_stirring_frame = self._frame
        if self.quiet_ms >= cfg.end_silence_ms and not self._held_for_new_word():
            event = Ended(self.onset_frame, self.speech_end_frame)
            self.speaking = False
            self._window.clear()
            return event
        return None

    def _watch_voice(self, onset: bool, level_db: float | None, sure: bool) -> None:
        """Count the run of voice heard in the speech's pause; one of ``voice_run_ms`` is
        sound. A frame is voice when the hair trigger hears it audible over the floor, or
        when the second opinion is sure of it ``SURE_AFTER_MS`` past the speech's end:
        a voice 2-5 dB over a quiet room (the cold speaker's drawn-out "than") is not
        audible by the floor's measure, but Silero gives it 0.9. (Runs of 160 ms kept
        back a click Silero was sure of, and most of that voice with it.)"""
        past_decay = (self._frame - self.speech_end_frame) * FRAME_MS > SURE_AFTER_MS
        heard = (sure and past_decay) or (onset and self._audible(level_db, voiced=False))
        self._voice_run = self._voice_run + 1 if heard and self.speaking else 0
        run_ms = self.config.voice_run_ms
        if run_ms > 0 and self._voice_run * FRAME_MS >= run_ms:
            self._last_voice_frame = self._frame

    def _still_sounding(self, level_db: float | None) -> bool:
        """An unvoiced frame that is still the speech's sound: a final "s" the VAD let
        go of, or the release of a final "p" after its silent closure ("stop": the
        burst comes ~150 ms after the vowel, and without it Whisper hears "start").
        Within ``tail_trim_ms`` of the last audible frame and of the VAD's last voiced
        one, so music starting after the words holds the turn open no longer."""
        trim = self.config.tail_trim_ms
        return (
            level_db is not None
            and (self._frame - self._last_audible_frame) * FRAME_MS <= trim
            and (self._frame - self.last_speech_frame) * FRAME_MS <= trim
            and self._audible(level_db, voiced=False)
        )

    def _rising(self, level_db: float | None) -> bool:
        """Whether a frame in a pause is audible and stands out of the pause's own
        level (its median over the last ``window_ms``): a new word's first sound."""
        if level_db is None or not self._audible(level_db, voiced=False):
            return False
        pause = [db for i, db in self._levels if i > self._last_audible_frame]
        return level_db > float(np.median(pause)) + AUDIBLE_OVER_FLOOR_DB

    def _held_for_new_word(self) -> bool:
        """Whether the end waits because the pause's last frames may be a new word's
        first sound: for the VAD to call it speech (the silence then starts over) or
        to let it go, at most ``resume_hold_ms`` past the end-of-turn silence."""
        stirring = self._frame - self._last_stirring_frame < STIRRING_FRAMES
        overdue = self.quiet_ms - self.config.end_silence_ms
        return stirring and overdue < self.config.resume_hold_ms

    def force_end(self) -> Ended | None:
        """End the utterance now (end of input): the caller decides, not the silence timer."""
        if not self.speaking:
            return None
        self.speaking = False
        self._window.clear()
        return Ended(self.onset_frame, self.speech_end_frame)
