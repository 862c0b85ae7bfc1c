"""Personas: who the assistant is, in a small TOML file.

```toml
name = "Brom"
system_prompt = "You are Brom, the village blacksmith. Gruff, proud of your work."
voice = "default"          # a Piper voice: "default" or a path to a .onnx
speaking_rate = 0.85       # 1.0 is the voice's own pace
pitch = 0.85               # 1.0 is the voice's own pitch; lower is deeper
greeting = "What do you want? I'm busy."
reply_length = "short"     # short (one sentence), medium (up to three), long (five)
backchannels = "aye hmm yeah uh-huh"   # words that do not interrupt it
barge_in = "low"           # how easily speech over it stops it: off, low, normal, high
wake_word = "hey_jarvis"   # hands-free: answer only after it (or a microWakeWord .json)
earcon = "chime.wav"       # its sound on waking: a WAV file, "tone" or "none"
follow_up_s = 8            # after a reply, speech without the wake word this long
knowledge = "brom.md"      # what it knows (Markdown; relative to this file), docs/knowledge.md
answer = "verbatim"        # how: auto, verbatim (entries said as written), generate
unknown_reply = "Never heard of it."   # said to a question the knowledge does not answer
ask_text = "You mean {heading}?"       # a question it is not sure of, asked back
introduction = "Brom. I make swords."  # asked who it is or what it does ("I'm Brom.")
```

Everything is optional except ``name``. A persona changes a copy of the
settings (the LLM's system prompt and reply length, the voice, the turn-taking
knobs); the models themselves are shared by every persona that uses them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields
from pathlib import Path

from voice.config import Settings, check_wake, read_toml
from voice.errors import ConfigError
from voice.knowledge.policy import POLICIES


@dataclass(frozen=True)
class ReplyLength:
    """An instruction for the model, and what the reply path enforces whatever the
    model does (a tiny model ignores the instruction): a token cap, and the sentences
    and characters the spoken reply ends at (voice.reply.guard)."""

    instruction: str
    max_tokens: int
    sentences: int
    max_chars: int
    max_audio_s: float = 7.5  # the reply's audio, at most (llm.reply_max_audio_s)


REPLY_LENGTHS = {
    "short": ReplyLength("Answer in one short sentence.", 40, 1, 100),
    "medium": ReplyLength("Answer in two or three short sentences.", 90, 3, 200),
    "long": ReplyLength("Answer in up to five sentences.", 160, 5, 480, 30.0),
}
# barge_in -> the voiced run over a reply that pauses it (ms); None = half-duplex
BARGE_IN = {"off": None, "low": 250, "normal": 80, "high": 50}


@dataclass(frozen=True)
class Persona:
    # None (the key left out) keeps what the settings say: a persona changes only
    # what it names, so --config and the command-line flags still count.
    name: str
    system_prompt: str | None = None
    voice: str | None = None
    speaking_rate: float | None = None
    pitch: float | None = None
    greeting: str | None = None
    reply_length: str | None = None
    backchannels: str | None = None
    barge_in: str | None = None
    language: str | None = None  # ISO 639-1: replies, listening and voice in it
    wake_word: str | None = None
    earcon: str | None = None
    follow_up_s: float | None = None
    knowledge: str | None = None  # a path; load_persona makes it relative to the file
    answer: str | None = None
    unknown_reply: str | None = None
    ask_text: str | None = None  # "{heading}" stands for the entry asked about
    # Said as written when asked who it is or what it can do (with a knowledge file);
    # left out, "I'm <name>." answers who it is (in English).
    introduction: str | None = None

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ConfigError("a persona needs a name.", 'Add name = "..." to the file.')
        if self.reply_length is not None and self.reply_length not in REPLY_LENGTHS:
            raise ConfigError(
                f"persona {self.name}: reply_length {self.reply_length!r} is not one of "
                f"{', '.join(REPLY_LENGTHS)}."
            )
        if self.answer is not None and self.answer not in POLICIES:
            raise ConfigError(
                f"persona {self.name}: answer {self.answer!r} is not one of {', '.join(POLICIES)}."
            )
        if self.barge_in is not None and self.barge_in not in BARGE_IN:
            raise ConfigError(
                f"persona {self.name}: barge_in {self.barge_in!r} is not one of "
                f"{', '.join(BARGE_IN)}."
            )
        for knob in ("speaking_rate", "pitch"):
            value = getattr(self, knob)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"persona {self.name}: {knob} must be a number, not {value!r}.")
            if not 0.5 <= value <= 2.0:
                raise ConfigError(f"persona {self.name}: {knob} {value} is outside 0.5-2.0.")
        follow_up = self.follow_up_s
        if follow_up is not None and (
            isinstance(follow_up, bool) or not isinstance(follow_up, int | float) or follow_up < 0
        ):
            raise ConfigError(
                f"persona {self.name}: follow_up_s must be a number of seconds, not {follow_up!r}."
            )

    def apply(self, settings: Settings) -> Settings:
        """A copy of ``settings`` with this persona's voice, prompt and manners."""
        out = copy.deepcopy(settings)
        if self.system_prompt is not None or self.reply_length is not None:
            prompt = (self.system_prompt or "").strip() or settings.llm.system_prompt
            instruction = ""
            if self.reply_length is not None:
                length = REPLY_LENGTHS[self.reply_length]
                instruction = length.instruction
                out.llm.max_reply_tokens = length.max_tokens
                out.llm.reply_sentences = length.sentences
                out.llm.reply_max_chars = length.max_chars
                out.llm.reply_max_audio_s = length.max_audio_s
            out.llm.system_prompt = (
                f"{prompt} Your replies are spoken aloud: plain words, no lists, markdown "
                f"or emoji. {instruction}"
            ).strip()
        if self.voice is not None:
            out.tts.voice = self.voice
        if self.speaking_rate is not None:
            out.tts.speaking_rate = self.speaking_rate
        if self.pitch is not None:
            out.tts.pitch = self.pitch
        if self.greeting is not None:
            out.conversation.greeting = self.greeting
        if self.backchannels is not None and self.backchannels.strip():
            out.conversation.backchannels = self.backchannels
        if self.language is not None and self.language.strip():
            out.conversation.language = self.language.strip()
        if self.knowledge is not None:
            out.knowledge.path = self.knowledge
        if self.answer is not None:
            out.knowledge.answer = self.answer
        if self.unknown_reply is not None:
            out.knowledge.unknown_reply = self.unknown_reply
        if self.ask_text is not None:
            out.knowledge.ask_text = self.ask_text
        if self.introduction is not None:
            out.knowledge.introduction = self.introduction
        if out.conversation.language in ("", "en"):  # "I'm <name>." is English
            out.knowledge.name = self.name.strip()
        if self.barge_in is not None:
            pause_ms = BARGE_IN[self.barge_in]
            out.conversation.barge_in = pause_ms is not None
            if pause_ms is not None:
                out.conversation.barge_in_pause_ms = pause_ms
        if self.wake_word is not None:
            out.wake.wake_word = self.wake_word
        if self.earcon is not None:
            out.wake.earcon = self.earcon
        if self.follow_up_s is not None:
            out.wake.follow_up_s = float(self.follow_up_s)
        if self.wake_word is not None or self.earcon is not None:
            check_wake(out.wake)  # a bad model or sound file: one clear error, now
        return out


def load_persona(path: str | Path) -> Persona:
    """Read a persona file; a missing file or an unknown key is a clear error."""
    source = Path(path)
    data = read_toml(source, "persona file", "See examples/personas/ for the format.")
    if "name" not in data:
        raise ConfigError(f"persona file {source} has no name.", 'Add name = "..." to it.')
    known = {f.name for f in fields(Persona)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"persona file {source}: unknown key(s) {', '.join(unknown)}.",
            f"Known keys: {', '.join(sorted(known))}.",
        )
    for key, value in data.items():
        if key not in ("speaking_rate", "pitch", "follow_up_s") and not isinstance(value, str):
            raise ConfigError(f"persona file {source}: {key} must be text, not {value!r}.")
    if data.get("knowledge"):  # relative to the persona file, wherever it is run from
        data["knowledge"] = str((source.parent / Path(data["knowledge"]).expanduser()).resolve())
    return Persona(**data)
