"""Settings: defaults, then a TOML file, then environment variables, then CLI flags.

Every field of every section can be set the same three ways, so a model or a
timing is always one setting away::

    # voice.toml (or --config FILE, or VOICE_CONFIG=FILE)
    [asr]
    model = "/models/faster-whisper-base.en"

    VOICE_ASR_MODEL=/models/faster-whisper-base.en voice transcribe a.wav
    voice transcribe a.wav --asr-model /models/faster-whisper-base.en

Each section's class belongs to the package it configures; this module only
gathers them. So it sits just below the composition layer (:mod:`voice.app`),
which hands each part its own section: nothing below that imports this module
(``lint-imports`` checks it; see docs/architecture.md).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voice.conversation.session import ConversationConfig
from voice.conversation.turns import TurnConfig
from voice.conversation.wake import WakeConfig
from voice.errors import ConfigError
from voice.knowledge.policy import KnowledgeConfig
from voice.listen.endpoint import EndpointConfig
from voice.listen.listener import ListenConfig
from voice.listen.whisper import BEAM_FOR_LANGUAGE, AsrConfig
from voice.speak.tts import TtsConfig
from voice.think.backend import LlmConfig
from voice.tools.choose import ToolsConfig
from voice.transports.desk import DeskConfig


@dataclass
class VadConfig(EndpointConfig):
    aggressiveness: int = 2
    silero: bool = True
    # Silero's probability that pauses a reply someone may be speaking over (words
    # still decide whether it is interrupted); 0.5 is what it takes to be speech.
    onset_threshold: float = 0.2

    def validate(self) -> None:
        super().validate()
        if not 0.0 < self.onset_threshold <= 1.0:
            raise ConfigError(
                "vad.onset_threshold must be a probability above 0 and at most 1.",
                "0.2 pauses a reply at a soft onset; 0.5 only once Silero calls it speech.",
            )


@dataclass
class Settings:
    vad: VadConfig = field(default_factory=VadConfig)
    asr: AsrConfig = field(default_factory=AsrConfig)
    listen: ListenConfig = field(default_factory=ListenConfig)
    tts: TtsConfig = field(default_factory=TtsConfig)
    llm: LlmConfig = field(default_factory=LlmConfig)
    turn: TurnConfig = field(default_factory=TurnConfig)
    conversation: ConversationConfig = field(default_factory=ConversationConfig)
    desk: DeskConfig = field(default_factory=DeskConfig)
    wake: WakeConfig = field(default_factory=WakeConfig)
    knowledge: KnowledgeConfig = field(default_factory=KnowledgeConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)

    def set(self, section: str, name: str, raw: Any) -> None:
        """Set ``section.name`` from a TOML value or a string, converting to the field's type."""
        target = getattr(self, section, None)
        if target is None or not dataclasses.is_dataclass(target):
            raise ConfigError(f"unknown settings section [{section}].", _sections_hint(self))
        fields = {f.name: f for f in dataclasses.fields(target)}
        if name not in fields:
            raise ConfigError(
                f"unknown setting {section}.{name}.",
                f"Known in [{section}]: {', '.join(sorted(fields))}.",
            )
        current = getattr(target, name)
        setattr(target, name, _convert(raw, type(current), f"{section}.{name}"))


def _sections_hint(settings: Settings) -> str:
    return "Sections: " + ", ".join(f.name for f in dataclasses.fields(settings)) + "."


def _convert(raw: Any, kind: type, label: str) -> Any:
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    try:
        if kind is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        return kind(text)
    except ValueError:
        raise ConfigError(f"{label} must be a {kind.__name__}, not {raw!r}.") from None


