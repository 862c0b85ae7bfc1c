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


def test_the_voice_gives_spare_arena_memory_back_at_most_every_interval() -> None:
    from voice.speak.tts import ARENA_SHRINK_INTERVAL_S, _AbortableSession

    shrink_key = "memory.enable_memory_arena_shrinkage"
    now = [100.0]
    asked: list[str] = []

    class Session:
        def run(self, output_names: object, inputs: object, options: object) -> None:
            try:
                asked.append(options.get_run_config_entry(shrink_key))  # type: ignore[attr-defined]
            except RuntimeError:  # not set on this run
                asked.append("")

    session = _AbortableSession(Session(), clock=lambda: now[0])
    for step in (1.0, 1.0, ARENA_SHRINK_INTERVAL_S, 1.0, ARENA_SHRINK_INTERVAL_S):
        now[0] += step
        session.run(None, {})
    assert asked == ["", "", "cpu:0", "", "cpu:0"]
