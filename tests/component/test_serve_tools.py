"""Tools a page declares, through a real `voice serve` and the real models: a spoken
turn calls the page's tool, the client answers the call and the reply says its result;
a client that never answers is a hung tool (the filler, then the apology); speech
over a call cancels it; bad declarations and bad answers get coded errors, late
answers are ignored, and the session goes on."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import numpy as np
import pytest
from conftest import VoiceServer, clip

from voice.serve.client import VoiceClient

pytestmark = [pytest.mark.slow, pytest.mark.alone]

LIGHT: dict[str, Any] = {
    "name": "switch_light",
    "description": "Switch the light on or off.",
    "parameters": {
        "type": "object",
        "properties": {"state": {"type": "string", "enum": ["on", "off"]}},
        "required": ["state"],
    },
    "examples": ["turn on the light", "switch the light off", "lights on please"],
}
LEAD_S = 0.3


@functools.cache
def spoken(text: str) -> np.ndarray:
    """``text`` said by the bundled Piper voice, after a short silence (no corpus clip
    asks for a light)."""
    from voice.speak.tts import PiperTts

    speech = PiperTts().synthesize_all(text)
    return np.concatenate([np.zeros(int(LEAD_S * 16000), np.float32), speech])


def errors(client: VoiceClient) -> list[str]:
    return [m["code"] for m in client.of_type("error")]


def test_a_page_tool_is_called_answered_and_its_result_said(voice_server: VoiceServer) -> None:
    async def main() -> VoiceClient:
        bad = {"name": "dim", "description": "Dim it.", "parameters": {"type": "array"}}
        async with VoiceClient(voice_server.ws_url, tools=[LIGHT, bad]) as client:
            assert client.ready["tools"] == ["switch_light"]  # the bad one is left out
            await client.wait_for(lambda: errors(client) == ["bad_tool"], 5, "bad_tool")
            client.say(spoken("Turn the light on, please."), onset_s=LEAD_S)
            await client.wait_for(lambda: client.of_type("tool_call"), 30, "the tool call")
            (call,) = client.of_type("tool_call")
            answer = {"type": "tool_result", "call_id": call["call_id"]}
            await client.send_json({**answer, "result": "The light is on."})
            await client.wait_for(lambda: client.of_type("reply_end"), 30, "the reply")
            # Answered twice: ignored. A call never made, and an answer of no shape: errors.
            await client.send_json({**answer, "result": "again"})
            await client.send_json({**answer, "call_id": 999, "result": "made up"})
            await client.send_json({"type": "tool_result", "call_id": call["call_id"]})
            await client.wait_for(lambda: len(errors(client)) >= 3, 5, "two errors")
            await asyncio.sleep(0.3)
            return client

    client = run(main())
    (call,) = client.of_type("tool_call")
    assert call["name"] == "switch_light" and call["arguments"] == {"state": "on"}
    assert call["time_limit_ms"] == 5000  # the server's [tools] limit: the page must answer
    (result,) = client.of_type("tool_result")
    assert (result["call_id"], result["status"]) == (call["call_id"], "ok")
    assert result["result"] == "The light is on."
    (end,) = client.of_type("reply_end")
    assert end["text"].strip() == "The light is on."  # a string result is said as written
    assert errors(client) == ["bad_tool", "unknown_call", "bad_field"]
    bad_tool, unknown, _ = client.of_type("error")
    assert "tool dim" in bad_tool["message"] and "'array'" in bad_tool["message"]
    assert "999" in unknown["message"]


def test_a_page_that_never_answers_is_a_hung_tool(voice_server: VoiceServer) -> None:
    async def main() -> VoiceClient:
        tool = {**LIGHT, "time_limit_ms": 1000}  # shorter than the server's 5 s
        async with VoiceClient(voice_server.ws_url, tools=[tool]) as client:
            client.say(spoken("Please switch the light off."), onset_s=LEAD_S)
            await client.wait_for(lambda: client.of_type("reply_end"), 40, "the apology")
            (call,) = client.of_type("tool_call")
            late = {"type": "tool_result", "call_id": call["call_id"], "result": "Off."}
            await client.send_json(late)  # too late: ignored, no error
            await client.send_json({"type": "dance"})  # the session still answers
            await client.wait_for(lambda: "unknown_type" in errors(client), 5, "an error")
            return client

    client = run(main())
    (call,) = client.of_type("tool_call")
    assert call["arguments"] == {"state": "off"} and call["time_limit_ms"] == 1000
    (result,) = client.of_type("tool_result")
    assert result["status"] == "timeout" and 1000 <= result["run_ms"] < 2500
    assert errors(client) == ["tool_timeout", "unknown_type"]
    (end,) = client.of_type("reply_end")
    assert end["text"].strip() == "One moment. Sorry, I couldn't do that."


def test_speaking_over_a_page_tool_call_cancels_it(voice_server: VoiceServer) -> None:
    async def main() -> VoiceClient:
        async with VoiceClient(voice_server.ws_url, tools=[LIGHT]) as client:
            client.say(spoken("Turn the light on, please."), onset_s=LEAD_S)
            await client.wait_for(lambda: client.of_type("tool_call"), 30, "the tool call")
            client.say(clip("cmu_arctic_axb_a0004", lead_s=0.0))  # the page holds its answer
            await client.wait_for(lambda: client.of_type("tool_result"), 10, "the cancel")
            (call,) = client.of_type("tool_call")
            late = {"type": "tool_result", "call_id": call["call_id"], "result": "On."}
            await client.send_json(late)  # too late: ignored, no error
            await client.send_json({"type": "dance"})
            await client.wait_for(lambda: "unknown_type" in errors(client), 5, "an error")
            return client

    client = run(main())
    (result,) = client.of_type("tool_result")
    assert result["status"] == "cancelled" and result["run_ms"] < 5000
    assert errors(client) == ["unknown_type"]  # no timeout, no error for the late answer
    cut = [m["text"] for m in client.of_type("reply_text") if m["reply_id"] == result["reply_id"]]
    assert "".join(cut).strip() in ("", "One moment.")  # the filler at most: no apology


def run(coro: Any) -> Any:
    return asyncio.run(coro)
