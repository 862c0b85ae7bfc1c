"""The [tts] settings section: loaded like every other, checked before any model loads."""

from __future__ import annotations

import pytest

from voice.config import load_settings
from voice.errors import ConfigError
from voice.speak.tts import PiperTts, TtsConfig


def test_tts_settings_from_environment() -> None:
    settings = load_settings(env={"VOICE_TTS_SPEAKING_RATE": "1.2", "VOICE_TTS_THREADS": "2"})
    assert settings.tts.speaking_rate == 1.2 and settings.tts.threads == 2
    assert settings.tts.voice == "default" and settings.tts.output_rate == 16000


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (TtsConfig(threads=0), "tts.threads"),
        (TtsConfig(speaking_rate=0.0), "tts.speaking_rate"),
        (TtsConfig(speaking_rate=9.0), "tts.speaking_rate"),
        (TtsConfig(output_rate=100), "tts.output_rate"),
    ],
)
def test_bad_tts_settings_fail_before_loading(config: TtsConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PiperTts(config)
