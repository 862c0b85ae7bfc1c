"""The conversation core on scripted timelines with fake engines (pure turn-taking logic).

Loud frames are speech. The fake recogniser hears one word per 200 ms of
audio at amplitude 0.3 (ending in "," under a second, an unfinished thought,
and "." after), "yeah" in audio at 0.2 and "stop" at 0.25; the fake
LLM says a fixed reply a word per step; the fake voice makes 0.1 s of audio
per character. Real models on real audio are in tests/component.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import LoudIsSpeech

from voice.conversation.generation import Playback, SpokenChunk
from voice.conversation.session import ConversationConfig, Session
from voice.conversation.turns import EndOfTurn, TurnConfig, judge_turn, same_turn_text
from voice.listen.endpoint import EndpointConfig
from voice.listen.listener import ListenConfig, Listener
from voice.listen.whisper import Transcription
from voice.reply.history import History
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate

WORDS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
REPLY = "Sure, I can help with that. It is a lovely day for it. Anything else I can do?"


class FakeAsr:
    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        peak = float(np.abs(audio).max()) if len(audio) else 0.0
        if 0.15 < peak < 0.22:
            return Transcription(words=["Yeah."])
        if 0.22 < peak < 0.27:
            return Transcription(words=["Stop."])
        loud_ms = int(np.sum(np.abs(audio) > 0.05) / 16)
        words = WORDS[: loud_ms // 200]
        mark = "," if loud_ms < 1000 else "."
        return Transcription(words=[*words[:-1], words[-1] + mark] if words else [])


class FakeLlm:
    context_tokens = 2048

    def __init__(self, eot: float | None = 0.5, reply: str = REPLY) -> None:
        self.eot = eot
        self.reply = reply  # every turn's answer
        self.opened = 0
        self.closed = 0

    def count_tokens(self, messages) -> int:  # type: ignore[no-untyped-def]
        return sum(len(m.content.split()) + 4 for m in messages)

    def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
        self.opened += 1
        try:
            for word in self.reply.split():
                yield word + " "
        finally:
            self.closed += 1


class FakeLlmWithEot(FakeLlm):
    def end_of_turn_probability(self, messages, user_text) -> float:  # type: ignore[no-untyped-def]
        assert self.eot is not None
        return self.eot


class FakeTts:
    def synthesize(self, text, cancel=None) -> Iterator[np.ndarray]:  # type: ignore[no-untyped-def]
        yield np.full(len(text) * 1600, 0.01, np.float32)


def tone(seconds: float, level: float = 0.3) -> np.ndarray:
    return np.full(int(seconds * 16000), level, np.float32)


def gap(seconds: float) -> np.ndarray:
    return np.zeros(int(seconds * 16000), np.float32)


def run(
    turns: list[ScriptTurn],
    llm: FakeLlm | None = None,
    config: ConversationConfig | None = None,
    turn: TurnConfig | None = None,
    asr: FakeAsr | None = None,
) -> tuple[SimulationResult, Session]:
    llm = llm or FakeLlm()
    engines = Engines(asr=asr or FakeAsr(), llm=llm, tts=FakeTts())
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    history = History("Be brief.", 2048, 100, llm.count_tokens)
    session = Session(
        listener,
        history,
        config or ConversationConfig(),
        turn,
        eot_available=engines.has_end_of_turn_model,
    )
    return simulate(Script(turns), session, engines), session


def at(audio: np.ndarray, seconds: float) -> ScriptTurn:
    return ScriptTurn(audio=audio, name="clip", at_s=seconds)


def after(audio: np.ndarray, event: str, delay: float) -> ScriptTurn:
    return ScriptTurn(audio=audio, name="clip", after=event, delay_s=delay)


def of(result: SimulationResult, kind: str) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in result.events if e["type"] == kind]


def spoken_samples(result: SimulationResult) -> int:
    return int(sum(e["duration_ms"] for e in of(result, "audio_chunk")) * 16)


def test_a_turn_is_answered_from_the_speculation_and_played_in_full() -> None:
    result, session = run([at(tone(1.0), 0.5)])
    kinds = [e["type"] for e in result.events]
    for earlier, later in [
        ("speech_start", "speculation_start"),
        ("speculation_start", "speech_end"),
        ("final", "reply_start"),
        ("reply_start", "playback_start"),
        ("playback_start", "reply_end"),
        ("reply_end", "turn_metrics"),
    ]:
        assert kinds.index(earlier) < kinds.index(later), (earlier, later)
    (start,) = of(result, "reply_start")
    assert start["speculative"] and start["text"] == "one two three four five."
    (end,) = of(result, "reply_end")
    assert not end["interrupted"] and end["heard_text"] == REPLY
    (metrics,) = of(result, "turn_metrics")
    assert metrics["voice_to_voice_ms"] >= metrics["end_silence_ms"]
    assert session.history.turns[-1].content == REPLY
    # Everything played is the reply's audio, after the user's speech, and all of it.
    assert np.count_nonzero(result.played) == spoken_samples(result)


def test_a_mid_sentence_pause_cancels_the_speculation_and_makes_one_turn() -> None:
    user = np.concatenate([tone(0.8), gap(0.4), tone(0.8)])
    at_once = ConversationConfig(speculation_lead_ms=0)  # prepared as soon as the words come
    result, _ = run([at(user, 0.5)], config=at_once)
    assert [e["reason"] for e in of(result, "speculation_cancel")] == ["user went on"]
    (final,) = of(result, "final")
    assert final["text"] == "one two three four five six seven eight."
    (start,) = of(result, "reply_start")
    assert start["text"] == final["text"] and start["speculative"]
    # The cancelled speculation was never shown: the only reply text is the real reply's.
    assert {e["reply_id"] for e in of(result, "reply_text")} == {start["reply_id"]}


def test_a_reply_to_unfinished_words_is_prepared_only_near_the_end_of_their_wait() -> None:
    # At the pause the words are "one two three four," (a comma: unfinished, 2 s), and
    # their reply is prepared 400 ms before that wait runs out, not at once: a pause of
    # 400 ms prepares nothing.
    short = np.concatenate([tone(0.8), gap(0.4), tone(0.8)])
    result, _ = run([at(short, 0.5)])
    (start,) = of(result, "speculation_start")
    assert start["text"] == "one two three four five six seven eight."
    assert not of(result, "speculation_cancel")
    # A pause of 1.8 s after the same words: the reply is prepared 1.6 s in, and thrown
    # away when the user goes on.
    long = np.concatenate([tone(0.8), gap(1.8), tone(0.8)])
    result, _ = run([at(long, 0.5)])
    first, _last = of(result, "speculation_start")
    assert first["text"] == "one two three four,"
    end_ms = 500 + 800
    assert end_ms + 2000 - 400 <= first["audio_ms"] < end_ms + 1800
    assert [e["reason"] for e in of(result, "speculation_cancel")] == ["user went on"]


def test_barge_in_stops_the_reply_and_history_keeps_what_was_heard() -> None:
    # 2.5 s into the reply: heard too long for the words to be the rest of the turn.
    result, session = run([at(tone(1.0), 0.5), after(tone(1.2), "reply_start", 2.5)])
    (interrupted,) = of(result, "interrupted")
    heard = interrupted["heard_text"]
    assert heard and REPLY.startswith(heard) and heard != REPLY
    assert session.history.turns[1].content == heard
    paused, cut = of(result, "paused")[0]["audio_ms"], interrupted["audio_ms"]
    # Nothing of the interrupted reply is played after the pause.
    first_reply = of(result, "reply_start")[0]["reply_id"]
    second_start = [e for e in of(result, "playback_start") if e["reply_id"] != first_reply]
    stop = int((paused + 20) * 16)
    until = int((second_start[0]["audio_ms"] - 20) * 16) if second_start else len(result.played)
    assert not result.played[stop:until].any()
    assert cut >= paused
    metrics = of(result, "turn_metrics")[0]
    assert metrics["interrupted"] and 0 < metrics["barge_in_ms"] <= 200
    assert len(of(result, "reply_start")) == 2  # and the barge-in is answered


def test_a_short_noise_pauses_and_the_reply_resumes() -> None:
    result, _ = run([at(tone(1.0), 0.5), after(tone(0.1), "reply_start", 1.0)])
    assert of(result, "paused") and of(result, "resumed")
    (end,) = of(result, "reply_end")
    assert not end["interrupted"] and end["heard_text"] == REPLY
    assert np.count_nonzero(result.played) == spoken_samples(result)  # nothing lost


def test_a_backchannel_does_not_interrupt() -> None:
    result, session = run([at(tone(1.0), 0.5), after(tone(0.6, 0.2), "reply_start", 1.0)])
    assert not of(result, "interrupted")
    assert [e["text"] for e in of(result, "final")][-1] == "Yeah."
    assert len(of(result, "reply_start")) == 1
    assert session.history.turns[-1].content == REPLY


def test_stop_interrupts_without_a_new_reply() -> None:
    result, session = run([at(tone(1.0), 0.5), after(tone(0.6, 0.25), "reply_start", 1.0)])
    assert len(of(result, "interrupted")) == 1
    assert len(of(result, "reply_start")) == 1
    assert [m.role for m in session.history.turns] == ["user", "assistant"]
    assert session.state == "listening"


def test_a_stop_phrase_ends_its_turn_after_the_short_wait_of_finished_words() -> None:
    """Nothing is prepared for "stop", but its turn must still end on time: a request
    said right after it would otherwise join it into one utterance."""
    result, _ = run([at(tone(1.0), 0.5), after(tone(0.6, 0.25), "reply_start", 1.0)])
    stop_end = of(result, "speech_end")[-1]
    assert stop_end["audio_ms"] - stop_end["end_ms"] == TurnConfig().complete_silence_ms


def test_half_duplex_ignores_speech_over_the_reply() -> None:
    config = ConversationConfig(barge_in=False)
    result, _ = run([at(tone(1.0), 0.5), after(tone(1.2), "reply_start", 1.0)], config=config)
    assert not of(result, "interrupted") and not of(result, "paused")
    assert len(of(result, "reply_start")) == 1


def test_no_speculation_starts_the_llm_only_after_the_turn() -> None:
    llm = FakeLlm()
    config = ConversationConfig(speculate=False)
    result, _ = run([at(tone(1.0), 0.5)], llm=llm, config=config)
    assert not of(result, "speculation_start")
    (start,) = of(result, "reply_start")
    assert not start["speculative"] and llm.opened == 1


def test_words_whisper_gave_no_mark_wait_longer_when_asked() -> None:
    """turn.unpunctuated_silence_ms: no ".", "?", "!" or "," after the words (Whisper
    heard them go on); never shorter than the VAD's own wait, and only for such words."""
    config = TurnConfig(unpunctuated_silence_ms=1000)
    judged = judge_turn("we are just saying some words", None, config, 600)
    assert (judged.reason, judged.silence_ms) == ("unpunctuated", 1000)
    off = TurnConfig(unpunctuated_silence_ms=0)
    assert judge_turn("we are just saying some words", None, off, 600).reason == "unsure"
    assert judge_turn("we are just saying some words", None, config, 1200).silence_ms == 1200
    assert judge_turn("Some words.", None, config, 600).reason == "complete"
    assert judge_turn("some words and", None, config, 600).reason == "incomplete"
    # The word-timing guard dropped Whisper's last words and its mark: no mark says nothing.
    dropped = judge_turn("I am glad to see you again", None, config, 600, ending_dropped=True)
    assert (dropped.reason, dropped.silence_ms) == ("unsure", 600)


