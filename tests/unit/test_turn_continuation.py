"""One turn, however many pauses: the continuation rule and the session's merge, on
scripted timelines with the fake engines of test_conversation_core (pure logic; the
same behaviour through the real models is in tests/component/test_turn_taking.py)."""

from __future__ import annotations

import numpy as np
import pytest
from test_conversation_core import REPLY, FakeAsr, FakeLlm, after, at, gap, of, run, tone

from voice.conversation.continuation import Continuation, Joined
from voice.conversation.turns import TurnConfig
from voice.listen.whisper import Transcription


def test_speech_soon_after_the_turn_over_a_barely_heard_reply_is_a_candidate() -> None:
    rule = Continuation(enabled=True, window_ms=3000, max_heard_ms=1000)
    rule.on_speech_start(7, onset_ms=4000, answered=6, turn_end_ms=2000, heard_ms=400)
    assert rule.previous_of(7, played_ms=500) == 6
    assert rule.previous_of(7, played_ms=500) is None  # asked once


def test_too_late_too_much_heard_a_said_reply_or_off_is_no_candidate() -> None:
    cases = [
        dict(onset_ms=5500, answered=6, turn_end_ms=2000, heard_ms=0),  # past the window
        dict(onset_ms=3000, answered=6, turn_end_ms=2000, heard_ms=1200),  # heard enough
        dict(onset_ms=3000, answered=-1, turn_end_ms=None, heard_ms=0),  # a greeting
        dict(onset_ms=3000, answered=-3, turn_end_ms=2000, heard_ms=0),  # a typed turn
    ]
    for case in cases:
        rule = Continuation(enabled=True, window_ms=3000, max_heard_ms=1000)
        rule.on_speech_start(7, **case)  # type: ignore[arg-type]
        assert rule.previous_of(7, played_ms=0) is None, case
    off = Continuation(enabled=False, window_ms=3000, max_heard_ms=1000)
    off.on_speech_start(7, onset_ms=2100, answered=6, turn_end_ms=2000, heard_ms=0)
    assert off.previous_of(7, played_ms=0) is None


def test_speech_over_a_reply_heard_a_little_longer_is_a_late_candidate() -> None:
    rule = Continuation(enabled=True, window_ms=3000, max_heard_ms=1000, late_max_heard_ms=1500)
    rule.on_speech_start(7, onset_ms=3500, answered=6, turn_end_ms=2000, heard_ms=1300)
    assert rule.is_late(7) and not rule.is_late(8)
    assert rule.previous_of(7, played_ms=1300) == 6
    rule.on_speech_start(8, onset_ms=3500, answered=6, turn_end_ms=2000, heard_ms=400)
    assert not rule.is_late(8)  # barely heard: its first words decide
    for limit, heard in ((1500, 1600), (0, 1300)):  # heard too long; no such joins
        rule = Continuation(True, window_ms=3000, max_heard_ms=1000, late_max_heard_ms=limit)
        rule.on_speech_start(9, onset_ms=3500, answered=6, turn_end_ms=2000, heard_ms=heard)
        assert rule.previous_of(9, played_ms=heard) is None, (limit, heard)


def test_a_two_second_hesitation_after_finished_looking_words_joins_the_turn() -> None:
    """The issue's hesitations run to 2 s. After words that look finished the reply
    starts 0.5 s into the pause, so the user who goes on has heard 1.5 s of it, and
    the VAD hears their onset a syllable later: 1.8 s here joins by default, not with
    the limit as it was (1.5 s)."""
    script = [at(tone(1.0), 0.5), after(tone(0.8), "reply_start", 1.8)]
    result, _ = run(script)
    (continued,) = of(result, "turn_continued")
    assert 1500 < continued["heard_ms"] <= TurnConfig().continue_late_max_heard_ms
    assert of(result, "reply_start")[-1]["text"].startswith("one two three four five six")
    result, _ = run(script, turn=TurnConfig(continue_late_max_heard_ms=1500))
    assert not of(result, "turn_continued")


