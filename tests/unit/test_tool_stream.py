"""The HTTP backend's tool calls (docs/tools.md): streamed ``tool_calls`` deltas put
together from scripted chunks, and ``fill_call`` against a scripted server on
loopback (split arguments, words instead of a call, malformed chunks, a cut stream,
a timeout, an unreachable server), and a conversation on it: a bad call is an error
event and the usual reply, never spoken. Fake engines and the standard library: the
real llama.cpp server is in tests/component/test_tools_http.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import numpy as np
import pytest
from conftest import LoudIsSpeech
from test_conversation_core import FakeAsr, FakeTts

from voice.bench.llama_server import free_port
from voice.conversation.actions import TtsJob
from voice.conversation.session import Session
from voice.errors import VoiceError
from voice.events import Error, ReplyText, ToolCall
from voice.listen.endpoint import EndpointConfig
from voice.listen.listener import ListenConfig, Listener
from voice.reply.history import History
from voice.runtime.engines import EngineLane, Engines
from voice.think.backend import CallRequest, LlmConfig, Message
from voice.think.http import LlmUnavailableError, OpenAiHttpBackend
from voice.think.tool_stream import MalformedStreamError, ToolCallStream
from voice.tools import ToolError, make_tool
from voice.tools.choose import Chooser, ToolsConfig, tool_choice
from voice.tools.grammar import parse_call


def sell(item: Literal["sword", "axe"], quantity: int = 1) -> str:
    """Sell the player a weapon."""
    return f"Sold {quantity} {item}."


def repair(item: Literal["sword", "axe"]) -> str:
    """Repair the player's weapon."""
    return f"Repaired the {item}."


SELL, REPAIR = make_tool(sell), make_tool(repair)


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def call_part(index: int | None = 0, **function: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"function": function}
    if index is not None:
        entry["index"] = index
    return delta(tool_calls=[entry])


END = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def assembled(chunks: list[Any]) -> ToolCallStream:
    calls = ToolCallStream()
    for chunk in chunks:
        calls.add(chunk)
    return calls


def test_arguments_split_anywhere_are_put_back_together() -> None:
    # OpenAI's shape: the id and name once, the arguments cut inside a key, a string
    # and a number.
    first = delta(
        role="assistant",
        content=None,
        tool_calls=[{"index": 0, "id": "call_1", "type": "function",
                     "function": {"name": "sell", "arguments": ""}}],
    )  # fmt: skip
    pieces = ['{"it', 'em": "sw', 'ord", "quan', 'tity": 1', "2}"]
    calls = assembled([first, *(call_part(arguments=p) for p in pieces), END])
    call = calls.call()
    assert call is not None and (call.id, call.name) == ("call_1", "sell")
    assert call.arguments == '{"item": "sword", "quantity": 12}'
    assert calls.finish_reason == "tool_calls" and calls.text == ""
    tool, arguments = parse_call(call.as_text(), [SELL, REPAIR])
    assert (tool.name, arguments) == ("sell", {"item": "sword", "quantity": 12})


def test_a_name_repeated_in_every_chunk_is_one_name() -> None:
    # llama-cpp-python's server sends the whole name and the id with every fragment.
    parts = ['{"item": ', '"axe"', "}"]
    chunks = [
        delta(tool_calls=[{"index": 0, "id": "call_x", "function": {"name": "repair",
                                                                   "arguments": p}}])
        for p in parts
    ]  # fmt: skip
    call = assembled(chunks).call()
    assert call is not None and call.name == "repair" and call.arguments == '{"item": "axe"}'


def test_a_name_in_pieces_and_entries_with_no_index() -> None:
    chunks = [
        delta(tool_calls=[{"id": "c1", "function": {"name": "se"}}]),
        delta(tool_calls=[{"function": {"name": "ll", "arguments": '{"item"'}}]),
        delta(tool_calls=[{"id": "c1", "function": {"arguments": ': "axe"}'}}]),
        {"choices": [{"index": 0, "finish_reason": "tool_calls"}]},  # no delta at all
        {"choices": [], "usage": {"total_tokens": 9}},  # a usage-only last chunk
    ]
    calls = assembled(chunks)
    call = calls.call()
    assert call is not None and (call.name, call.arguments) == ("sell", '{"item": "axe"}')
    assert list(calls.calls) == [0]