def test_words_that_need_more_are_waited_out() -> None:
    """A determiner ("his"), a pronoun's contracted auxiliary ("it's", "I'll": never a
    sentence's last word) is unfinished whatever mark Whisper gave; an auxiliary or a
    demonstrative with no mark ("so what I'm having is") is too, but with one it may end
    the turn ("That's what it is.", "Yes, we can.")."""
    config = TurnConfig()
    for text in ("Stuff it into you, his", "and that's", "I think you'll", "It's."):
        assert judge_turn(text, None, config, 600).reason == "incomplete", text
    for text in ("so what I'm having is", "the builder where", "So this"):
        judged = judge_turn(text, None, config, 600)
        assert (judged.reason, judged.silence_ms) == ("incomplete", 2000), text
    # The guard dropped Whisper's made-up ending after the word: no mark, more to come.
    assert judge_turn("what I'm having is", None, config, 600, True).reason == "incomplete"
    for text in ("That's what it is.", "Yes, we can.", "Is it?", "I like those!"):
        assert judge_turn(text, None, config, 600).reason == "complete", text
    assert judge_turn("so what I'm having is", None, TurnConfig(open_words=""), 600).reason == (
        "unpunctuated"
    )


def test_a_word_broken_off_before_the_pause_is_waited_out() -> None:
    """The guard found the last word begun but given too little sound for its syllables
    ("...being in [pause]" written "...being infected."): whatever the words kept look
    like, the speaker stopped inside a phrase, and gets the unfinished phrase's wait."""
    config = TurnConfig()
    # (The words kept here end on a noun: "being", an open word, would be waited out
    # on its own.)
    args = ("the lower case", None, config, 600)
    broken = judge_turn(*args, ending_dropped=True, cut_off=True)
    assert (broken.reason, broken.silence_ms) == ("cut_off", config.incomplete_silence_ms)
    assert judge_turn(*args, ending_dropped=True).reason == "unsure"
    text_off = TurnConfig(use_text=False)
    assert judge_turn("the lower case", None, text_off, 600, True, True).silence_ms == 600