def read_toml(path: str | Path, what: str, hint: str) -> dict[str, Any]:
    """A TOML file's tables, or a :class:`ConfigError` that names ``what`` it is and why
    it cannot be read (missing, a folder, not UTF-8, not TOML), with ``hint``."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}.", hint) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}.", hint) from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text; save it as UTF-8.") from None
    except OSError as exc:  # a folder, no permission
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}.", hint) from None


def load_settings(path: str | Path | None = None, env: dict[str, str] | None = None) -> Settings:
    """Defaults, then the TOML file (``path`` or $VOICE_CONFIG), then $VOICE_<SECTION>_<NAME>."""
    env = dict(os.environ) if env is None else env
    settings = Settings()
    path = path or env.get("VOICE_CONFIG")
    if path:
        data = read_toml(
            path, "config file", "Give --config (or $VOICE_CONFIG) the path of a TOML file."
        )
        for section, values in data.items():
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: '{section}' must be a [section] table.")
            for name, value in values.items():
                settings.set(section, name, value)
    for part in dataclasses.fields(settings):
        for item in dataclasses.fields(getattr(settings, part.name)):
            key = f"VOICE_{part.name}_{item.name}".upper()
            if key in env:
                settings.set(part.name, item.name, env[key])
    settings.vad.validate()  # values that cannot work fail now, not at the first session
    settings.listen.validate()
    check_wake(settings.wake)
    settings.knowledge.validate()
    return settings


# How the reply is asked for, per language ([conversation] language).
LANGUAGE_NAMES = {
    "en": "English", "zh": "Mandarin Chinese, in simplified characters", "ja": "Japanese",
    "de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese",
    "nl": "Dutch", "ru": "Russian", "pl": "Polish", "uk": "Ukrainian", "vi": "Vietnamese",
}  # fmt: skip


def with_language(settings: Settings) -> Settings:
    """Spread ``[conversation] language`` to the sections that depend on it: Whisper's
    language (and a multilingual model where the configured one is English-only, or
    where ``asr.languages`` lets a turn be in several), the turn-taking rules (the
    English word lists only where every turn is English), Whisper's beam (Mandarin's
    is wider, where ``asr.beam_size`` is left at its default), the prompt (replies in the
    language) and the voice (the catalogue's voice for it where the bundled English one
    is configured). Nothing is loaded or fetched here: a model that is missing is a
    clear error when it loads."""
    from voice.catalog import load_catalog
    from voice.models import MULTILINGUAL, english_only_asr

    language = settings.conversation.language.strip().lower() or "en"
    settings.conversation.language = language
    settings.turn.language = language
    if not settings.asr.language:
        settings.asr.language = language
    heard = {c.strip().lower() for c in settings.asr.languages.split(",") if c.strip()}
    if len(heard) > 1:
        if english_only_asr(settings.asr.model):
            settings.asr.model = MULTILINGUAL
        if heard != {"en"}:  # a turn may be in any of them: no English word lists
            settings.turn.language = "multi"
    if language == "en":
        return settings
    if english_only_asr(settings.asr.model):
        settings.asr.model = MULTILINGUAL
    if language in BEAM_FOR_LANGUAGE and settings.asr.beam_size == AsrConfig().beam_size:
        settings.asr.beam_size = BEAM_FOR_LANGUAGE[language]
    name = LANGUAGE_NAMES.get(language, f"the language with code {language!r}")
    instruction = f"Always reply in {name}."
    if instruction not in settings.llm.system_prompt:
        settings.llm.system_prompt = f"{settings.llm.system_prompt.rstrip()} {instruction}"
    if settings.tts.voice in ("", "default"):
        voices = [e for e in load_catalog().values() if e.role == "tts" and e.speaks(language)]
        if voices:
            settings.tts.voice = voices[0].name  # not pulled: says how, when it loads
    return settings


def with_model_defaults(settings: Settings) -> Settings:
    """A catalogue language model's own sampling (its entry's ``sampling``: its authors'
    generation settings) for each [llm] field the settings leave at the project's
    default. Those defaults were tuned on SmolLM2-135M (a frequency penalty against its
    loops); Qwen2.5 asks for top_k 20, top_p 0.8 and a 1.05 repeat penalty. A value set
    in the TOML, the environment or a flag is kept, unless it equals the default."""
    from voice.catalog import entry_for_model

    entry = entry_for_model(settings.llm.model, "llm")
    if entry is None or settings.llm.backend != "embedded":
        return settings
    defaults = LlmConfig()
    for name, value in entry.sampling.items():
        if getattr(settings.llm, name) == getattr(defaults, name):
            settings.set("llm", name, int(value) if name == "top_k" else value)
    return settings


def prepared(settings: Settings) -> Settings:
    """The settings as the engines take them: the conversation's language spread to its
    sections (:func:`with_language`), then a catalogue model's own sampling
    (:func:`with_model_defaults`). Idempotent: settings prepared twice are unchanged."""
    return with_model_defaults(with_language(settings))


def check_wake(wake: WakeConfig) -> None:
    """A wake word that cannot work (no such model, a malformed one, a bad setting) is
    one clear error when the settings are read, not when the first conversation opens."""
    wake.validate()
    if wake.enabled:
        from voice.listen.wake import load_wake_detector

        load_wake_detector(wake.wake_word, wake.threshold).close()  # milliseconds
    earcon = wake.earcon.strip()
    if earcon not in ("", "none", "tone") and not Path(earcon).expanduser().is_file():
        raise ConfigError(
            f"wake.earcon: no such sound file {earcon}.", "Give a WAV file, 'tone' or 'none'."
        )
