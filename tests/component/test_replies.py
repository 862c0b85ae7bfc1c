"""What the bundled model says, through the real reply path (history, SmolLM2, the
reply guard, the sentence chunker, Piper): short, never looping, history holding
only what was spoken, and personas that ask for more getting more."""

from __future__ import annotations

import dataclasses

import pytest

from voice.assistant.persona import Persona
from voice.config import Settings
from voice.reply.guard import has_loop, split_sentences
from voice.reply.history import History
from voice.reply.pipeline import ReplyDone, SpokenAudio, speak_reply
from voice.reply.repeats import SaidLately
from voice.speak.tts import PiperTts, TtsConfig
from voice.think.backend import LlmConfig
from voice.think.llama import LlamaBackend

pytestmark = pytest.mark.slow

TEN_TURNS = [
    "Hello! How are you today?",
    "What is the capital of France?",
    "And what language do they speak there?",
    "Tell me about your day.",
    "Can you tell me more?",
    "You're right.",
    "Are you a tester?",
    "Tell me a long story about a dragon.",
    "Go on.",
    "Thanks, that's all.",
]


@pytest.fixture(scope="module")
def parts() -> tuple[LlamaBackend, PiperTts]:
    return LlamaBackend(LlmConfig(threads=1, threads_batch=1)), PiperTts(TtsConfig())


def talk(
    parts: tuple[LlamaBackend, PiperTts], config: LlmConfig, history: History, text: str
) -> tuple[ReplyDone, str]:
    """One turn: the reply, and the text of the chunks that were actually synthesised."""
    llm, tts = parts
    done: ReplyDone | None = None
    spoken: dict[int, str] = {}
    for item in speak_reply(llm, tts, history.prompt_for(text)):
        if isinstance(item, SpokenAudio):
            spoken[item.index] = item.text
        elif isinstance(item, ReplyDone):
            done = item
    assert done is not None
    history.add_turn(text, done.text)
    return done, "".join(spoken[i] for i in sorted(spoken))


def test_ten_turns_stay_within_the_sentence_cap_and_never_repeat_a_sentence(parts) -> None:  # type: ignore[no-untyped-def]
    config = dataclasses.replace(LlmConfig(), seed=24)
    history = History.for_backend(parts[0], config)
    replies: list[str] = []
    for text in TEN_TURNS:
        done, _ = talk(parts, config, history, text)
        sentences = split_sentences(done.text)
        assert len(sentences) <= config.reply_sentences, done.text
        assert not has_loop(done.text, config.loop_ngram), done.text
        said = SaidLately.of(replies[-config.repeat_window :])
        first = sentences[0] if sentences else ""
        assert not any(said.repeats(s, s is first) for s in sentences), f"again: {done.text!r}"
        if done.text.strip() != config.fallback_reply:
            replies.append(done.text)


def test_a_reply_cut_at_the_cap_leaves_only_what_was_spoken_in_history(parts) -> None:  # type: ignore[no-untyped-def]
    config = dataclasses.replace(LlmConfig(), seed=3, reply_sentences=1)
    history = History.for_backend(parts[0], config)
    done, spoken = talk(parts, config, history, "Tell me a long story about a dragon.")
    assert done.stop in ("sentences", "length")
    assert len(done.generated) > len(done.text)  # the model wrote on; that was not said
    assert spoken.strip() == done.text.strip()
    assert history.turns[-1].content == done.text
    assert history.turns[-1].content.strip() in done.generated


def test_a_long_persona_gets_longer_replies_than_the_default(parts) -> None:  # type: ignore[no-untyped-def]
    questions = ["Tell me about the moon.", "How do I bake bread?", "What is a good hobby?"]
    lengths = {}
    for name, settings in (
        ("default", Settings()),
        ("long", Persona(name="Sage", reply_length="long").apply(Settings())),
    ):
        config = dataclasses.replace(settings.llm, seed=5)
        history = History.for_backend(parts[0], config)
        lengths[name] = sum(len(talk(parts, config, history, q)[0].text) for q in questions)
    assert lengths["long"] > 1.5 * lengths["default"], lengths