def test_going_on_after_more_than_a_second_of_reply_joins_the_turn_on_three_words() -> None:
    """1.3 s of the reply heard: a first word does not cut it (a "stop" can read "start."
    in its first partial); it stays paused, without resuming over the words, and joins
    the turn once a partial has three words, or on the final if it never has."""
    for seconds, on_final in ((0.8, False), (0.45, True)):  # "one two three four,"; "one two,"
        result, session = run([at(tone(1.0), 0.5), after(tone(seconds), "reply_start", 1.3)])
        (continued,) = of(result, "turn_continued")
        assert 1000 < continued["heard_ms"] <= 1500
        (paused,) = of(result, "paused")
        assert not of(result, "resumed")
        (cut,) = [e["audio_ms"] for e in of(result, "interrupted")]
        second_final = of(result, "final")[1]["audio_ms"]
        assert (cut == second_final) == on_final, seconds
        if on_final:  # judged while the reply waited: "one two," waits as unfinished
            end = of(result, "speech_end")[1]
            assert end["audio_ms"] - end["end_ms"] == TurnConfig().incomplete_silence_ms
        assert not result.played[int((paused["audio_ms"] + 20) * 16) : int(cut * 16)].any()
        finals = [e["text"] for e in of(result, "final")]
        assert finals[-1].startswith("one two three four five six")
        assert of(result, "reply_start")[-1]["text"] == finals[-1]
        assert [m.content for m in session.history.turns] == [finals[-1], REPLY]


def test_a_stop_over_a_reply_heard_a_little_longer_stops_it_at_once() -> None:
    result, _ = run([at(tone(1.0), 0.5), after(tone(0.6, 0.25), "reply_start", 1.3)])
    assert not of(result, "turn_continued")
    (interrupted,) = of(result, "interrupted")
    assert interrupted["audio_ms"] < of(result, "final")[-1]["audio_ms"]  # on its partial
    assert len(of(result, "reply_start")) == 1


def test_words_that_come_after_the_reply_was_heard_out_are_no_continuation() -> None:
    rule = Continuation(enabled=True, window_ms=3000, max_heard_ms=1000)
    rule.on_speech_start(7, onset_ms=2500, answered=6, turn_end_ms=2000, heard_ms=0)
    assert rule.previous_of(7, played_ms=1500) is None  # resumed and played on meanwhile
    rule.on_speech_start(8, onset_ms=2500, answered=6, turn_end_ms=2000, heard_ms=0)
    assert rule.previous_of(8, played_ms=None) is None  # the reply is over
    rule.on_speech_start(9, onset_ms=2500, answered=6, turn_end_ms=2000, heard_ms=0)
    rule.forget(9)
    assert rule.previous_of(9, played_ms=0) is None


def test_a_reply_that_resumed_before_the_words_counts_all_it_played() -> None:
    """Speech with no words yet over a reply not heard at all; the reply resumed in a
    gap of it and played on. Its words then join as a late candidate's would, up to
    the late limit of reply heard in all."""
    for played, late, joins in ((600, False, True), (1200, True, True), (1600, True, False)):
        rule = Continuation(True, window_ms=3000, max_heard_ms=1000, late_max_heard_ms=1500)
        rule.on_speech_start(7, onset_ms=2500, answered=6, turn_end_ms=2000, heard_ms=0)
        assert not rule.is_late(7)  # nothing heard by its onset
        assert rule.is_late(7, played_ms=played) == late, played
        assert (rule.previous_of(7, played_ms=played) == 6) == joins, played
    rule = Continuation(True, window_ms=3000, max_heard_ms=1000, late_max_heard_ms=1500)
    rule.on_speech_start(7, onset_ms=3300, answered=6, turn_end_ms=2000, heard_ms=900,
                         played_ms=1100)  # fmt: skip
    assert not rule.is_late(7, played_ms=1150)  # detected a syllable late: 950 ms heard


def test_going_on_after_an_early_reply_merges_the_turn_and_answers_it_whole() -> None:
    # "one .. five." (a finished-looking turn), a reply starts, and the user goes on.
    result, session = run([at(tone(1.0), 0.5), after(tone(0.8), "reply_start", 0.1)])
    (continued,) = of(result, "turn_continued")
    finals = [e["text"] for e in of(result, "final")]
    assert finals[0] == "one two three four five."
    # The whole turn's audio heard again as one: 1.8 s of speech, nine words.
    assert finals[-1] == "one two three four five six seven eight nine."
    first, last = of(result, "reply_start")[0], of(result, "reply_start")[-1]
    assert continued["reply_id"] == first["reply_id"] and continued["heard_ms"] <= 1000
    assert last["text"] == finals[-1] and not of(result, "turn_restored")  # no stop
    # The history holds the whole turn and its answer; no fragment, no half reply.
    assert [m.content for m in session.history.turns] == [finals[-1], REPLY]