def test_a_voice_held_where_it_stopped_waits_as_a_filler_whatever_the_words() -> None:
    """ "...in the original one. uhh [pause]": Whisper wrote no "uh", but the voice was
    held at one pitch where it stopped (``voice.listen.pitch``)."""
    config = TurnConfig()
    held = judge_turn("I did not say in the original one.", None, config, 600, held_s=0.3)
    assert (held.reason, held.silence_ms) == ("held", config.filler_silence_ms)
    assert judge_turn("What time is it?", None, config, 600, held_s=0.3).reason == "held"
    assert judge_turn("the original one.", None, config, 600).reason == "complete"
    end = EndOfTurn(EndpointConfig(), config, model_available=True)
    end.judge(1, "the original one.", None, model_coming=True, held_s=0.3)  # not left for it
    assert end.config.end_silence_ms == config.filler_silence_ms


def test_a_sure_end_of_turn_shortens_the_wait() -> None:
    results = {}
    for eot in (0.9, 0.0001):
        with_model = TurnConfig(use_model=True)
        result, _ = run([at(tone(1.0), 0.5)], llm=FakeLlmWithEot(eot), turn=with_model)
        (end,) = of(result, "speech_end")
        results[eot] = end["audio_ms"] - end["end_ms"]
    # A full stop and a confident model: the short wait; a doubtful model: the default.
    assert results[0.9] + 80 <= results[0.0001] < 1000