def test_arguments_sent_as_an_object_and_several_calls_keep_the_first() -> None:
    chunks = [
        call_part(1, name="repair", arguments={"item": "axe"}),
        call_part(0, name="sell", arguments={"item": "sword"}),
    ]
    call = assembled(chunks).call()
    assert (
        call is not None and call.name == "sell" and json.loads(call.arguments) == {"item": "sword"}
    )


def test_words_instead_of_a_call_are_no_call() -> None:
    calls = assembled([delta(content="I can "), delta(content="help."), END])
    assert calls.call() is None and calls.text == "I can help."


@pytest.mark.parametrize(
    "chunk",
    [
        "not an object",
        {"id": "x"},  # no choices
        {"choices": "all"},
        {"choices": [{"index": 0, "delta": "text"}]},
        delta(tool_calls={"index": 0}),
        delta(tool_calls=["sell"]),
        call_part(index="0", name="sell"),  # type: ignore[arg-type]
        call_part(name=["sell"]),
        call_part(arguments=12),
        delta(content=5),
        delta(tool_calls=[{"index": 0, "function": "sell"}]),
    ],
)
def test_a_malformed_chunk_is_a_clear_error(chunk: Any) -> None:
    with pytest.raises(MalformedStreamError, match="malformed stream chunk"):
        ToolCallStream().add(chunk)


def test_an_id_that_changes_and_a_call_with_no_name_are_errors() -> None:
    calls = assembled([delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "sell"}}])])
    with pytest.raises(MalformedStreamError, match="changed its id"):
        calls.add(delta(tool_calls=[{"index": 0, "id": "b"}]))
    nameless = assembled([call_part(arguments='{"item": "axe"}'), END])
    with pytest.raises(MalformedStreamError, match="no function name"):
        nameless.call()


def test_an_error_sent_mid_stream_is_reported() -> None:
    with pytest.raises(VoiceError, match="out of memory") as caught:
        ToolCallStream().add({"error": {"message": "out of memory", "code": 500}})
    assert caught.value.code == "llm_server_error"


def test_a_call_that_does_not_fit_its_tools_is_refused() -> None:
    unknown = assembled([call_part(name="steal", arguments='{"item": "axe"}')]).call()
    assert unknown is not None
    with pytest.raises(ToolError, match="not a tool here"):
        parse_call(unknown.as_text(), [SELL])
    bad = assembled([call_part(name="sell", arguments='{"item": "bow"}')]).call()
    assert bad is not None
    with pytest.raises(ToolError, match="expected one of"):
        parse_call(bad.as_text(), [SELL])
    broken = assembled([call_part(name="sell", arguments='{"item": "sw')]).call()
    assert broken is not None
    with pytest.raises(ToolError, match="not JSON"):
        parse_call(broken.as_text(), [SELL])


# --- fill_call against a scripted server on loopback ---------------------------------