def test_words_that_first_come_with_the_final_are_heard_again_with_the_turn() -> None:
    # 0.45 s of speech ends before any partial has words: the merge happens at its final.
    result, session = run([at(tone(1.0), 0.5), after(tone(0.45), "reply_start", 0.1)])
    assert of(result, "turn_continued")
    finals = [e["text"] for e in of(result, "final")]
    assert finals[-1] == "one two three four five six seven."
    assert of(result, "reply_start")[-1]["text"] == finals[-1]
    assert [m.content for m in session.history.turns] == [finals[-1], REPLY]


def test_a_stop_over_a_barely_heard_reply_stops_it_and_merges_nothing() -> None:
    result, _ = run([at(tone(1.0), 0.5), after(tone(0.6, 0.25), "reply_start", 0.1)])
    assert not of(result, "turn_continued")
    assert of(result, "interrupted")
    assert len(of(result, "reply_start")) == 1


def test_the_words_a_joined_turn_adds_are_those_after_its_own() -> None:
    joined = Joined("Another engineer rushed toward the door to see.", "Sure,", 1, 1)
    # Heard again, the pass rewords the turn ("to" -> "too") and drops its mark.
    whole = "Another engineer rushed toward the door too, stop."
    assert joined.added_words(whole) == ["too stop", "stop"]
    assert joined.added_words("Another engineer rushed toward the door to see") == []
    assert joined.added_words("Another engineer rushed toward the door to see what") == ["what"]
    assert joined.added_words("Something else entirely.")[0] == "something else entirely"


class StopFirstHeardAsStart(FakeAsr):
    """A "stop" (audio at 0.25) reads "Start." on its own, as a first partial of it
    has (through the real models on a loaded machine a misheard "Stop!" was joined to
    its turn); heard again after the turn it was said over, it reads "stop." after
    that turn's words."""

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        level = np.abs(audio)
        if not ((level > 0.22) & (level < 0.27)).any():
            return super().transcribe(audio, context, with_timestamps, final)
        turn = audio[level > 0.27]
        if not len(turn):
            return Transcription(words=["Start."])
        return Transcription(words=[*super().transcribe(turn).words, "stop."])


def test_a_stop_misheard_by_its_first_partial_still_stops_after_the_join() -> None:
    for delay_s, heard in ((0.5, "Sure,"), (0.1, "")):
        result, session = run(
            [at(tone(1.0), 0.5), after(tone(0.6, 0.25), "reply_start", delay_s)],
            asr=StopFirstHeardAsStart(),
            turn=TurnConfig(patience_after_joins=1),
        )
        assert of(result, "turn_continued")  # "Start." joined the turn on its first partial
        assert of(result, "final")[-1]["text"] == "one two three four five. stop."
        (start,) = of(result, "reply_start")  # and the whole turn, ending in "stop", is
        (end,) = of(result, "reply_end")  # not answered again
        assert end["heard_text"] == heard
        # The exchange stays as far as it was heard, as after any stop (nothing of it
        # when nothing of the reply was heard).
        kept = [start["text"], heard] if heard else []
        assert [m.content for m in session.history.turns] == kept, delay_s
        # ... and the client is told, to show the exchange again with the stop after it.
        (restored,) = of(result, "turn_restored")
        (continued,) = of(result, "turn_continued")
        assert restored["utterance_id"] == of(result, "final")[-1]["utterance_id"]
        assert (restored["continues"], restored["reply_id"]) == (
            continued["continues"], start["reply_id"]
        )  # fmt: skip
        assert (restored["user_text"], restored["heard_text"]) == (start["text"], heard)
        assert restored["stop_text"] == "stop"
        # A stop is no pause of the user's: the join teaches the end of turn nothing.
        assert session.end_of_turn.patience_ms == 0


