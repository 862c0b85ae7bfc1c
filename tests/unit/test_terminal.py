"""The desk's terminal view: what is said and heard, as it happens (no terminal here)."""

from __future__ import annotations

import io

from voice.events import AudioChunk, Final, ReplyEnded, TurnMetrics
from voice.transports.terminal import TerminalView


def test_the_reply_is_printed_as_it_is_heard_and_a_cut_is_marked() -> None:
    out = io.StringIO()
    view = TerminalView(out)
    view.show(
        Final(audio_ms=0, utterance_id=1, text="Hello there.", start_ms=0, end_ms=900, compute_ms=0)
    )
    view.show(AudioChunk(audio_ms=1, reply_id=1, seq=0, text="Hi! ", duration_ms=500))
    view.show(AudioChunk(audio_ms=2, reply_id=1, seq=1, text="How are you?", duration_ms=900))
    assert out.getvalue() == "you:       Hello there.\n"
    view.played(1, 100)
    assert out.getvalue().endswith("assistant: Hi!\n")
    view.played(1, 8000)  # still in the first chunk's 500 ms
    assert "How are you?" not in out.getvalue()
    view.played(1, 8100)
    assert out.getvalue().endswith("           How are you?\n")
    view.show(ReplyEnded(audio_ms=3, reply_id=1, text="Hi! How are you?", heard_text="Hi! How",
                         interrupted=True))  # fmt: skip
    assert out.getvalue().endswith("[interrupted; heard: Hi! How]\n")


def test_latency_lines_follow_each_turn() -> None:
    out = io.StringIO()
    view = TerminalView(out)
    view.show(
        TurnMetrics(
            audio_ms=0,
            turn_id=1,
            reply_id=1,
            user_text="x",
            user_start_ms=0,
            user_end_ms=1,
            end_silence_ms=500,
            eot_probability=None,
            speculative=True,
            asr_final_ms=0,
            llm_first_token_ms=80,
            first_audio_ready_ms=500,
            voice_to_voice_ms=612.0,
            barge_in_ms=None,
            interrupted=False,
        )
    )
    assert "voice-to-voice 612 ms" in out.getvalue()


def test_waking_and_going_idle_are_shown() -> None:
    from voice.events import Idle, Wake

    out = io.StringIO()
    view = TerminalView(out)
    view.show(Idle(audio_ms=0, reason="start"))
    assert out.getvalue() == ""  # the status line says idle; nothing to keep
    view.show(Wake(audio_ms=1, reason="wake_word", phrase="Hey Jarvis", start_ms=0))
    view.show(Idle(audio_ms=9, reason="quiet"))
    assert out.getvalue() == (
        '           [awake: heard "Hey Jarvis"]\n           [idle: say the wake word]\n'
    )
