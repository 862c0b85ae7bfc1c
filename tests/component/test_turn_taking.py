"""Turn-taking on speech with real pauses, through the real models (Whisper, SmolLM2,
Piper): a hesitation is waited out, a continuation after an early reply is heard and
answered as one turn, and the first turn is as fast as the next. The rates over whole
sets are in ``voice bench turns``; these check the behaviour on single cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import clip

from voice.app.build import build_session, load_engines
from voice.bench.turnsets import room_tone, splice
from voice.config import Settings
from voice.conversation.session import Session
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate


def settings() -> Settings:
    s = Settings()
    s.llm.max_reply_tokens = 40
    s.llm.temperature = 0.0  # the same reply every run
    s.tts.variation = False  # the same voice every run: replies as long, turns placed alike
    return s


@pytest.fixture(scope="module")
def engines() -> Engines:
    return load_engines(settings())


def converse(
    engines: Engines, turns: list[ScriptTurn], config: Settings | None = None
) -> tuple[SimulationResult, Session]:
    session = build_session(config or settings(), engines)
    return simulate(Script(turns), session, engines, repeatable=True), session


def of(result: SimulationResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


def paused_turn(
    engines: Engines, name: str, after_s: float, pause_s: float
) -> tuple[SimulationResult, Session, list[dict[str, Any]]]:
    """A corpus sentence with a pause of its own room tone spliced in at a word boundary
    (``after_s``: a word's end, found once with faster-whisper's word timestamps), played
    as one turn; and the replies that started before the user went on."""
    audio = splice(clip(name, lead_s=0.0), after_s, pause_s)
    result, session = converse(engines, [ScriptTurn(audio=audio, name=name, at_s=0.5)])
    resumed_ms = 500 + (after_s + pause_s) * 1000
    early = [e for e in of(result, "reply_start") if e["audio_ms"] < resumed_ms]
    return result, session, early


def words(text: str) -> str:
    return " ".join("".join(c for c in w.lower() if c.isalnum()) for w in text.split())


def test_a_hesitation_after_the_is_waited_out(engines: Engines) -> None:
    # "Mister Quilter is the [1.5 s] apostle of the middle classes and we are glad to
    # welcome his gospel": at the pause Whisper tends to finish the sentence ("is the
    # 600."), which the text rule would take for a whole turn.
    result, session, early = paused_turn(
        engines, "librispeech_1272-128104-0000", after_s=1.68, pause_s=1.5
    )
    assert not early, early
    (final,) = of(result, "final")
    assert "quilter is the apostle" in words(final["text"])
    assert "gospel" in words(final["text"])
    assert words(session.history.turns[0].content) == words(final["text"])


def test_a_pause_whisper_would_finish_for_the_user_is_waited_out(engines: Engines) -> None:
    # "He hoped there would be stew for [1 s] dinner, turnips and ...": at the pause
    # Whisper hears "He hoped there would be stew for dinner." (a whole sentence, which
    # alone would end the turn after 500 ms); the word timings show "dinner" was not said.
    result, _, early = paused_turn(
        engines, "librispeech_1089-134686-0000", after_s=2.12, pause_s=1.0
    )
    assert not early, early
    assert not of(result, "turn_continued")
    assert "turnips and carrots" in words(of(result, "final")[-1]["text"])


def test_a_word_broken_off_at_the_pause_is_waited_out(engines: Engines) -> None:
    # "...the lower case being in [1.5 s] fact invented in the early Middle Ages": at the
    # pause Whisper hears "...the lower case being infected.", a word where one was
    # said (so no word is aligned after the speech), but three syllables in the sound
    # of "in": the speaker stopped inside a phrase, and is waited for.
    result, session, early = paused_turn(engines, "ljspeech_LJ001-0020", after_s=1.66, pause_s=1.5)
    assert not early, early
    assert not of(result, "turn_continued")
    answered = words(session.history.turns[0].content)
    assert "lower case" in answered and "middle ages" in answered


def test_a_hesitation_after_his_is_waited_out(engines: Engines) -> None:
    # "Stuff it into you, his [1.3 s] belly counselled him": at the pause Whisper hears
    # "...into you, his bet.", and the word timings show "bet" was not said; the words
    # left end on a possessive, which no turn ends on. (Found by voice bench turns'
    # held-out hesitations: "his" was not among the unfinished words.)
    result, session, early = paused_turn(
        engines, "librispeech_1089-134686-0001", after_s=1.94, pause_s=1.3
    )
    assert not early, early
    assert not of(result, "turn_continued")
    answered = words(session.history.turns[0].content)
    assert "you his" in answered and "counsel" in answered


def test_words_invented_past_the_speech_are_not_taken_for_its_end(engines: Engines) -> None:
    # "...save in our own land. Then they sailed on [1.5 s] till they came to the city":
    # at the pause Whisper hears "...sailed on to the land.", and its alignment puts
    # "the land." in one frame a second past the speech, where no word was said. (Found
    # by voice bench turns' third hesitation set; the reader's own pause after "land."
    # may be taken, as a person might.)
    _, session, early = paused_turn(
        engines, "librispeech_8266-258262-0001", after_s=5.1, pause_s=1.5
    )
    resumed_ms = 500 + (5.1 + 1.5) * 1000
    in_pause = [e for e in early if e["audio_ms"] >= resumed_ms - 1500]
    assert not in_pause, early
    answered = words(session.history.turns[-2].content)
    assert "sailed on" in answered and "city" in answered


def test_going_on_after_an_early_reply_is_answered_as_one_turn(engines: Engines) -> None:
    # Two whole sentences of one speaker 0.7 s apart: the first looks finished, so a
    # reply starts; the second continues the turn, which is heard again and answered
    # whole. The history holds no fragment and no half-heard reply.
    first = clip("librispeech_1089-134691-0000", lead_s=0.0)  # "He could wait no longer."
    second = clip("librispeech_1089-134686-0001", lead_s=0.0)  # "Stuff it into you, ..."
    audio = np.concatenate([first, room_tone(first, 0.7), second])
    result, session = converse(engines, [ScriptTurn(audio=audio, name="pair", at_s=0.5)])
    (continued,) = of(result, "turn_continued")
    assert continued["heard_ms"] < 1500  # by the pause; a second or less by the onset
    answered = of(result, "reply_start")[-1]
    assert "wait no longer" in words(answered["text"]) and "belly" in words(answered["text"])
    assert answered["reply_id"] != continued["reply_id"]
    users = [m.content for m in session.history.turns if m.role == "user"]
    assert len(users) == 1 and words(users[0]) == words(answered["text"])


def test_going_on_more_than_a_second_into_the_reply_is_answered_as_one_turn(
    engines: Engines,
) -> None:
    # Two sentences 2.2 s apart: over a second of the reply has played when the second
    # begins, so its first word does not join it (a "stop" can read "start." in a first
    # partial); the reply stays paused, and three words join the turn. The gap leaves
    # 1.2-1.7 s of reply with the reply starting 0.5-1.0 s after the first sentence (the
    # AVX-512 and the AVX2 machine; 1.8 s left the slower one at 0.8 s, under the limit).
    first = clip("ljspeech_LJ001-0009", lead_s=0.0)  # "Printing, then, ... movable types."
    second = clip("ljspeech_LJ001-0013", lead_s=0.0)  # "... with ugly ones."
    audio = np.concatenate([first, room_tone(first, 2.2), second])
    result, session = converse(engines, [ScriptTurn(audio=audio, name="pair", at_s=0.5)])
    (continued,) = of(result, "turn_continued")
    assert continued["heard_ms"] > 1000
    assert not of(result, "resumed")  # not over the user's words
    answered = of(result, "reply_start")[-1]
    assert "movable types" in words(answered["text"]) and "ugly" in words(answered["text"])
    users = [m.content for m in session.history.turns if m.role == "user"]
    assert len(users) == 1 and words(users[0]) == words(answered["text"])


def test_a_meeting_turn_is_cut_in_on_at_most_once(engines: Engines) -> None:
    """An AMI meeting turn (one headset microphone, 17.8 s of spontaneous speech with 8
    pauses of 0.2 s or more, others heard faintly in the background), measured as
    ``voice bench turns`` measures it: at most one reply starts to play inside it."""
    from pathlib import Path

    from voice.bench.turns import run_item
    from voice.bench.turnsets import build_conversation

    folder = Path(__file__).parents[1] / "corpus" / "conversation"
    (item,) = [i for i in build_conversation(folder) if i.name == "ami-es2004-FEE013-7.4s"]
    row = run_item(item, settings(), engines)
    assert row["mid_turn_pauses"] >= 5
    assert row["cut_ins"] <= 1, row.get("timeline")


def test_a_pause_after_a_drawn_out_word_is_waited_out(engines: Engines) -> None:
    """A spontaneous monologue (the corpus's MFA recording): "we're just saying some
    wooords [1.16 s] and here's some more words". Whisper hears "We're just saying some
    words.", a whole sentence; only the voice held at one pitch for half a second says
    the speaker was still going. The same audio with the held voice not heard is cut in
    on: the rule is what waits."""
    from pathlib import Path

    from voice.audio import read_wav

    path = Path(__file__).parents[1] / "corpus" / "conversation" / "mfa_acoustic_corpus.wav"
    start_s, held_end_s, resumed_s, end_s = 14.6, 17.19, 18.35, 21.05  # its TextGrid
    audio = read_wav(path)[int(start_s * 16000) : int(end_s * 16000)]
    turn = [ScriptTurn(audio=audio, name="mfa-acoustic", at_s=0.5)]

    def replies_in_pause(config: Settings) -> tuple[SimulationResult, list[dict[str, Any]]]:
        result, _ = converse(engines, turn, config)
        pause_ms = [(0.5 + s - start_s) * 1000 for s in (held_end_s, resumed_s)]
        starts = of(result, "reply_start")
        return result, [e for e in starts if pause_ms[0] < e["audio_ms"] < pause_ms[1]]

    result, early = replies_in_pause(settings())
    assert not early, early
    answered = words(of(result, "reply_start")[-1]["text"])
    assert "some words and" in answered and "more words" in answered
    not_heard = settings()
    not_heard.turn.held_sound_ms = 0
    assert replies_in_pause(not_heard)[1]


def test_the_first_turn_is_as_fast_as_the_second() -> None:
    """Freshly loaded (and so warmed) engines: the first turn pays no start-up cost."""
    fresh = load_engines(settings())
    # Two whole sentences of about 3 s (not the same one twice: its reply would be the
    # same, and a reply that repeats the last one is not said).
    one, two = "cmu_arctic_axb_a0004", "cmu_arctic_aew_a0003"
    turns = [
        ScriptTurn(audio=clip(one, lead_s=0.0), name=one, at_s=0.5),
        ScriptTurn(audio=clip(two, lead_s=0.0), name=two, after="reply_end", delay_s=1.0),
    ]
    result, _ = converse(fresh, turns)
    first, second = (m["voice_to_voice_ms"] for m in of(result, "turn_metrics"))
    assert first is not None and second is not None
    assert first <= 1.5 * second + 100, (first, second)
