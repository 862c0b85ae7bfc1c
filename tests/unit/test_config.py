"""Settings precedence (defaults < TOML < environment) and clear errors."""

from pathlib import Path

import pytest

from voice.config import load_settings
from voice.errors import ConfigError


def test_toml_then_environment(tmp_path: Path) -> None:
    path = tmp_path / "voice.toml"
    path.write_text('[asr]\nmodel = "/models/a"\nthreads = 1\n[vad]\nsilero = false\n')
    settings = load_settings(path, env={"VOICE_ASR_MODEL": "/models/b"})
    assert settings.asr.model == "/models/b"
    assert settings.asr.threads == 1
    assert settings.vad.silero is False


def test_defaults_without_file() -> None:
    settings = load_settings(env={})
    assert settings.asr.model == "default" and settings.vad.silero is True


@pytest.mark.parametrize(
    "text, message",
    [
        ("[asr]\nthreads = 'many'\n", "must be a int"),
        ("[nope]\nx = 1\n", "unknown settings section"),
        ("[asr]\nspeed = 1\n", "unknown setting asr.speed"),
        ("[asr\n", "not valid TOML"),
    ],
)
def test_bad_settings_are_clear(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "voice.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, env={})


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_settings("/nonexistent/voice.toml", env={})
