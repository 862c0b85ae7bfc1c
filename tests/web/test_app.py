"""The page's conversation view (web/app.js), run in Node with the DOM stubbed: what it
shows for a sequence of server messages is pure logic. The messages are the ones the
session sends (their fields as in voice/events.py; the session's side of these
sequences is in tests/unit/test_turn_continuation.py). The whole page in a real
browser is in tests/browser."""

from __future__ import annotations

from typing import Any

from harness import run_in_node


def shown(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(role, text, meta) of each turn the page shows after ``messages``."""
    return [
        (t["role"], t["text"], t["meta"]) for t in run_in_node("app_harness.js", "app.js", messages)
    ]


def final(uid: int, text: str) -> dict[str, Any]:
    return {"type": "final", "utterance_id": uid, "text": text, "end_ms": 1000}


def cut_reply(reply_id: int, uid: int, heard: str) -> list[dict[str, Any]]:
    """A reply to ``uid`` that the user spoke over after hearing ``heard``."""
    return [
        {"type": "reply_start", "reply_id": reply_id, "utterance_id": uid},
        {"type": "audio_chunk", "reply_id": reply_id, "text": heard, "duration_ms": 400},
        {"type": "reply_end", "reply_id": reply_id, "text": f"{heard} and more.",
         "heard_text": heard, "interrupted": True},
    ]  # fmt: skip


def continued(uid: int, continues: int, reply_id: int) -> dict[str, Any]:
    return {"type": "turn_continued", "utterance_id": uid, "continues": continues,
            "reply_id": reply_id, "heard_ms": 400}  # fmt: skip


TURN = "Another engineer rushed toward the door to see."


def test_a_continued_turn_replaces_the_fragment_and_its_cut_reply() -> None:
    messages = [
        final(1, "Hello."),
        *cut_reply(1, 1, "Hi!")[:1],
        {"type": "reply_end", "reply_id": 1, "text": "Hi!", "heard_text": "Hi!",
         "interrupted": False},
        final(2, TURN),
        *cut_reply(2, 2, "Sure,"),
        continued(3, 2, 2),
        final(3, "Another engineer rushed toward the door to see what was happening."),
        {"type": "reply_start", "reply_id": 3, "utterance_id": 3},
    ]  # fmt: skip
    assert shown(messages) == [
        ("user", "Hello.", ""),
        ("assistant", "Hi!", ""),  # an earlier exchange stays
        ("user", "Another engineer rushed toward the door to see what was happening.", ""),
        ("assistant", "…", ""),  # the reply to the whole turn, on its way
    ]


def test_a_stop_that_joined_the_turn_brings_the_exchange_back_as_heard() -> None:
    """A first partial misheard "stop" as "Start." and joined the turn: the page took
    the exchange off, then the whole turn's final ended in the stop. The server keeps
    the exchange as far as it was heard (turn_restored); the page shows it again, and
    the stop after it, not the whole turn as if it were a new question."""
    messages = [
        final(2, TURN),
        *cut_reply(2, 2, "Sure,"),
        continued(3, 2, 2),
        final(3, f"{TURN} Stop."),
        {"type": "turn_restored", "utterance_id": 3, "continues": 2, "reply_id": 2,
         "user_text": TURN, "heard_text": "Sure,", "stop_text": "stop"},
    ]  # fmt: skip
    assert shown(messages) == [
        ("user", TURN, ""),
        ("assistant", "Sure, …", "interrupted"),
        ("user", "Stop", ""),
    ]
    # Nothing of the reply heard: the turn and the stop, no reply.
    messages[-1] = {**messages[-1], "heard_text": ""}
    assert shown(messages) == [("user", TURN, ""), ("user", "Stop", "")]


def test_a_tool_call_shows_before_its_reply_with_its_outcome() -> None:
    """The page's own tool (switch_light, with time_limit_ms: the page answers it) and
    one that timed out: each shows as a line before the reply it belongs to."""
    call = {
        "type": "tool_call",
        "call_id": 1,
        "reply_id": 1,
        "name": "switch_light",
        "arguments": {"state": "on"},
        "choose_ms": 800,
        "time_limit_ms": 5000,
    }
    messages = [
        final(1, "Turn the light on, please."),
        {"type": "reply_start", "reply_id": 1, "utterance_id": 1},
        call,
        {"type": "tool_result", "call_id": 1, "reply_id": 1, "name": "switch_light",
         "status": "ok", "result": "The light is on.", "run_ms": 3},
        {"type": "reply_end", "reply_id": 1, "text": "The light is on.",
         "heard_text": "The light is on.", "interrupted": False},
        final(2, "And off again."),
        {"type": "reply_start", "reply_id": 2, "utterance_id": 2},
        {**call, "call_id": 2, "reply_id": 2, "arguments": {"state": "off"}},
        {"type": "tool_result", "call_id": 2, "reply_id": 2, "name": "switch_light",
         "status": "timeout", "result": "took longer than 5 s", "run_ms": 5000},
    ]  # fmt: skip
    assert shown(messages) == [
        ("user", "Turn the light on, please.", ""),
        ("tool", "switch_light(state: on)", "The light is on."),
        ("assistant", "The light is on.", ""),
        ("user", "And off again.", ""),
        ("tool", "switch_light(state: off)", "timeout"),
        ("assistant", "…", ""),
    ]