class Script:
    """What the scripted server answers: SSE lines, a pause before the body, whether
    it ends the stream with [DONE]."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.raw: list[bytes] = []
        self.pause_s = 0.0
        self.done = True
        self.status = 200
        self.requests: list[dict[str, Any]] = []
        self.reply: list[Any] = []  # the events of a request with no tools (a reply)


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            body = json.loads(self.rfile.read(length))
            script.requests.append(body)
            events = script.events if "tools" in body else script.reply
            self.send_response(script.status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            time.sleep(script.pause_s)
            lines = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
            raw = script.raw if "tools" in body else []
            lines += raw + ([b"data: [DONE]\n\n"] if script.done else [])
            try:
                for line in lines:
                    self.wfile.write(line)
            except OSError:
                pass  # the client gave up (the timeout test)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    httpd.shutdown()
    httpd.server_close()


PROMPT = [Message("system", "You turn words into calls."), Message("user", "two swords")]


def request(tools: list[Any] = [SELL]) -> CallRequest:  # noqa: B006
    return CallRequest("root ::= x", [t.openai() for t in tools], tool_choice(tools), 48)


def backend(url: str, **settings: Any) -> OpenAiHttpBackend:
    return OpenAiHttpBackend(LlmConfig(backend="http", url=url, retries=0, **settings))


def test_fill_call_sends_the_tools_streamed_and_reads_the_call(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.events = [
        call_part(name="sell", arguments='{"item": "sw'),
        call_part(arguments='ord", "quantity": 2}'),
        END,
    ]
    raw = backend(url).fill_call(PROMPT, request())
    assert raw is not None
    assert parse_call(raw, [SELL])[1] == {"item": "sword", "quantity": 2}
    sent = script.requests[0]
    assert sent["stream"] is True and sent["temperature"] == 0.0
    assert sent["tools"] == [SELL.openai()]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "sell"}}
    assert sent["parallel_tool_calls"] is False


def test_fill_call_with_words_instead_of_a_call_is_none(server: tuple[str, Script]) -> None:
    url, script = server
    script.events = [delta(content="Sure, "), delta(content="two swords!"), END]
    assert backend(url).fill_call(PROMPT, request()) is None


def test_fill_call_malformed_cut_or_too_long_is_a_clear_error(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.raw = [b"data: {not json\n\n"]
    with pytest.raises(MalformedStreamError, match="not JSON"):
        backend(url).fill_call(PROMPT, request())

    script.raw, script.done = [], False  # the connection closes mid-call
    script.events = [call_part(name="sell", arguments='{"item": ')]
    with pytest.raises(LlmUnavailableError, match="stopped mid-reply"):
        backend(url).fill_call(PROMPT, request())

    script.done = True
    script.events = [
        call_part(name="sell", arguments='{"item": '),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ]
    with pytest.raises(VoiceError, match="cut at 48 tokens") as caught:
        backend(url).fill_call(PROMPT, request())
    assert caught.value.code == "tool_call_cut"


def test_fill_call_times_out_and_an_unreachable_server_is_reported(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.pause_s = 1.0
    script.events = [call_part(name="sell", arguments="{}"), END]
    slow = backend(url, timeout_s=0.2)
    start = time.monotonic()
    with pytest.raises(LlmUnavailableError, match="timed out"):
        slow.fill_call(PROMPT, request())
    assert time.monotonic() - start < 0.9
    gone = backend(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LlmUnavailableError, match="unreachable"):
        gone.fill_call(PROMPT, request())


def test_the_text_stream_still_reads_its_deltas(server: tuple[str, Script]) -> None:
    url, script = server
    script.reply = [delta(content="Hello"), delta(content=" there."), END]
    assert "".join(backend(url).stream(PROMPT)) == "Hello there."


# --- the chooser over a backend that fills calls -------------------------------------


class KeywordEmbedder:
    """Sells, repairs and small talk on three axes: enough for the shortlist's logic."""

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            low = text.lower()
            row = np.array(
                [any(w in low for w in ("sell", "buy")), any(w in low for w in ("repair", "fix")),
                 0.0], dtype=np.float32,
            )  # fmt: skip
            if not row.any():
                row[2] = 1.0
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


class ScriptedFiller:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.requests: list[CallRequest] = []

    def fill_call(self, messages: list[Message], request: CallRequest) -> str | None:
        self.requests.append(request)
        return self.answer


