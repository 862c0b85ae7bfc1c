"""The embedding API's logic with fake engines: typed turns, say(), hooks, callbacks,
async events, push-to-talk, reset, history bounds and personas. Real models are in
tests/component/test_assistant.py."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import LoudIsSpeech
from test_conversation_core import REPLY, FakeAsr, FakeLlm, FakeTts

from voice.assistant import Assistant, Persona, load_persona
from voice.config import Settings
from voice.errors import ConfigError
from voice.events import Event
from voice.reply.history import MAX_KEPT_MESSAGES, MAX_SAID_CHARS, History
from voice.runtime.engines import Engines

# What of REPLY (three sentences) is said: the default settings end a reply after two.
SPOKEN = REPLY[: REPLY.index("lovely day for it.") + len("lovely day for it.")]
BLOCK = np.zeros(320, np.float32)


def assistant(persona: Persona | None = None) -> Assistant:
    return Assistant(Settings(), persona, engines=Engines(FakeAsr(), FakeLlm(), FakeTts()))


def run_for(bot: Assistant, seconds: float) -> np.ndarray:
    """Feed silent microphone blocks at a little faster than real time; what played."""
    out = []
    for _ in range(int(seconds / 0.02)):
        out.append(bot.process(BLOCK))
        time.sleep(0.002)  # the engine thread runs the jobs meanwhile
    return np.concatenate(out)


def test_say_is_spoken_through_the_reply_path_and_remembered() -> None:
    seen: list[Event] = []
    with assistant() as bot:
        bot.on("*", seen.append)
        reply_id = bot.say("Welcome to the museum.")
        played = run_for(bot, 3.5)
    kinds = [e.type for e in seen]
    assert kinds.index("reply_start") < kinds.index("audio_chunk") < kinds.index("reply_end")
    (end,) = [e for e in seen if e.type == "reply_end"]
    assert end.reply_id == reply_id and end.heard_text == "Welcome to the museum."  # type: ignore[attr-defined]
    assert np.abs(played).max() > 0  # it came out of process()
    # The next prompt carries it: the model knows what it said.
    prompt = bot.session.history.prompt_for("Where is the cafe?")
    assert [m.content for m in prompt[1:]] == ["Welcome to the museum.", "Where is the cafe?"]


def test_a_typed_turn_is_answered_and_the_hook_can_take_it() -> None:
    finals: list[str] = []
    replies: list[str] = []
    with assistant() as bot:
        bot.on("final", lambda e: finals.append(e.text))  # type: ignore[attr-defined]

        @bot.on_reply
        def heard(event):  # type: ignore[no-untyped-def]
            replies.append(event.heard_text)

        @bot.before_reply
        def commands(text: str) -> str | None:
            if "louder" in text:
                bot.say("Okay.")
                return None
            return text.upper()

        bot.send_text("make it louder")
        run_for(bot, 1.0)
        bot.send_text("hello there")
        run_for(bot, 12.0)
    assert finals == ["make it louder", "hello there"]
    assert replies == ["Okay.", SPOKEN]
    # The hook changed what the LLM was asked.
    assert [m.content for m in bot.session.history.turns if m.role == "user"] == ["HELLO THERE"]


def test_events_as_an_async_iterator() -> None:
    async def main() -> list[str]:
        with assistant() as bot:
            kinds: list[str] = []

            async def consume() -> None:
                async for event in bot.events():
                    kinds.append(event.type)
                    if event.type == "reply_end":
                        return

            task = asyncio.create_task(consume())
            await asyncio.sleep(0)
            bot.say("Hi.")
            for _ in range(200):
                bot.process(BLOCK)
                await asyncio.sleep(0.005)
                if task.done():
                    break
            await asyncio.wait_for(task, 5)
            return kinds

    kinds = asyncio.run(main())
    assert kinds[0] == "reply_start" and kinds[-1] == "reply_end"


def test_push_to_talk_ignores_the_mic_until_the_button_is_down() -> None:
    with assistant() as bot:
        bot.session.listener.classifier = LoudIsSpeech()  # the fake ears' VAD
        bot.push_to_talk = True
        loud = np.full(320, 0.3, np.float32)
        for _ in range(50):
            bot.process(loud)  # button up: heard as silence
        assert bot.session.listener.open_utterance is None
        bot.talk(True)
        for _ in range(50):
            bot.process(loud)
        assert bot.state in ("user_speaking", "speculating")
        bot.talk(False)  # released: the turn ends now, no silence to wait for
        assert bot.session.listener.open_utterance is None


def test_reset_stops_the_reply_and_forgets_the_visitor() -> None:
    seen: list[Event] = []
    with assistant() as bot:
        bot.on("*", seen.append)
        bot.send_text("hello")
        run_for(bot, 0.3)  # the reply has started; nothing of it heard yet
        bot.reset()
        run_for(bot, 0.2)
        assert bot.state == "listening" and bot.session.history.turns == []
        (end,) = [e for e in seen if e.type == "reply_end"]
        assert end.interrupted  # type: ignore[attr-defined]
        # The next visitor's words are not merged with the last one's unanswered turn.
        bot.send_text("where is the exit")
        run_for(bot, 0.5)
    finals = [e for e in seen if e.type == "reply_start"]
    assert finals[-1].text == "where is the exit"  # type: ignore[attr-defined]


def test_an_assistant_can_stop_and_start_again() -> None:
    with assistant() as bot:
        bot.send_text("hello")
        run_for(bot, 0.3)
    with bot:  # the reply that was out when it stopped does not wedge the next one
        bot.send_text("hello again")
        run_for(bot, 12.0)
        assert bot.state == "listening"
    assert bot.session.history.turns[-1].content == SPOKEN


def test_a_hook_that_raises_is_reported_and_the_turn_answered() -> None:
    seen: list[Event] = []
    with assistant() as bot:
        bot.on("*", seen.append)

        @bot.before_reply
        def broken(text: str) -> str | None:
            raise ValueError("bug in the game")

        bot.send_text("hello")
        run_for(bot, 1.0)
    errors = [e for e in seen if e.type == "error"]
    assert [e.code for e in errors] == ["hook_failed"]  # type: ignore[attr-defined]
    assert any(e.type == "reply_start" for e in seen)


def test_history_stays_bounded_however_long_it_runs() -> None:
    history = History("Be brief.", 2048, 100, lambda ms: sum(len(m.content) for m in ms))
    for k in range(1000):
        history.add_turn(f"question {k}", f"answer {k}")
    assert len(history.turns) == MAX_KEPT_MESSAGES
    assert history.turns[-1].content == "answer 999" and history.turns[0].role == "user"
    assert history.prompt_for("next")[-1].content == "next"
    for k in range(1000):  # an NPC barking with nobody answering
        history.add_said(f"Fresh bread, loaf number {k}!")
    last = history.turns[-1].content
    assert last.startswith("answer 999 ")  # the answer it joins is kept whole
    assert len(last) <= len("answer 999 ") + MAX_SAID_CHARS
    assert last.endswith("loaf number 999!")


def test_a_said_line_after_a_long_answer_keeps_the_whole_answer() -> None:
    history = History("Be brief.", 4096, 100, lambda ms: sum(len(m.content) for m in ms))
    answer = "The museum opens at nine. " * 20  # 520 characters
    history.add_turn("When do you open?", answer.strip())
    history.add_said("Tickets are at the desk to your left, next to the cloakroom. " * 3)
    assert history.turns[-1].content.startswith(answer.strip())
    history.truncate_last_reply("The museum opens")  # a barge-in: what was heard
    history.add_said("Sorry.")
    assert history.turns[-1].content == "The museum opens Sorry."


def test_personas_change_prompt_voice_and_manners(tmp_path: Path) -> None:
    path = tmp_path / "brom.toml"
    path.write_text(
        'name = "Brom"\nsystem_prompt = "You are Brom, a blacksmith."\nspeaking_rate = 0.8\n'
        'pitch = 0.85\ngreeting = "What?"\nreply_length = "long"\nbarge_in = "low"\n'
        'backchannels = "aye hmm"\n'
    )
    persona = load_persona(path)
    settings = persona.apply(Settings())
    assert settings.llm.system_prompt.startswith("You are Brom, a blacksmith.")
    assert "five sentences" in settings.llm.system_prompt and settings.llm.max_reply_tokens == 160
    assert (settings.tts.speaking_rate, settings.tts.pitch) == (0.8, 0.85)
    assert settings.conversation.barge_in_pause_ms == 250
    assert settings.conversation.backchannels == "aye hmm"
    assert settings.conversation.greeting == "What?"
    assert Settings().llm.system_prompt != settings.llm.system_prompt  # a copy was changed
    off = Persona(name="Quiet", barge_in="off").apply(Settings())
    assert off.conversation.barge_in is False
    # What a persona leaves out, the settings keep (a configured voice, a CLI rate).
    configured = Settings()
    configured.tts.voice, configured.tts.speaking_rate = "/voices/x.onnx", 1.3
    kept = Persona(name="Min", greeting="Hi.").apply(configured)
    assert (kept.tts.voice, kept.tts.speaking_rate) == ("/voices/x.onnx", 1.3)
    assert kept.llm.system_prompt == configured.llm.system_prompt


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('name = "X"\ncolour = "red"\n', "unknown key"),
        ('name = "X"\nreply_length = "epic"\n', "reply_length"),
        ('name = "X"\npitch = 3.0\n', "pitch"),
        ('name = "X"\nspeaking_rate = "fast"\n', "speaking_rate"),
        ("name = ", "not valid TOML"),
        ('name = " "\n', "needs a name"),
        ('voice = "x"\n', "has no name"),
    ],
)
def test_bad_persona_files_say_what_is_wrong(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_persona(path)
    with pytest.raises(ConfigError, match="persona file not found"):
        load_persona(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="cannot read persona file"):
        load_persona(tmp_path)


def test_bad_llm_server_settings_say_what_is_wrong() -> None:
    from voice.errors import VoiceError
    from voice.think.backend import LlmConfig
    from voice.think.http import OpenAiHttpBackend

    for config, match in [
        (LlmConfig(backend="http", url="http://127.0.0.1:99999/v1"), "no valid port"),
        (LlmConfig(backend="http", url="http://127.0.0.1:8080/v1", timeout_s=-1), "timeout_s"),
    ]:
        with pytest.raises(VoiceError, match=match):
            OpenAiHttpBackend(config)


def test_the_cli_applies_a_persona_to_every_command_that_converses() -> None:
    from voice.cli import _settings, build_parser

    root = Path(__file__).resolve().parents[2]
    for command in ("serve", "listen", "simulate"):
        args = build_parser().parse_args(
            [command, "--persona", str(root / "examples" / "personas" / "brom.toml")]
        )
        settings = _settings(args)
        assert settings.llm.system_prompt.startswith("You are Brom")
        assert settings.conversation.greeting == "Hmph. Looking for steel?"
        assert (settings.tts.speaking_rate, settings.tts.pitch) == (0.85, 0.8)


def test_a_callback_that_raises_costs_nothing_but_an_error_event() -> None:
    """Before, the exception left the dispatch loop: the rest of that batch (the reply's
    audio, its end) was lost and the reply never ended."""
    seen: list[Event] = []
    failures = [RuntimeError("the game's UI is not ready")]

    def flaky(event: Event) -> None:
        if failures:
            raise failures.pop()

    with assistant() as bot:
        bot.on("audio_chunk", flaky)
        bot.on("*", seen.append)
        bot.say("Welcome to the museum.")
        played = run_for(bot, 3.5)
    kinds = [e.type for e in seen]
    assert "reply_end" in kinds
    (error,) = [e for e in seen if e.type == "error"]
    assert error.code == "callback_failed" and "audio_chunk" in error.message  # type: ignore[attr-defined]
    (end,) = [e for e in seen if e.type == "reply_end"]
    assert end.heard_text == "Welcome to the museum." and not end.interrupted  # type: ignore[attr-defined]
    assert np.count_nonzero(played) == len("Welcome to the museum.") * 1600


class SilentOnSymbolsTts(FakeTts):
    """Like Piper: text with no letters or digits (emoji, a code fence) makes no sound."""

    def synthesize(self, text, cancel=None):  # type: ignore[no-untyped-def]
        if any(c.isalnum() for c in text):
            yield from super().synthesize(text, cancel)


@pytest.mark.parametrize("text", ["😀👍", "That is all. 😀👍🎉🎉🎉🎉🎉🎉🎉"])
def test_a_reply_that_makes_no_sound_at_its_end_still_ends(text: str) -> None:
    seen: list[Event] = []
    engines = Engines(FakeAsr(), FakeLlm(), SilentOnSymbolsTts())
    with Assistant(Settings(), engines=engines) as bot:
        bot.on("*", seen.append)
        bot.say(text)
        run_for(bot, 2.5)
        state = bot.session.state
    assert [e.type for e in seen].count("reply_end") == 1
    assert state == "listening"


def test_a_stereo_or_integer_microphone_block_is_a_clear_error() -> None:
    from voice.errors import AudioFormatError

    with assistant() as bot:
        with pytest.raises(AudioFormatError, match="mono"):
            bot.process(np.zeros((320, 2), np.float32))
        with pytest.raises(AudioFormatError, match="int16"):
            bot.process(np.zeros(320, np.int16))
        assert len(bot.process(np.zeros((320, 1), np.float32))) == 320  # one channel is fine
        assert len(bot.process(BLOCK)) == 320  # and the session goes on


def test_loading_a_model_does_not_stall_other_assistants(monkeypatch: pytest.MonkeyPatch) -> None:
    """A game creating an NPC with a new voice: while its models load, every other
    NPC's audio callback must go on (it asks the pool's scheduler on every block)."""
    import threading

    import voice.assistant.pool as pool_module
    from voice.assistant.pool import ModelPool

    loading = threading.Event()

    def slow_load(settings: Settings) -> FakeAsr:
        loading.set()
        time.sleep(1.5)
        return FakeAsr()

    monkeypatch.setattr(pool_module, "load_recognizer", slow_load)
    monkeypatch.setattr(pool_module, "PiperTts", lambda config: FakeTts())
    monkeypatch.setattr(pool_module, "make_backend", lambda config: FakeLlm())
    pool = ModelPool()
    with Assistant(Settings(), pool=pool, engines=Engines(FakeAsr(), FakeLlm(), FakeTts())) as bot:
        loader = threading.Thread(target=pool.engines_for, args=(Settings(),))
        loader.start()
        assert loading.wait(5)
        started = time.perf_counter()
        bot.process(BLOCK)
        waited = time.perf_counter() - started
        loader.join()
    assert waited < 0.75  # not held until the 1.5 s load is over


def test_one_assistant_too_many_says_how_to_allow_more() -> None:
    from voice.assistant.pool import ModelPool
    from voice.runtime.hub import ServerFull

    pool = ModelPool(max_assistants=1)

    def make() -> Assistant:
        return Assistant(Settings(), pool=pool, engines=Engines(FakeAsr(), FakeLlm(), FakeTts()))

    with make(), pytest.raises(ServerFull, match="max_assistants"):
        make().start()


def test_an_assistant_behind_a_wake_word_starts_idle_and_a_typed_turn_wakes_it() -> None:
    from voice.errors import ConfigError

    engines = Engines(FakeAsr(), FakeLlm(), FakeTts())
    seen: list[str] = []
    with Assistant(Settings(), engines=engines, wake_word="hey_jarvis") as bot:
        bot.on("*", lambda event: seen.append(event.type))
        run_for(bot, 0.1)
        assert bot.state == "idle"
        bot.send_text("Hello?")
        run_for(bot, 0.2)
        assert "wake" in seen and bot.session.wake is not None and bot.session.wake.awake
    with pytest.raises(ConfigError, match="neither a built-in model nor a file"):
        Assistant(Settings(), engines=engines, wake_word="hey_nobody")
