"""``run_pass`` runs a final pass that left words out again (pure logic, scripted engines)."""

from __future__ import annotations

import numpy as np

from voice.listen.listener import TranscribeRequest
from voice.listen.runner import left_words_out, run_pass
from voice.listen.whisper import Transcription


def words(text: str) -> list[str]:
    return text.split()


SAID = words("ask what you can do for your country has never been surpassed")


def request(context: str, committed: str = "") -> TranscribeRequest:
    return TranscribeRequest(
        request_id=1,
        utterance_id=1,
        audio=np.zeros(16000, np.float32),
        context=context,
        with_timestamps=False,
        end_sample=16000,
        final=True,
        committed=tuple(committed.split()),
    )


class SkipsWhatItsPromptRunsUpTo:
    """Leaves out the first six words when prompted (Whisper, where its prompt runs up
    to a buffer's first words); its final mode writes nothing unprompted if told to."""

    def __init__(self, final_mode_silent: bool = False) -> None:
        self.final_mode_silent = final_mode_silent
        self.calls: list[tuple[str, bool]] = []

    def transcribe(self, audio, context="", with_timestamps=False, final=False):  # type: ignore[no-untyped-def]
        self.calls.append((context, final))
        if context:
            words = SAID[6:]
        elif final and self.final_mode_silent:
            words = []
        else:
            words = list(SAID)
        return Transcription(words=words, compute_ms=100.0)


def test_a_prompted_pass_that_left_out_the_committed_words_is_run_without_the_prompt() -> None:
    engine = SkipsWhatItsPromptRunsUpTo()
    result = run_pass(engine, request("...ask not what your country", "ask what you can do for"))
    assert result.words == SAID
    assert engine.calls == [("...ask not what your country", True), ("", True)]
    assert result.compute_ms == 200.0  # both passes are the pass's compute


def test_a_final_pass_that_wrote_nothing_is_run_as_a_partial_pass() -> None:
    engine = SkipsWhatItsPromptRunsUpTo(final_mode_silent=True)
    result = run_pass(engine, request("", "ask what you can do"))
    assert result.words == SAID
    assert engine.calls == [("", True), ("", False)]


def test_a_pass_that_says_what_was_heard_runs_once() -> None:
    engine = SkipsWhatItsPromptRunsUpTo()
    result = run_pass(engine, request("", "ask what you can do for"))
    assert result.words == SAID and len(engine.calls) == 1


def test_what_counts_as_words_left_out() -> None:
    heard = Transcription(words=words("country has never been surpassed."))
    assert left_words_out(request("prompt", "ask what you can do for"), heard)
    assert left_words_out(request("", "ask what you can do for"), Transcription(words=[]))
    # Most of them said is a rewording, and one word or two cannot tell.
    reworded = Transcription(words=words("obvious what you're doing."))
    assert not left_words_out(request("prompt", "It's obvious what"), reworded)
    stuffered = Transcription(words=words("Stuffered into you, who his belly counseled him."))
    assert not left_words_out(request("", "stuff it into you,"), stuffered)
    assert not left_words_out(request("prompt", "may just"), Transcription(words=["justly"]))