def test_the_chooser_asks_for_the_shortlist_and_checks_the_answer() -> None:
    chooser = Chooser([SELL, REPAIR], KeywordEmbedder())
    filler = ScriptedFiller(json.dumps({"name": "sell", "arguments": '{"item": "axe"}'}))
    call = chooser.choose("I'd buy an axe or two", filler)  # how many: the model says
    assert call is not None and (call.tool.name, call.arguments) == (
        "sell", {"item": "axe", "quantity": 1},
    )  # fmt: skip
    sent = filler.requests[0]
    assert sent.tool_choice == {"type": "function", "function": {"name": "sell"}}
    assert [t["function"]["name"] for t in sent.tools] == ["sell"]
    assert sent.tools[0]["function"]["parameters"]["properties"]["item"]["enum"] == ["axe"]

    filler.answer = json.dumps({"name": "repair", "arguments": {"item": "sword"}})
    both = chooser.choose("buy a sword or fix it", filler)  # two tools shortlisted
    assert both is not None and (both.tool.name, both.arguments) == ("repair", {"item": "sword"})
    assert filler.requests[-1].tool_choice == "required"
    assert [t["function"]["name"] for t in filler.requests[-1].tools] == ["sell", "repair"]
    assert chooser.choose("hello there", filler) is None  # small talk asks nothing
    assert len(filler.requests) == 2

    assert chooser.choose("I'd buy an axe or two", ScriptedFiller(None)) is None  # words: no call
    with pytest.raises(ToolError, match="not a tool here"):
        steal = ScriptedFiller('{"name": "steal", "arguments": {}}')
        chooser.choose("I'd buy an axe or two", steal)
    auto = Chooser([SELL], KeywordEmbedder(), ToolsConfig(tool_choice="auto"))
    words = ScriptedFiller(None)
    assert auto.choose("I'd buy an axe or two", words) is None
    assert words.requests[-1].tool_choice == "auto"
    with pytest.raises(ToolError, match="tool_choice"):
        Chooser([SELL], KeywordEmbedder(), ToolsConfig(tool_choice="always"))


# --- a conversation on the HTTP backend: what a bad call does ------------------------


def _converse(llm: OpenAiHttpBackend, text: str) -> list[Any]:
    """One typed turn through a session with the scripted server as its model (fake
    ears and voice), every job run on a real engine lane, until the reply is done."""
    engines = Engines(asr=FakeAsr(), llm=llm, tts=FakeTts())
    listener = Listener(LoudIsSpeech(), EndpointConfig(end_silence_ms=600), ListenConfig())
    session = Session(listener, History("Be brief.", 2048, 100, llm.count_tokens))
    session.tools = Chooser([SELL], KeywordEmbedder())
    lane = EngineLane(engines, 5.0)
    session.submit_text(text)
    out: list[Any] = []
    for _ in range(1000):
        out += session.take()
        job = session.next_job()
        if job is None:
            if session._reply is None and not session.busy:
                break
            session.feed(np.zeros(320, np.float32))
            continue
        try:
            result = lane.run(job)
        except Exception as exc:
            session.on_job_failed(job, exc)
            continue
        session.on_result(job, result)
        if isinstance(job, TtsJob) and session._reply is not None:
            session.on_played(session._reply.gen_id, session._playback.queued)
    return out + session.take()


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ([call_part(name="steal", arguments='{"item": "axe"}'), END], "not a tool here"),
        ([call_part(name="sell", arguments='{"item": "bow"}'), END], "expected one of"),
        ([call_part(name="sell", arguments='{"item": '), {"x": 1}], "malformed stream chunk"),
        ([delta(content='{"name": "sell"}'), END], ""),  # words, even JSON-like: no call
    ],
)
def test_a_bad_call_is_an_error_event_and_the_usual_reply_is_said(
    server: tuple[str, Script], call: list[Any], problem: str
) -> None:
    url, script = server
    script.events, script.reply = call, [delta(content="Happy to help."), END]
    out = _converse(backend(url), "I'd buy an axe or two")
    assert not [e for e in out if isinstance(e, ToolCall)]
    errors = [e for e in out if isinstance(e, Error)]
    if problem:
        assert [e.code for e in errors] == ["tool_choice_failed"]
        assert problem in errors[0].message
    else:
        assert not errors
    said = "".join(e.text for e in out if isinstance(e, ReplyText)).strip()
    assert said == "Happy to help."  # the reply, never the call's JSON or the words
    assert [("tools" in r) for r in script.requests] == [True, False]
