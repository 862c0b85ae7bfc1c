"""Tool calls through the HTTP backend against a real llama.cpp server on loopback
(llama-cpp-python's ``llama_cpp.server`` on the bundled 135M GGUF, docs/tools.md):
the shortlisted tool is sent as an OpenAI ``tools`` entry, the streamed
``tool_calls`` come back, and a conversation acts on them as it does with the
embedded model. This server honours a named ``tool_choice`` only: with several
tools shortlisted ("required") it answers in words, which makes no call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import pytest
from test_tools_session import _run, _said

from voice.app.build import build_session, load_engines
from voice.bench.llama_server import LlamaServerProcess
from voice.config import Settings
from voice.embed import Embedder
from voice.events import ReplyText, ToolCall, ToolResult
from voice.runtime.faults import make_lane
from voice.think.backend import LlmConfig
from voice.think.http import OpenAiHttpBackend
from voice.tools import Toolbox
from voice.tools.choose import Chooser

pytestmark = [pytest.mark.slow, pytest.mark.alone]

Item = Literal["sword", "axe", "shield", "dagger", "helmet"]
SOLD: list[tuple[str, int]] = []


def sell(item: Item, quantity: int = 1) -> str:
    """Sell the player weapons or armour from the smithy: a sword, an axe, a shield."""
    SOLD.append((item, quantity))
    return f"Sold {quantity} {item}."


def repair(item: Item) -> str:
    """Repair or sharpen the player's damaged weapon or armour."""
    return f"Repaired the {item}."


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with LlamaServerProcess() as llama_server:
        yield llama_server.url


@pytest.fixture(scope="module")
def chooser() -> Chooser:
    box = Toolbox()
    box.add(sell, ["I'd like to buy a sword", "I'll take two axes"])
    box.add(repair, ["can you fix my sword", "my shield is broken, repair it"])
    return Chooser(list(box), Embedder.default())


def test_the_server_fills_the_call_and_words_instead_make_none(
    server: str, chooser: Chooser
) -> None:
    backend = OpenAiHttpBackend(LlmConfig(backend="http", url=server))
    # The words name the item and the count: no model pass, the server is not asked.
    settled = chooser.choose("I'll buy two swords", backend)
    assert settled is not None and settled.raw == ""
    # Which item is left open: sell alone is shortlisted, the server fills it.
    call = chooser.choose("I want to buy two of your blades", backend)
    assert call is not None and call.tool.name == "sell", call
    assert call.arguments["quantity"] == 2 and call.arguments["item"] in Item.__args__
    assert json.loads(call.raw)["name"] == "sell"  # put together from the streamed deltas
    assert backend.state == "ok"
    # Two tools shortlisted: tool_choice "required", which this server does not honour;
    # its answer in words is no call (the conversation then replies as usual).
    assert [t.name for t in chooser.shortlist("sharpen my axe").candidates] == ["repair", "sell"]
    assert chooser.choose("sharpen my axe", backend) is None


def test_a_conversation_on_the_http_backend_acts_on_the_call(server: str, chooser: Chooser) -> None:
    settings = Settings()
    settings.llm.backend, settings.llm.url, settings.llm.temperature = "http", server, 0.0
    settings.conversation.idle_prefill = False
    engines = load_engines(settings, warm=False)
    session = build_session(settings, engines)
    session.tools = chooser
    lane = make_lane(engines)
    session.submit_text("I want to buy three of your blades")  # the server picks the item
    out = _run(session, lane, 30)
    calls = [e for e in out if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments["quantity"]) for c in calls] == [("sell", 3)]
    assert [r.status for r in out if isinstance(r, ToolResult)] == ["ok"]
    item = calls[0].arguments["item"]
    assert SOLD[-1] == (item, 3)
    assert _said(out) == f"Sold 3 {item}."  # the result, as written; no tool JSON said
    # The server's words instead of a call: no call, and the usual reply is said.
    session.submit_text("sharpen my axe")
    out = _run(session, lane, 30)
    assert not [e for e in out if isinstance(e, ToolCall)]
    said = _said(out)
    assert said and not any(c in said for c in "{}")
    assert [e for e in out if isinstance(e, ReplyText)]