def test_words_no_model_will_judge_are_judged_alone() -> None:
    """With the model's opinion on, a turn whose words get no opinion (no reply was
    prepared for them, or asking failed) ends on its words' silence, not the longest."""

    class FailingEot(FakeLlm):
        def end_of_turn_probability(self, messages, user_text) -> float:  # type: ignore[no-untyped-def]
            raise RuntimeError("the model is gone")

    with_model = TurnConfig(use_model=True)
    waits = {}
    for name, llm, config in (
        ("no reply prepared", FakeLlmWithEot(0.0001), ConversationConfig(speculation_retries=0)),
        ("asking failed", FailingEot(), ConversationConfig()),
    ):
        result, _ = run([at(tone(1.0), 0.5)], llm=llm, config=config, turn=with_model)
        (end,) = of(result, "speech_end")
        waits[name] = end["audio_ms"] - end["end_ms"]
    longest = max(with_model.incomplete_silence_ms, with_model.filler_silence_ms)
    assert all(wait < longest - 1000 for wait in waits.values()), waits


def test_stale_generation_is_closed_when_the_speculation_is_cancelled() -> None:
    llm = FakeLlm()
    user = np.concatenate([tone(0.8), gap(0.45), tone(0.8)])
    run([at(user, 0.5)], llm=llm)
    assert llm.opened == llm.closed  # every generation opened was stopped or finished


