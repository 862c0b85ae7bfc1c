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
    assert settings.asr.threads == settings.conversation.lane_threads == 2  # the lane's


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


def test_a_config_that_is_a_folder_or_not_text_is_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path, env={})
    binary = tmp_path / "voice.toml"
    binary.write_bytes(b"\xff\xfe[asr]\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings(binary, env={})


@pytest.mark.parametrize(
    "text, message",
    [
        ("[listen]\nmax_window_s = 29\n", "listen.max_window_s must be from 1 to under 29"),
        ("[listen]\npartial_interval_ms = 0\n", "partial_interval_ms must be positive"),
        ("[vad]\nend_silence_ms = 5\n", "vad.end_silence_ms must be at least"),
        ("[vad]\ntail_trim_ms = -20\n", "vad.tail_trim_ms must not be negative"),
        ("[vad]\nonset_threshold = 0\n", "vad.onset_threshold must be a probability"),
        ("[vad]\nonset_threshold = 1.5\n", "vad.onset_threshold must be a probability"),
    ],
)
def test_values_that_cannot_work_fail_when_loaded(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "voice.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings(path, env={})