class ButLostWhenHeardAgain(FakeAsr):
    """A continuation (audio at 0.12) reads "But" on its own; heard again with the turn
    it continues, the pass loses it (through the real models, "...paced up and down,
    waiting, but [0.7 s] he" heard again as "...up and down, waiting.")."""

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        level = np.abs(audio)
        if not ((level > 0.1) & (level < 0.15)).any():
            return super().transcribe(audio, context, with_timestamps, final)
        turn = audio[level > 0.27]
        return super().transcribe(turn) if len(turn) else Transcription(words=["But"])


def test_words_the_continuation_said_that_the_whole_turn_lost_are_kept() -> None:
    """The turn as heard again would read finished, and be answered 500 ms into the
    pause after "but"; with the continuation's own word kept it ends on "but", which
    no turn ends on: waited out, and answered whole."""
    turn = TurnConfig()
    result, session = run(
        [at(tone(1.0), 0.5), after(tone(0.3, 0.12), "reply_start", 0.1)],
        asr=ButLostWhenHeardAgain(), turn=turn,
    )  # fmt: skip
    assert of(result, "turn_continued")
    # The pass lost "But"; the turn's final, what the user is shown, keeps it.
    assert of(result, "final")[-1]["text"] == "one two three four five. But"
    answer = of(result, "reply_start")[-1]
    assert answer["text"] == "one two three four five. But"
    (end,) = [e for e in of(result, "speech_end") if e["utterance_id"] == answer["utterance_id"]]
    assert answer["audio_ms"] - end["end_ms"] >= turn.incomplete_silence_ms
    assert session.history.turns[0].content == "one two three four five. But"
    # A whole turn heard again with words of its own keeps them, and gains none.
    joined = Joined("one two.", "", 1, 1, went_on="But")
    assert joined.with_lost_words("one two. But then three.") == "one two. But then three."


def test_a_cough_over_a_barely_heard_reply_lets_it_play_on() -> None:
    result, _ = run([at(tone(1.0), 0.5), after(tone(0.1), "reply_start", 0.1)])
    assert not of(result, "turn_continued") and not of(result, "interrupted")
    (end,) = of(result, "reply_end")
    assert end["heard_text"] == REPLY


def test_going_on_after_a_reply_heard_out_is_a_new_turn() -> None:
    result, session = run([at(tone(1.0), 0.5), after(tone(0.8), "reply_end", 0.3)])
    assert not of(result, "turn_continued")
    assert [e["text"] for e in of(result, "final")] == [
        "one two three four five.", "one two three four,"
    ]  # fmt: skip
    assert len(session.history.turns) == 4


def test_merging_can_be_turned_off() -> None:
    result, _ = run(
        [at(tone(1.0), 0.5), after(tone(0.8), "reply_start", 0.1)],
        turn=TurnConfig(continue_turns=False),
    )
    assert not of(result, "turn_continued")
    assert of(result, "interrupted")  # an ordinary barge-in


def test_going_on_before_the_reply_has_started_is_merged_too() -> None:
    """A fixed 600 ms end (no judgement to wait for) and a slow final pass (0.7 s of
    compute, charged to the clock): the user already speaks again when the final of the
    first part comes and its reply starts."""
    import time

    from conftest import LoudIsSpeech
    from test_conversation_core import FakeAsr, FakeLlm, FakeTts

    from voice.conversation.session import Session
    from voice.conversation.turns import TurnConfig
    from voice.listen.endpoint import EndpointConfig
    from voice.listen.listener import ListenConfig, Listener
    from voice.reply.history import History
    from voice.runtime.engines import Engines
    from voice.transports.simulate import Script, simulate

    class SlowFinals(FakeAsr):
        def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
            if final:
                time.sleep(0.7)
            return super().transcribe(audio, context, with_timestamps, final)

    llm = FakeLlm()
    engines = Engines(asr=SlowFinals(), llm=llm, tts=FakeTts())
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    history = History("Be brief.", 2048, 100, llm.count_tokens)
    session = Session(listener, history, turn=TurnConfig(use_text=False))
    result = simulate(Script([at(tone(1.0), 0.5), at(tone(0.8), 2.1)]), session, engines)
    speech_starts = [e["audio_ms"] for e in of(result, "speech_start")]
    assert of(result, "reply_start")[0]["audio_ms"] > speech_starts[1]  # the case in point
    assert of(result, "turn_continued")
    finals = [e["text"] for e in of(result, "final")]
    assert finals[-1] == "one two three four five six seven eight nine."
    assert of(result, "reply_start")[-1]["text"] == finals[-1]
    assert [m.content for m in session.history.turns] == [finals[-1], REPLY]