def test_filler_plays_when_the_reply_is_late() -> None:
    class SlowLlm(FakeLlm):
        def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
            import time

            time.sleep(0.6)  # charged to the virtual clock
            yield from super().stream(messages, cancel, max_tokens)

    config = ConversationConfig(filler_after_ms=300, speculate=False)
    result, session = run([at(tone(1.0), 0.5)], llm=SlowLlm(), config=config)
    chunks = of(result, "audio_chunk")
    assert chunks[0]["seq"] == -1 and chunks[1]["seq"] == 0
    assert session.history.turns[-1].content == REPLY  # the filler is not part of the reply


@pytest.mark.parametrize(
    ("text", "eot", "expected"),
    [
        ("What is the capital of France?", 0.6, "complete"),
        ("What is the capital of", 0.0, "incomplete"),
        ("I went to the store and", None, "incomplete"),
        ("Well, um", None, "filler"),
        ("I was going to, uh", 0.9, "filler"),
        ("Turn left,", None, "incomplete"),
        ("The birch canoe slid on the smooth planks.", 0.037, "complete"),
        ("The birch canoe slid on the smooth planks.", 0.01, "unsure"),
        ("Lord, but I am glad to see you again, Phil.", 0.0, "unsure"),
        ("Tell me a joke", 0.0, "incomplete"),
        ("Will we ever forget it?", None, "complete"),
        ("What are you looking at?", None, "complete"),
        ("I love you.", None, "complete"),
        ("Then we went to the.", None, "incomplete"),
        ("Tell me a joke", 0.2, "unsure"),
        ("If it rains tomorrow.", None, "incomplete"),
        ("They said no. When it was the 673rd night.", None, "incomplete"),
        ("If it rains tomorrow, wake me up.", None, "complete"),
        ("When does the shop open?", None, "complete"),
        ("Because of the rain. I stayed home.", None, "complete"),
        ("After dinner.", None, "complete"),
        ("1. 2.", None, "numbers"),
        ("My number is 555, 0123.", None, "numbers"),
        ("Set a timer for 10.", None, "complete"),
        ("What is 2 plus 2?", None, "complete"),
        ("", None, "unsure"),
    ],
)
def test_judge_turn(text: str, eot: float | None, expected: str) -> None:
    config = TurnConfig(use_model=True)
    judged = judge_turn(text, eot, config, 600)
    assert judged.reason == expected
    waits = {
        "complete": config.complete_silence_ms,
        "incomplete": config.incomplete_silence_ms,
        "filler": config.filler_silence_ms,
        "numbers": config.numbers_silence_ms,
    }
    assert judged.silence_ms == waits.get(expected, 600)


def test_without_the_model_only_the_text_decides() -> None:
    judged = judge_turn("Lord, but I am glad to see you again, Phil.", 0.0, TurnConfig(), 600)
    assert judged.reason == "complete"


def test_same_turn_text_ignores_case_and_punctuation() -> None:
    assert same_turn_text("Hello, world.", "hello world")
    assert not same_turn_text("Hello world.", "Hello world again.")


def test_heard_text_counts_whole_chunks_and_a_share_of_the_current_one() -> None:
    playback = Playback(
        [SpokenChunk(0, "one two", 100), SpokenChunk(1, "three four five six", 400)]
    )
    assert playback.heard_text() == ""
    playback.played = 100
    assert playback.heard_text() == "one two"
    playback.played = 300
    assert playback.heard_text() == "one two three four"


def test_script_errors_are_clear(tmp_path: Path) -> None:
    from voice.errors import ConfigError

    bad = tmp_path / "s.json"
    bad.write_text('{"turns": [{"at": 1}]}')
    with pytest.raises(ConfigError, match="needs an 'audio' file"):
        Script.load(bad)
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        Script.load(bad)
    with pytest.raises(ConfigError, match="not found"):
        Script.load(tmp_path / "missing.json")
    # A recording given where a script was expected: no traceback from the UTF-8 decoder.
    binary = tmp_path / "talk.pcm"
    binary.write_bytes(b"RIFF\xcf\xff\x00")
    with pytest.raises(ConfigError, match="not valid JSON"):
        Script.load(binary)


