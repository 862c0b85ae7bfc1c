"""The wake gate: idle until the wake word, awake for the turn and a follow-up window.

A hands-free assistant at a desk or a kiosk must not answer everything it hears. With
a wake word set (``[wake] wake_word``), the conversation is *idle* until the word is
heard: only the voice activity detector and the wake-word detector hear the
microphone (no speech recognition, no LLM). On the word it is *awake*: the speech
right after the phrase is the user's turn, said in the same breath or after a pause,
and the phrase itself reaches neither the transcript nor the history. While it
answers, and for ``follow_up_s`` after everything is over (the reply played, the
user's last words handled), the user speaks without the word: a follow-up, or a
barge-in over the reply, is the same person mid-conversation. Then it is idle again.

Everything here runs on the input's audio clock, like the rest of the core: the gate
is a pure state machine the session drives frame by frame (``session/wake.py``), so
scripted timelines test it exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE
from voice.errors import ConfigError
from voice.listen.wake import WakeDetector

Float32Array = npt.NDArray[np.float32]


@dataclass
class WakeConfig:
    """The ``[wake]`` settings.

    ``wake_word``: "" (off: always listening), a built-in model (``hey_jarvis``,
    ``okay_nabu``, ``hey_mycroft``, ``alexa``) or the path of a microWakeWord model's
    ``.json`` (or of its ``.tflite``, with the ``.json`` beside it).
    """

    wake_word: str = ""
    # The model's mean-probability cutoff; 0: the one measured for a built-in model
    # (hey_jarvis 0.7, docs/wake.md), else the model's own.
    threshold: float = 0.0
    follow_up_s: float = 8.0  # after everything is over, speech without the word this long
    earcon: str = "tone"  # on waking: "tone" (generated), "none", or a WAV file's path
    # The turn begins this long before the detection: the detector fires some way into
    # what follows the phrase, and a request said in the same breath must keep its first
    # word. What of the phrase this lets into the turn is taken off its words.
    cut_back_ms: int = 300

    @property
    def enabled(self) -> bool:
        return bool(self.wake_word.strip())

    def validate(self) -> None:
        if self.follow_up_s < 0 or not 0.0 <= self.threshold < 1.0 or self.cut_back_ms < 0:
            raise ConfigError(
                "wake.follow_up_s and wake.cut_back_ms must not be negative, and "
                "wake.threshold must be from 0 (the model's own) to below 1."
            )


def earcon_tone() -> Float32Array:
    """The default wake earcon: two short rising blips (880 and 1320 Hz, 160 ms in all),
    soft-edged so they do not click, at a modest level."""
    parts = []
    for freq, ms in ((880.0, 70), (1320.0, 90)):
        n = SAMPLE_RATE * ms // 1000
        t = np.arange(n) / SAMPLE_RATE
        edge = np.minimum(
            1.0, np.minimum(np.arange(n), n - 1 - np.arange(n)) / (0.01 * SAMPLE_RATE)
        )
        parts.append(0.25 * np.sin(2 * np.pi * freq * t) * edge)
    return np.concatenate(parts).astype(np.float32)


_WORD = re.compile(r"[a-z0-9']+")


def _norm(token: str) -> str:
    return "".join(_WORD.findall(token.lower()))


def strip_phrase(text: str, phrase: str) -> str:
    """``text`` without the wake phrase (or what of it is left) at its start.

    The turn begins a little before the detection, so its first words may be the end
    of the phrase as Whisper heard it ("Jarvis, what time is it?", "Travis. What
    time..."): leading words that sound like one of the phrase's words (a close
    spelling) are dropped, at most as many as the phrase has, and the rest is given a
    capital. A text that is only the phrase becomes ""."""
    words = [_norm(w) for w in phrase.split() if _norm(w)]
    tokens = text.split()
    dropped = 0
    while dropped < min(len(tokens), len(words) + 1):
        token = _norm(tokens[dropped])
        if not token:  # punctuation alone ("-", "...")
            dropped += 1
            continue
        if not any(_alike(token, word) for word in words):
            break
        dropped += 1
    if dropped == 0:
        return text
    rest = " ".join(tokens[dropped:]).lstrip(" ,.!?;:-")
    return rest[:1].upper() + rest[1:]


def _alike(token: str, word: str) -> bool:
    if token == word:
        return True
    if len(word) <= 3:  # "hey" / "hi" / "hay", "ok" / "okay"
        return token in _SHORT.get(word, ()) or SequenceMatcher(None, token, word).ratio() >= 0.67
    return SequenceMatcher(None, token, word).ratio() >= 0.6


_SHORT = {"hey": ("hi", "hay", "he", "a", "hey"), "ok": ("okay", "oh")}


class WakeGate:
    """Idle or awake, on the audio clock. The session feeds it every frame and tells
    it when the conversation is busy; it says when to wake and when to go idle."""

    def __init__(
        self, detector: WakeDetector, config: WakeConfig, earcon: Float32Array | None = None
    ) -> None:
        config.validate()
        self.detector = detector
        self.config = config
        self.earcon = earcon if earcon is not None and len(earcon) else None
        self.awake = False
        self.quiet_since_ms = 0.0  # when the conversation last had anything going on
        self.detected_at_ms: float | None = None  # the last detection

    @property
    def phrase(self) -> str:
        return self.detector.phrase

    def unwake(self, text: str) -> str:
        return strip_phrase(text, self.phrase)

    def hear(self, pcm16: npt.NDArray[np.int16], now_ms: float) -> bool:
        """The detector over the newest audio (ending at ``now_ms``): True if the phrase
        was just heard."""
        if not self.detector.process(pcm16):
            return False
        self.detected_at_ms = now_ms
        return True

    def cut_ms(self, now_ms: float) -> float:
        """Where the turn of a phrase detected now begins."""
        return max(0.0, now_ms - self.config.cut_back_ms)

    def woke(self, now_ms: float) -> None:
        self.awake = True
        self.quiet_since_ms = now_ms

    def busy(self, now_ms: float) -> None:
        """Something is going on (the user speaks, a reply is due or plays): the
        follow-up window starts again when it is over."""
        self.quiet_since_ms = now_ms

    def due_to_sleep(self, now_ms: float) -> bool:
        """Awake, and nothing has gone on for the follow-up window."""
        return self.awake and now_ms - self.quiet_since_ms >= self.config.follow_up_s * 1000

    def slept(self) -> None:
        self.awake = False

    def close(self) -> None:
        self.detector.close()
