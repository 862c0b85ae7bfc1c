"""Choosing a tool call through the real models (docs/tools.md): the sentence encoder
shortlists the tools by meaning, the bundled 135M model fills the call under a
llama.cpp grammar; an NPC's customer buying swords calls sell(), small talk nothing."""

from __future__ import annotations

from typing import Literal

import pytest

from voice.embed import Embedder
from voice.think.backend import LlmConfig
from voice.think.llama import LlamaBackend
from voice.tools import Toolbox
from voice.tools.choose import Chooser

pytestmark = pytest.mark.slow

Item = Literal["sword", "axe", "shield", "dagger", "helmet"]


def sell(item: Item, quantity: int = 1) -> str:
    """Sell the player weapons or armour from the smithy: a sword, an axe, a shield."""
    return f"Sold {quantity} {item}."


def repair(item: Item) -> str:
    """Repair or sharpen the player's damaged weapon or armour."""
    return f"Repaired the {item}."


def give(item: Literal["potion", "map", "apple"]) -> str:
    """Give the player a potion, a map or an apple."""
    return f"Gave the {item}."


@pytest.fixture(scope="module")
def chooser() -> Chooser:
    box = Toolbox()
    box.add(sell, ["I'd like to buy a sword", "I'll take two axes"])
    box.add(repair, ["can you fix my sword", "my shield is broken, repair it"])
    box.add(give, ["can I have a potion", "give me the map please"])
    return Chooser(list(box), Embedder.default())


@pytest.fixture(scope="module")
def llama() -> LlamaBackend:
    return LlamaBackend(LlmConfig(temperature=0.0))


def test_buying_swords_calls_sell_and_small_talk_calls_nothing(
    chooser: Chooser, llama: LlamaBackend
) -> None:
    call = chooser.choose("I'll buy two swords", llama)
    assert call is not None
    assert (call.tool.name, call.arguments) == ("sell", {"item": "sword", "quantity": 2})
    assert call.raw == ""  # the words settle every argument: no model pass
    # What the words leave open, the model writes under the grammar: a known item.
    vague = chooser.choose("I want to buy something sharp from you", llama)
    assert vague is not None and vague.tool.name == "sell", vague
    assert vague.raw.startswith('{"name": "sell"')  # what the grammar let the model write
    assert vague.arguments["item"] in ("sword", "axe", "shield", "dagger", "helmet")
    repaired = chooser.choose("my helmet is dented, can you fix it", llama)
    assert repaired is not None and (repaired.tool.name, repaired.arguments) == (
        "repair", {"item": "helmet"},
    )  # fmt: skip
    for chat in ("nice weather today", "what's your name", "hello there",
                 "I already have a sword, thanks"):  # fmt: skip
        assert chooser.choose(chat, llama) is None, chat


def find_room(room: Literal["cafe", "toilets", "cloakroom", "shop", "dinosaur hall"]) -> str:
    """Tell the visitor where a room is in the museum: the cafe, toilets, cloakroom."""
    return f"The {room} is downstairs."


def test_a_value_meant_but_not_said_is_taken_by_meaning(llama: LlamaBackend) -> None:
    box = Toolbox()
    box.add(find_room, ["where can I get a coffee", "how do I find the lifts"])
    chooser = Chooser(list(box), Embedder.default())
    call = chooser.choose("excuse me where can I leave my coat", llama)
    assert call is not None and call.arguments == {"room": "cloakroom"}, call
    assert call.raw == ""  # the meaning settled it: the model was not asked


def events(day: Literal["today", "tomorrow", "weekend"] = "today") -> str:
    """List the museum's events, talks and tours on a day."""
    return f"Events {day}."


def test_a_call_only_its_defaults_would_settle_needs_words_near_it(llama: LlamaBackend) -> None:
    box = Toolbox()
    box.add(events, ["what's on today", "are there any tours this afternoon"])
    chooser = Chooser(list(box), Embedder.default())
    # Near the tool by a little (0.37, over the shortlist's 0.3) and naming no day.
    assert chooser.focus("Is there a swimming pool nearby?")[1].candidates
    assert chooser.choose("Is there a swimming pool nearby?", llama) is None
    call = chooser.choose("what's on?", llama)  # near it: today, by default
    assert call is not None and call.arguments == {"day": "today"}
    call = chooser.choose("anything on tomorrow?", llama)  # a day named: no bar
    assert call is not None and call.arguments == {"day": "tomorrow"}