def test_one_wav_file_is_a_script_of_one_turn(tmp_path: Path) -> None:
    from voice.audio.wav import write_wav

    write_wav(tmp_path / "Talk.WAV", tone(1.0))
    script = Script.load(tmp_path / "Talk.WAV")
    assert [(t.name, t.at_s, len(t.audio)) for t in script.turns] == [("Talk.WAV", 0.5, 16000)]


def test_a_turn_after_a_barge_in_waits_for_the_answer_to_it() -> None:
    turns = [
        at(tone(1.0), 0.5),
        after(tone(1.2), "reply_start", 1.0),
        after(tone(1.0), "reply_end", 0.5),
    ]
    result, _ = run(turns)
    ends = of(result, "reply_end")
    assert [e["interrupted"] for e in ends][:2] == [True, False]
    third = turns[2].start_sample
    assert third is not None and third / 16 == ends[1]["audio_ms"] + 500
    assert len(of(result, "reply_start")) == 3


def test_a_reply_that_cut_in_on_a_pause_does_not_place_the_next_clip() -> None:
    """The reply to the first words cuts in on the pause and is cut off by the rest of
    the clip; the next clip waits for the answer to the whole clip, not for that end."""
    first = np.concatenate([tone(1.2), gap(1.5), tone(1.2)])
    turns = [at(first, 0.5), after(tone(1.0), "reply_end", 0.5)]
    result, _ = run(turns)
    ends = of(result, "reply_end")
    assert ends[0]["interrupted"] and ends[0]["audio_ms"] < 500 + len(first) / 16
    second = turns[1].start_sample
    assert second is not None and second / 16 == ends[1]["audio_ms"] + 500
    assert not ends[1]["interrupted"]


def test_speech_over_a_reply_from_its_start_is_a_barge_in_candidate() -> None:
    """Finals are one at a time: a second turn's final never starts a second voice."""
    result, _ = run([at(tone(1.0), 0.5), after(tone(1.0), "reply_start", 0.0)])
    starts, ends = of(result, "reply_start"), of(result, "reply_end")
    for earlier, later in zip(ends, starts[1:], strict=False):
        assert earlier["audio_ms"] <= later["audio_ms"]  # never two replies at once


def test_long_sound_without_words_pauses_the_reply_once() -> None:
    """A television over the reply: it pauses, and once resume_after_ms passes without
    words the reply goes on and stays on; before, the next frame paused it again."""
    result, _ = run([at(tone(1.0), 0.5), after(tone(4.0, 0.2), "reply_start", 0.5)])
    assert len(of(result, "paused")) == 1 and len(of(result, "resumed")) == 1
    assert not of(result, "interrupted")