def test_new_speech_over_a_paused_reply_gets_its_own_wait_for_words() -> None:
    """Paused for one sound, then a second utterance 1.5 s later: the reply must not
    resume at once over it (the wait was counted from the first pause)."""
    from voice.conversation.bargein import BargeIn

    barge = BargeIn(80, 1500, 300, lambda text: bool(text))
    assert barge.on_speech_start(1, now_ms=1000) == "pause"
    barge.paused_now(1000, 980)
    assert barge.on_final(1, "", 0.0) == "resume"
    barge.paused_now(1000, 980)  # say the session kept it paused (a hair-trigger run)
    assert barge.on_speech_start(2, now_ms=2500) is None
    assert barge.on_frame(2520, run_ms=40, speaking=True) is None
    assert barge.on_frame(4000, run_ms=40, speaking=True) == "resume"  # 1.5 s of its own
    barge.hold()  # words that may continue the turn: more of them decide
    assert barge.on_frame(6000, run_ms=40, speaking=True) is None
    assert barge.on_final(2, "five six", 0.0) == "interrupt"


def test_wordless_speech_that_may_continue_the_turn_is_not_talked_over() -> None:
    """Speech soon after the turn, over a reply barely heard (patient): with no words after
    1.5 s the reply resumes only in a gap of it (or after 3 s of one run: not speech), and
    its next run pauses the reply again. Other speech (a television) resumes it on the
    timer, for the rest of that speech."""
    from voice.conversation.bargein import PATIENT_GAP_MS, PATIENT_RUN_MAX_MS, BargeIn

    barge = BargeIn(80, 1500, 300, lambda text: bool(text))
    assert barge.on_speech_start(1, now_ms=1000, patient=True) == "pause"
    barge.paused_now(1000, 980)
    assert barge.on_frame(2600, run_ms=400, speaking=True) is None  # still speaking
    assert barge.on_frame(2600 + PATIENT_GAP_MS - 20, run_ms=0, speaking=True) is None
    assert barge.on_frame(2600 + PATIENT_GAP_MS, run_ms=0, speaking=True) == "resume"
    barge.resumed()
    assert barge.on_frame(3000, run_ms=0, speaking=True) is None  # still in their gap
    assert barge.on_frame(3200, run_ms=80, speaking=True) == "pause"  # they went on
    # One run with no gap for 3 s is not speech (music): resumed over, not paused by.
    music = BargeIn(80, 1500, 300, lambda text: bool(text))
    assert music.on_speech_start(1, now_ms=1000, patient=True) == "pause"
    music.paused_now(1000, 980)
    assert music.on_frame(2600, run_ms=1700, speaking=True) is None
    resumed = music.on_frame(1000 + PATIENT_RUN_MAX_MS, run_ms=PATIENT_RUN_MAX_MS, speaking=True)
    assert resumed == "resume"
    music.resumed()
    assert music.on_frame(4100, run_ms=3200, speaking=True) is None
    television = BargeIn(80, 1500, 300, lambda text: bool(text))
    assert television.on_speech_start(1, now_ms=1000) == "pause"
    television.paused_now(1000, 980)
    assert television.on_frame(2600, run_ms=400, speaking=True) == "resume"
    television.resumed()
    assert television.on_frame(2620, run_ms=420, speaking=True) is None


def test_a_mumbled_continuation_pauses_the_reply_while_it_is_spoken() -> None:
    """Speech just after the turn in which the recogniser finds no words (a quiet mumble,
    3.5 s with a 0.5 s gap): the reply plays in the gap, not over the speech."""
    mumble = np.concatenate([tone(2.0, 0.04), gap(0.5), tone(1.5, 0.04)])
    result, _ = run([at(tone(1.0), 0.5), after(mumble, "reply_start", 0.1)])
    start = of(result, "reply_start")[0]["audio_ms"] + 100
    first, second = (start, start + 2000), (start + 2500, start + 4000)
    for lo, hi in (first, second):  # the hair trigger's 80 ms, and a frame or two
        assert not result.played[int((lo + 160) * 16) : int(hi * 16)].any(), (lo, hi)
    assert result.played[int(first[1] * 16) : int(second[0] * 16)].any()  # in the gap
    # Without merging (so no such patience), the timer resumes it over the speech.
    result, _ = run(
        [at(tone(1.0), 0.5), after(mumble, "reply_start", 0.1)],
        turn=TurnConfig(continue_turns=False),
    )
    assert result.played[int((start + 1700) * 16) : int((start + 2000) * 16)].any()


