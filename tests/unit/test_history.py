"""History trimming with a fake token counter (one token per word, plus one per message)."""

import pytest

from voice.reply.history import History, InputTooLongError
from voice.think.backend import Message


def count(messages: list[Message]) -> int:
    return sum(len(m.content.split()) + 1 for m in messages)


def test_keeps_system_and_the_most_recent_turns_that_fit() -> None:
    history = History("be brief", context_tokens=30, reply_tokens=10, count_tokens=count)
    for i in range(10):
        history.add_turn(f"question {i}", f"answer number {i}")
    prompt = history.prompt_for("new question")
    assert prompt[0] == Message("system", "be brief")
    assert prompt[-1] == Message("user", "new question")
    assert count(prompt) <= 20
    assert prompt[1].role == "user"  # never starts with an orphaned assistant turn
    assert prompt[-2] == Message("assistant", "answer number 9")


def test_an_input_too_long_even_alone_is_an_error_not_a_crash() -> None:
    history = History("be brief", context_tokens=30, reply_tokens=10, count_tokens=count)
    with pytest.raises(InputTooLongError, match="too long"):
        history.prompt_for("word " * 50)


def test_truncate_last_reply_keeps_what_was_heard() -> None:
    history = History("s", 100, 10, count)
    history.add_turn("hi", "Hello there. How can I help you today?")
    history.truncate_last_reply("Hello there.")
    assert history.turns[-1] == Message("assistant", "Hello there.")


def test_a_turn_taken_back_leaves_no_trace_and_only_if_it_is_the_last() -> None:
    history = History("sys", 1000, 100, count)
    history.add_turn("hello", "Hi there.")
    history.add_turn("set a timer for", "Okay.")
    assert not history.take_back_turn("hello", "Hi there.")  # not the last one
    assert not history.take_back_turn("set a timer for", "Sure.")
    assert len(history.turns) == 4
    assert history.take_back_turn("set a timer for", "Okay.")
    assert [m.content for m in history.turns] == ["hello", "Hi there."]
    assert [m.content for m in history.prompt_for("ten minutes")[1:]] == [
        "hello", "Hi there.", "ten minutes"
    ]  # fmt: skip
