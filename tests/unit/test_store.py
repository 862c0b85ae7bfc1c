"""Conversation state: what is kept, how it expires, what a bad id or bad data does
(pure logic; the real Redis and the real servers are in tests/component/test_serve_scale.py)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from voice.errors import VoiceError
from voice.reply.history import History
from voice.serve.protocol import Hello, ProtocolError, parse_text
from voice.serve.store import (
    Conversations,
    ConversationState,
    MemoryStore,
    StoreUnavailable,
    make_store,
    new_conversation_id,
    valid_conversation_id,
)


def _history() -> History:
    return History("You are terse.", 2048, 64, lambda ms: sum(len(m.content) for m in ms), seed=7)


def test_a_history_goes_on_from_its_snapshot_persona_included() -> None:
    first = _history()
    first.add_said("Hello there.")
    first.add_turn("what is two and two", "Four.")
    first.truncate_last_reply("Fo")  # the user heard only this much
    data = json.loads(json.dumps(first.snapshot()))  # through JSON, as a store keeps it
    second = History("Another persona.", 2048, 64, lambda ms: 1, seed=1)
    second.restore(data)
    assert second.system.content == "You are terse."
    assert [(m.role, m.content) for m in second.turns] == [
        ("assistant", "Hello there."), ("user", "what is two and two"), ("assistant", "Fo"),
    ]  # fmt: skip
    assert second.seed == 7 and second.prompt_for("and three")[-1].content == "and three"


@pytest.mark.parametrize(
    "bad",
    [{}, {"system": 1, "turns": []}, {"system": "s", "turns": [["robot", "x"]]},
     {"system": "s", "turns": [["user"]]}, {"system": "s", "turns": [], "seed": -1},
     {"system": "s", "turns": "no"}],
)  # fmt: skip
def test_a_bad_snapshot_is_refused_and_changes_nothing(bad: dict[str, object]) -> None:
    history = _history()
    history.add_turn("hi", "Hello.")
    with pytest.raises(ValueError):
        history.restore(bad)
    assert len(history.turns) == 2 and history.system.content == "You are terse."


def test_state_round_trips_and_foreign_values_are_refused() -> None:
    state = ConversationState({"system": "s", "turns": []}, {"push_to_talk": True}, 12.5)
    assert ConversationState.from_json(state.to_json()) == state
    for raw in ("[]", '{"version": 99}', "not json", '{"version": 1, "history": 3}'):
        with pytest.raises(ValueError):
            ConversationState.from_json(raw)


def test_memory_store_expires_after_the_last_save_and_keeps_a_bounded_number() -> None:
    now = [0.0]
    store = MemoryStore(ttl_s=10, limit=2, clock=lambda: now[0])
    state = ConversationState({"system": "s", "turns": []})
    store.save("a", state)
    now[0] = 8.0
    store.save("a", state)  # a save renews it
    now[0] = 15.0
    assert store.load("a") == state
    now[0] = 18.5
    assert store.load("a") is None
    for key in ("b", "c", "d"):
        store.save(key, state)
    assert len(store) == 2 and store.load("b") is None and store.load("d") == state


def test_ids_are_random_and_only_well_formed_ones_are_looked_up() -> None:
    ids = {new_conversation_id() for _ in range(100)}
    assert len(ids) == 100 and all(valid_conversation_id(i) for i in ids)
    for bad in ("", "short", "x" * 65, "../../etc/passwd", "a b c d e f g h i j k", "é" * 20):
        assert not valid_conversation_id(bad)


def test_hello_carries_the_conversation_id() -> None:
    hello = {"type": "hello", "protocol": 1, "sample_rate": 16000, "format": "pcm16"}
    assert parse_text(json.dumps(hello)) == Hello(16000)
    assert parse_text(json.dumps({**hello, "conversation_id": "abc"})) == Hello(16000, "abc")
    with pytest.raises(ProtocolError) as caught:
        parse_text(json.dumps({**hello, "conversation_id": 42}))
    assert caught.value.code == "bad_field"


def test_bad_store_settings_are_clear_errors() -> None:
    assert isinstance(make_store("memory"), MemoryStore)
    for url, ttl in (("postgres://x", 60.0), ("memory", 0.0), ("memory", float("nan"))):
        with pytest.raises(VoiceError) as caught:
            make_store(url, ttl)
        assert caught.value.code == "config"
    with pytest.raises(VoiceError) as caught:
        make_store("redis://:secret@host:notaport/0")
    assert "secret" not in str(caught.value)


class _Broken(MemoryStore):
    """A shared store that fails (or stalls) on every call."""

    def __init__(self, stall_s: float = 0.0) -> None:
        super().__init__()
        self.stall_s = stall_s

    def load(self, conversation_id: str) -> ConversationState | None:
        time.sleep(self.stall_s)
        raise StoreUnavailable("the store is down.")

    def save(self, conversation_id: str, state: ConversationState) -> None:
        self.load(conversation_id)


def test_a_failing_or_stalled_store_falls_back_to_memory() -> None:
    state = ConversationState({"system": "s", "turns": []}, saved_at=1.0)

    async def main(store: MemoryStore) -> tuple[object, ...]:
        conversations = Conversations(store, timeout_s=0.2)
        conversations.shared = True  # as a Redis store would be
        conversations.memory = MemoryStore()
        saved = await conversations.save("id-one-of-sixteen", state)
        loaded, failure = await conversations.load("id-one-of-sixteen")
        conversations.close()
        return saved, loaded, failure

    for stall in (0.0, 1.0):
        saved, loaded, failure = asyncio.run(main(_Broken(stall)))
        assert isinstance(saved, StoreUnavailable) and isinstance(failure, StoreUnavailable)
        assert loaded == state  # this process's copy