def test_a_reply_that_fails_while_paused_is_let_go_by_the_output(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The LLM fails while a noise holds the reply paused and everything queued has
    played: the reply ends, and the output must not keep it paused for good (the
    server's pacer then mis-timed every later pause)."""
    import voice.transports.simulate as simulate_module
    from voice.conversation.actions import Clear, Pause, Resume

    class FailsWhilePaused(FakeLlm):
        session: Session | None = None
        failed = False

        def stream(self, messages, cancel=None, max_tokens=None) -> Iterator[str]:  # type: ignore[no-untyped-def]
            yield "Hello there, my friend. "  # 2.3 s of the fake voice
            for _ in range(60 if not self.failed else 0):
                if self.session is not None and self.session._barge.paused:
                    self.failed = True
                    raise RuntimeError("the model's server went away")
                time.sleep(0.05)
                yield "la "

    actions: list[object] = []
    carry_out = simulate_module._carry_out

    def spy(outputs, speaker):  # type: ignore[no-untyped-def]
        actions.extend(o for o in outputs if isinstance(o, Pause | Resume | Clear))
        return carry_out(outputs, speaker)

    monkeypatch.setattr(simulate_module, "_carry_out", spy)
    llm = FailsWhilePaused()
    original_init = Session.__init__

    def remember(self: Session, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)  # type: ignore[arg-type]
        llm.session = self

    monkeypatch.setattr(Session, "__init__", remember)
    config = ConversationConfig(apology_text="", speculate=False)
    result, _ = run(
        [at(tone(1.0), 0.5), after(tone(0.6, 0.2), "reply_start", 2.5)], llm, config=config
    )
    assert of(result, "error") and of(result, "paused")
    paused = {a.reply_id for a in actions if isinstance(a, Pause)}
    let_go = {a.reply_id for a in actions if isinstance(a, Resume | Clear)}
    assert paused and paused <= let_go


def test_the_applications_own_words_are_said_as_given() -> None:
    """say() is not an LLM's reply: a parenthesis in it is not a stage direction."""
    llm = FakeLlm()
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    session = Session(listener, History("Be brief.", 2048, 100, llm.count_tokens))
    text = "Tickets (children free) cost 2 * 5 euros."
    session.say(text)
    shown = [o for o in session.take() if getattr(o, "type", "") == "reply_text"]
    assert [e.text for e in shown] == [text]  # type: ignore[attr-defined]


def test_a_lone_surrogate_in_typed_text_becomes_a_replacement_character() -> None:
    """JSON "\\ud83d" (a text box cut inside an emoji) decodes to a lone surrogate, which
    every engine's UTF-8 encoding would raise on."""
    llm = FakeLlm()
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    session = Session(listener, History("Be brief.", 2048, 100, llm.count_tokens))
    session.submit_text("Hello \ud83d")
    session.say("Hi \ud83d")
    texts = [getattr(o, "text", "") for o in session.take()]
    assert "Hello \ufffd" in texts and "Hi \ufffd" in texts
    for text in texts:
        text.encode("utf-8")


def test_the_speakers_own_pace_sets_the_wait_after_finished_looking_words() -> None:
    """A speaker who pauses 0.9 s inside their turn has not finished after 0.5 s of
    silence: with turn.use_pace the next pause of theirs is waited out (without it, a
    reply starts in it and the continuation joins the turn again)."""
    user = np.concatenate([tone(1.2), gap(0.9), tone(1.2), gap(0.7), tone(1.2)])
    continued = {}
    for pace in (False, True):
        turn = TurnConfig(use_pace=pace, pace_min_pauses=1, patience_max_ms=0)
        result, _ = run([at(user, 0.5)], turn=turn)
        continued[pace] = len(of(result, "turn_continued"))
        (final,) = [e for e in of(result, "final") if e["text"]][-1:]
        assert final["text"].count(".") == 1  # answered as one turn either way
    assert continued[False] == 2 and continued[True] == 1


def test_pauses_the_user_went_on_after_twice_are_waited_out_from_then_on() -> None:
    """Replies started in the speaker's 0.9 s and 0.8 s pauses and they went on both
    times: that is how they pause, and their next pause (0.7 s) is waited out. Without
    the learned patience a reply starts in it too and the turn is joined three times."""
    user = np.concatenate(
        [tone(1.0), gap(0.9), tone(1.0), gap(0.8), tone(1.0), gap(0.7), tone(1.0)]
    )
    continued = {}
    for most in (0, 1000):
        result, _ = run([at(user, 0.5)], turn=TurnConfig(patience_max_ms=most))
        continued[most] = len(of(result, "turn_continued"))
        assert len(of(result, "reply_start")) == continued[most] + 1  # one answer at the end
    assert continued[0] == 3 and continued[1000] == 2


def test_the_learned_patience_relaxes_after_a_turn_that_ended_where_it_seemed_to() -> None:
    """Learned from the first turn's 0.9 s pause (1000 ms; one join is enough here), it
    waits out the second turn's 0.8 s pause; that turn is answered whole with no join,
    so the patience relaxes to 750 ms, and the third turn's 0.8 s pause is taken again
    (and joined)."""

    def turn_with_pause(pause_s: float) -> np.ndarray:
        return np.concatenate([tone(1.2), gap(pause_s), tone(1.2)])

    turns = [
        at(turn_with_pause(0.9), 0.5),
        after(turn_with_pause(0.8), "reply_end", 1.0),
        after(turn_with_pause(0.8), "reply_end", 1.0),
    ]
    result, session = run(turns, turn=TurnConfig(patience_after_joins=1, patience_max_ms=1000))
    joined = [e["continues"] for e in of(result, "turn_continued")]
    starts = [e["utterance_id"] for e in of(result, "speech_start")]
    assert len(starts) == 5  # the second turn is one utterance: its pause was waited out
    assert joined == [starts[0], starts[3]]  # the first and third turns were joined
    assert session.end_of_turn.patience_ms == 900  # learned again: 0.8 s and the margin


def test_a_new_visitor_is_not_given_the_patience_the_last_one_taught() -> None:
    """Replies started in the speaker's 0.9 s and 0.8 s pauses and they went on both
    times, so their finished-looking words wait longer; the kiosk's next visitor
    (Session.reset) starts from the plain wait."""
    user = np.concatenate([tone(1.0), gap(0.9), tone(1.0), gap(0.8), tone(1.0)])
    result, session = run([at(user, 0.5)])
    assert len(of(result, "turn_continued")) == 2
    assert session.end_of_turn.patience_ms == TurnConfig().patience_max_ms
    session.reset()
    assert session.end_of_turn.patience_ms == 0


def test_learned_patience_is_a_habit_bounded_and_relaxes() -> None:
    """Learned from two joins, at most patience_max_ms, halving as turns end where they
    seemed to, and undone by a join that was a misheard stop."""
    endpoint = EndpointConfig(end_silence_ms=600)
    turn = TurnConfig(complete_silence_ms=500, patience_max_ms=1000, patience_margin_ms=100)
    end = EndOfTurn(endpoint, turn, False)
    end.observe_joined_pause(1, 700)
    end.judge(1, "It was clear.", None)
    assert endpoint.end_silence_ms == 500  # one pause taken too soon: not yet a habit
    end.observe_joined_pause(2, 600)
    end.judge(2, "It was clear.", None)
    assert endpoint.end_silence_ms == 800  # two: the longer of them, and a margin
    end.judge(3, "It was and", None)
    assert endpoint.end_silence_ms == turn.incomplete_silence_ms  # never shorter
    end.observe_joined_pause(3, 2500)
    assert end.patience_ms == 1000  # a long pause: at most patience_max_ms
    waits = []
    for _ in range(5):
        end.turn_answered()
        waits.append(end.patience_ms)
    assert waits == [750, 625, 562, 531, 0]  # the extra halves, then is gone
    end.observe_joined_pause(4, 700)
    assert end.patience_ms == 0  # ... and the joins are counted from none again
    end.observe_joined_pause(5, 800)
    assert end.patience_ms == 900
    end.forget_join(5)  # that join was a "stop" misheard as more of the turn
    assert end.patience_ms == 0
    end.observe_joined_pause(6, 900)
    end.observe_joined_pause(7, 900)
    end.forget_speaker()  # someone else speaks now
    assert end.patience_ms == 0
    end.observe_joined_pause(8, 900)
    assert end.patience_ms == 0  # ... and one join is not their habit yet
    off = EndOfTurn(EndpointConfig(), TurnConfig(patience_max_ms=0), False)
    off.observe_joined_pause(6, 900)
    off.observe_joined_pause(7, 900)
    assert off.patience_ms == 0


def test_pace_is_a_percentile_of_the_pauses_seen_and_bounded() -> None:
    endpoint = EndpointConfig(end_silence_ms=600)
    end = EndOfTurn(endpoint, TurnConfig(use_pace=True, pace_max_ms=1200), False)
    end.observe_pause(150)  # too short to be a pause
    end.observe_pause(400)
    assert end.pace_ms() is None  # one pause: not yet a pace
    end.observe_pause(700)
    end.observe_pause(900)
    assert end.pace_ms() == 900  # the 75th percentile of 400, 700, 900
    end.judge(1, "It was clear.", None)
    assert endpoint.end_silence_ms == 900 and end.silence_used(1) == 900
    end.judge(2, "It was and", None)
    assert endpoint.end_silence_ms == TurnConfig().incomplete_silence_ms  # never shorter
    end.observe_pause(5000)
    end.observe_pause(5000)
    assert end.pace_ms() == 1200
    end.forget_speaker()  # someone else speaks now: their pace is not known yet
    assert end.pace_ms() is None
    off = EndOfTurn(EndpointConfig(), TurnConfig(), False)
    off.observe_pause(900)
    off.observe_pause(900)
    assert off.pace_ms() is None