def test_words_after_a_mumble_the_reply_resumed_in_join_the_turn() -> None:
    """A mumble with no words just after the turn, a gap in which the reply resumes and
    plays ~0.7 s, then words: the reply was heard under a second in all, so the words
    are the rest of the turn (the "cold" monologue: Whisper read nothing for 4 s)."""
    rest = np.concatenate([tone(2.0, 0.04), gap(0.8), tone(1.2)])
    result, session = run([at(tone(1.0), 0.5), after(rest, "reply_start", 0.1)])
    assert of(result, "resumed")  # it did play in the gap
    (continued,) = of(result, "turn_continued")
    assert 500 < continued["heard_ms"] <= 1000
    finals = [e["text"] for e in of(result, "final")]
    assert of(result, "reply_start")[-1]["text"] == finals[-1]
    assert [m.content for m in session.history.turns] == [finals[-1], REPLY]


def test_a_turn_too_long_to_hear_again_in_one_pass_is_joined_by_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past JOIN_MAX_S the earlier utterance is not heard again: its final's words lead
    the merged turn (while the later utterance is open, and once it has ended)."""
    monkeypatch.setattr("voice.listen.listener.JOIN_MAX_S", 0.5)
    for later_s in (0.8, 0.45):  # words while it is open; words first with its final
        result, session = run([at(tone(1.0), 0.5), after(tone(later_s), "reply_start", 0.1)])
        assert of(result, "turn_continued"), later_s
        finals = [e["text"] for e in of(result, "final")]
        first = finals[0]
        assert first == "one two three four five."
        assert finals[-1].startswith(first + " ") and len(finals[-1]) > len(first) + 4
        assert of(result, "reply_start")[-1]["text"] == finals[-1]
        assert [m.content for m in session.history.turns] == [finals[-1], REPLY]
        (metrics,) = [e for e in of(result, "turn_metrics") if e["user_text"] == finals[-1]]
        assert metrics["user_start_ms"] < 1000  # the turn starts where its first words did


def test_going_on_after_a_short_reply_played_to_its_end_merges_the_turn() -> None:
    # "one .. five." [pause] "Okay." (0.5 s, heard whole) and the user goes on 0.3 s later,
    # 1.4 s after their own words: one turn, answered whole; "Okay." leaves the history.
    result, session = run(
        [at(tone(1.0), 0.5), after(tone(0.8), "reply_end", 0.3)], llm=FakeLlm(reply="Okay.")
    )
    first_end = of(result, "reply_end")[0]
    assert not first_end["interrupted"] and first_end["heard_text"] == "Okay."
    (continued,) = of(result, "turn_continued")
    assert continued["reply_id"] == first_end["reply_id"] and continued["heard_ms"] <= 1000
    finals = [e["text"] for e in of(result, "final")]
    assert finals[-1] == "one two three four five six seven eight nine."
    assert of(result, "reply_start")[-1]["text"] == finals[-1]
    assert [m.content for m in session.history.turns] == [finals[-1], "Okay."]


def test_a_short_reply_then_speech_past_the_window_is_a_new_turn() -> None:
    result, session = run(
        [at(tone(1.0), 0.5), after(tone(0.8), "reply_end", 2.6)], llm=FakeLlm(reply="Okay.")
    )
    assert not of(result, "turn_continued")
    assert len(session.history.turns) == 4


def test_a_reply_over_a_second_long_played_to_its_end_was_heard() -> None:
    # 1.3 s of reply, heard whole: the words after it are a new turn, as over a live
    # reply heard that long they would need three words to join.
    result, session = run(
        [at(tone(1.0), 0.5), after(tone(0.8), "reply_end", 0.3)],
        llm=FakeLlm(reply="Okay, got it."),
    )
    assert not of(result, "turn_continued")
    assert len(session.history.turns) == 4
