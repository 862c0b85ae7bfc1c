"""Tool calls in a conversation through the real models (docs/tools.md): a call that
acts and whose outcome the model tells, remembered in history; a tool that raises and
one that hangs end in the apology and an error event; a barge-in during a slow async
tool cancels it and nothing of its result is said; tools registered through the
embedding API."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import numpy as np
import pytest

from voice.app.build import build_session, load_engines
from voice.assistant import Assistant
from voice.config import Settings
from voice.conversation.actions import TtsJob
from voice.conversation.session import Session
from voice.embed import Embedder
from voice.events import Error, ReplyText, ToolCall, ToolResult
from voice.runtime.engines import EngineLane, Engines
from voice.runtime.faults import make_lane
from voice.tools import Say, Toolbox, ToolError
from voice.tools.choose import Chooser

# Modelled costs; the 1 s tool limit is far over what a working tool takes on the one core
# a test worker has (tests/conftest.py), so these run beside another test.
pytestmark = pytest.mark.slow

SHOP: dict[str, Any] = {"gold": 100, "bag": []}
CANCELLED: list[str] = []


def sell(item: Literal["sword", "axe", "shield"], quantity: int = 1) -> str:
    """Sell the player weapons or armour from the smithy: a sword, an axe, a shield."""
    SHOP["gold"] -= 10 * quantity
    SHOP["bag"] += [item] * quantity
    return f"Sold {quantity} {item} for {10 * quantity} gold."


def open_gate() -> Say:
    """Open the town gate for the player."""
    return Say("The gate is open.")


def forge(item: Literal["horseshoe", "nail"]) -> str:
    """Forge a new horseshoe or nail at the anvil."""
    raise RuntimeError("the forge is cold")


async def fetch(item: Literal["rope", "lantern"]) -> str:
    """Fetch a rope or a lantern from the cellar."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        CANCELLED.append(item)
        raise
    return f"Here is the {item}."


def count_coins(pile: Literal["small", "big"]) -> str:
    """Count the coins in the chest."""
    time.sleep(3)
    return "There are 40 coins."


EXAMPLES = {
    "sell": ["I'd like to buy a sword", "I'll take two axes"],
    "open_gate": ["please open the gate", "let me through the gate"],
    "forge": ["can you forge me a horseshoe", "make me some nails"],
    "fetch": ["go get the rope from the cellar", "bring me a lantern"],
    "count_coins": ["how many coins are in the chest", "count the coins"],
}


def _settings() -> Settings:
    settings = Settings()
    settings.llm.temperature = 0.0
    settings.tts.variation = False  # the same voice every run: replies as long, turns placed alike
    settings.conversation.idle_prefill = False
    settings.tools.time_limit_s = 1.0
    return settings


@pytest.fixture(scope="module")
def engines() -> Engines:
    return load_engines(_settings())


@pytest.fixture(scope="module")
def chooser() -> Chooser:
    box = Toolbox()
    for fn in (sell, open_gate, forge, fetch, count_coins):
        box.add(fn, EXAMPLES[fn.__name__])
    return Chooser(list(box), Embedder.default(), _settings().tools)


def _run(session: Session, lane: EngineLane, until: float, stop_when: Any = None) -> list[Any]:
    """Jobs run (speech synthesised, and played at once), 20 ms of silence fed when
    there is none, until nothing is left or ``until`` seconds of wall time passed."""
    out: list[Any] = []
    deadline = time.monotonic() + until
    silence = np.zeros(320, np.float32)
    while time.monotonic() < deadline:
        out += session.take()
        if stop_when is not None and stop_when(out):
            break
        job = session.next_job()
        if job is None:
            if session._reply is None and not session.busy:
                break
            time.sleep(0.02)
            session.feed(silence)
            continue
        session.on_result(job, lane.run(job))
        reply = session._reply
        if isinstance(job, TtsJob) and reply is not None:
            session.on_played(reply.gen_id, session._playback.queued)
    return out + session.take()


def _session(engines: Engines, chooser: Chooser) -> tuple[Session, EngineLane]:
    session = build_session(_settings(), engines)
    session.tools = chooser
    return session, make_lane(engines)


def _said(out: list[Any]) -> str:
    return "".join(e.text for e in out if isinstance(e, ReplyText)).strip()


def test_a_call_acts_the_model_tells_it_and_history_keeps_it(
    engines: Engines, chooser: Chooser
) -> None:
    session, lane = _session(engines, chooser)
    gold = SHOP["gold"]
    session.submit_text("I'll buy two swords")
    out = _run(session, lane, 30)
    calls = [e for e in out if isinstance(e, ToolCall)]
    results = [e for e in out if isinstance(e, ToolResult)]
    assert [(c.name, c.arguments) for c in calls] == [("sell", {"item": "sword", "quantity": 2})]
    assert [(r.status, r.result) for r in results] == [("ok", "Sold 2 sword for 20 gold.")]
    assert SHOP["gold"] == gold - 20 and SHOP["bag"][-2:] == ["sword", "sword"]
    assert _said(out) == "Sold 2 sword for 20 gold."  # a string result, said as written
    assert "sell" in session.history.so_far()[-1].content  # the next turn knows
    # results = "model": the model tells the outcome, in words, never the call's JSON.
    chooser.config.results = "model"
    try:
        session.submit_text("I want to buy an axe")
        out = _run(session, lane, 30)
    finally:
        chooser.config.results = "say"
    calls = [e for e in out if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("sell", {"item": "axe", "quantity": 1})]
    said = _said(out)
    assert said and not any(c in said for c in '{}"')
    # A tool's Say is said as written, without the model.
    session.submit_text("please open the gate")
    out = _run(session, lane, 30)
    assert [e.name for e in out if isinstance(e, ToolCall)] == ["open_gate"]
    assert _said(out) == "The gate is open."
    # Small talk calls nothing.
    session.submit_text("nice weather today")
    out = _run(session, lane, 30)
    assert not [e for e in out if isinstance(e, ToolCall)] and _said(out)


def test_a_raising_and_a_hanging_tool_end_in_the_apology(
    engines: Engines, chooser: Chooser
) -> None:
    session, lane = _session(engines, chooser)
    apology = _settings().tools.apology_text
    session.submit_text("can you forge me a horseshoe")
    out = _run(session, lane, 30)
    assert [(r.name, r.status) for r in out if isinstance(r, ToolResult)] == [("forge", "error")]
    assert [e.code for e in out if isinstance(e, Error)] == ["tool_failed"]
    assert _said(out).endswith(apology)
    # A sync tool past its limit (1 s here) is abandoned; the filler came first.
    session.submit_text("count the coins in the big chest")
    out = _run(session, lane, 30)
    results = [r for r in out if isinstance(r, ToolResult)]
    assert [(r.name, r.status) for r in results] == [("count_coins", "timeout")]
    assert 1000 <= results[0].run_ms < 2500
    assert [e.code for e in out if isinstance(e, Error)] == ["tool_timeout"]
    assert _said(out) == f"One moment. {apology}"
    # The conversation goes on.
    session.submit_text("I'll take an axe")
    out = _run(session, lane, 30)
    assert [(r.name, r.status) for r in out if isinstance(r, ToolResult)] == [("sell", "ok")]


def test_a_barge_in_during_a_slow_async_tool_cancels_it(engines: Engines, chooser: Chooser) -> None:
    session, lane = _session(engines, chooser)
    session.submit_text("bring me a lantern from the cellar")
    out = _run(session, lane, 10, lambda o: any(isinstance(e, ReplyText) for e in o))
    assert [e.name for e in out if isinstance(e, ToolCall)] == ["fetch"]
    assert _said(out) == "One moment."  # the call is still running
    cut = time.monotonic()
    session.submit_text("hello")  # the user speaks over it
    out = session.take()
    results = [r for r in out if isinstance(r, ToolResult)]
    assert [(r.name, r.status) for r in results] == [("fetch", "cancelled")]
    deadline = time.monotonic() + 1
    while not CANCELLED and time.monotonic() < deadline:
        time.sleep(0.005)
    assert CANCELLED == ["lantern"] and time.monotonic() - cut < 0.1
    out = _run(session, lane, 30)
    assert "lantern" not in _said(out)
    assert "cancelled" in " ".join(m.content for m in session.history.so_far())


def test_tools_through_the_embedding_api(engines: Engines) -> None:
    with pytest.raises(ToolError, match="cannot be a tool's name"):
        Assistant(settings=_settings(), engines=engines, tools=[lambda x: x])
    bot = Assistant(settings=_settings(), engines=engines, tools=[sell])

    @bot.tool(examples=["please open the gate"])
    def open_door() -> str:
        """Open the door of the smithy."""
        return "open"

    assert bot.session.tools is not None
    assert [t.name for t in bot.session.tools.tools] == ["sell", "open_door"]


def test_spoken_words_after_a_call_or_over_it_are_a_new_turn(
    engines: Engines, chooser: Chooser
) -> None:
    """A short reply to a call, or a barge-in on its filler, must not join the next
    words to the turn that called (the turn-taking joins them after a short or unheard
    reply): the call would be chosen, and run, again."""
    from voice.transports.simulate import Script, ScriptTurn, simulate

    def say(text: str) -> Any:
        return np.concatenate(list(engines.tts.synthesize(text))).astype(np.float32)

    turns = [
        ScriptTurn(say("I'll buy two swords"), "buy", at_s=0.5),
        ScriptTurn(say("nice weather today"), "chat", after="reply_end", delay_s=1.0),
        ScriptTurn(say("bring me a lantern from the cellar"), "fetch", after="reply_end",
                   delay_s=1.0),
        ScriptTurn(say("no wait, never mind that"), "stop", after="reply_start", delay_s=0.6),
    ]  # fmt: skip
    session = build_session(_settings(), engines)
    session.tools = chooser
    events = simulate(Script(turns), session, engines, repeatable=True).events
    calls = [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"]
    assert calls == [("sell", {"item": "sword", "quantity": 2}), ("fetch", {"item": "lantern"})]
    results = [e["status"] for e in events if e["type"] == "tool_result"]
    assert results == ["ok", "cancelled"]
    asked = [e["text"] for e in events if e["type"] == "reply_start" and e["utterance_id"] > 0]
    assert len(asked) == 4 and "sword" not in asked[1].lower() and "lantern" not in asked[3]
