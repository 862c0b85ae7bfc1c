"""Engines that fail mid-turn, through the real models: the user hears a short apology,
gets an error event, and the next turn is answered as if nothing happened.

Embedded faults are drills (``VOICE_FAULTS``: the real engines run every other job);
HTTP faults are real network faults between the HTTP backend and a real llama.cpp
server: a stream cut mid-reply, a stream that stalls, and a server that is down."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import clip

from voice.app.build import build_session, load_engines
from voice.bench.llama_server import LlamaServerProcess, free_port
from voice.config import Settings
from voice.runtime.engines import Engines
from voice.transports.simulate import Script, ScriptTurn, SimulationResult, simulate

# Modelled costs; the 2 s job time-out is over three times what a job takes on the one core
# a test worker has (tests/conftest.py), so these run beside another test.
pytestmark = pytest.mark.slow

APOLOGY = "Sorry, something went wrong. Please say that again."
TIMEOUT_S = 2.0


def settings(**llm: Any) -> Settings:
    s = Settings()
    s.llm.max_reply_tokens = 40
    s.llm.temperature = 0.0
    s.tts.variation = False  # the same voice every run: replies as long, turns placed alike
    for name, value in llm.items():
        setattr(s.llm, name, value)
    # Faults are counted per job: without speculation every LLM step is the reply's.
    s.conversation.speculate = False
    s.conversation.job_timeout_s = TIMEOUT_S
    return s


@pytest.fixture(scope="module")
def engines() -> Engines:
    return load_engines(settings())


def two_turns() -> Script:
    return Script([
        ScriptTurn(clip("cmu_arctic_axb_a0004", lead_s=0.0), name="glad", at_s=0.5),
        ScriptTurn(clip("cmu_arctic_aew_a0003", lead_s=0.0), name="hands",
                   after="reply_end", delay_s=0.8),
    ])  # fmt: skip


def converse(engines: Engines, config: Settings) -> SimulationResult:
    session = build_session(config, engines)
    return simulate(two_turns(), session, engines, repeatable=True)


def of(result: SimulationResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e["type"] == kind]


def assert_apologised_then_answered(result: SimulationResult, code: str) -> None:
    errors = of(result, "error")
    assert [e["code"] for e in errors] == [code], errors
    ends = of(result, "reply_end")
    assert len(ends) == 2, ends
    failed, answered = ends
    # The first reply ends with the apology, heard in full, after the error.
    chunks = [c for c in of(result, "audio_chunk") if c["reply_id"] == failed["reply_id"]]
    assert chunks and chunks[-1]["text"] == APOLOGY
    assert chunks[-1]["audio_ms"] >= errors[0]["audio_ms"]
    assert failed["heard_text"].endswith(APOLOGY) and not failed["interrupted"]
    start, end = int(errors[0]["audio_ms"] * 16), int(failed["audio_ms"] * 16)
    assert np.abs(result.played[start:end]).max() > 0.05  # it was played, not just queued
    # The next turn is heard and answered normally.
    finals = [f["text"].lower() for f in of(result, "final")]
    assert "shook hands" in finals[-1]
    assert answered["text"].strip() and APOLOGY not in answered["heard_text"]
    assert not answered["interrupted"]


@pytest.mark.parametrize(
    ("drill", "code"),
    [
        ("llm:raise@3", "llm_failed"),  # mid-reply
        ("llm:hang@2", "llm_timeout"),
        ("tts:raise@1", "tts_failed"),  # the reply's first sentence
        ("tts:hang@2", "tts_timeout"),
    ],
)
def test_an_engine_failing_mid_reply_is_apologised_for(
    engines: Engines, monkeypatch: pytest.MonkeyPatch, drill: str, code: str
) -> None:
    monkeypatch.setenv("VOICE_FAULTS", drill)
    assert_apologised_then_answered(converse(engines, settings()), code)


def test_a_lost_transcript_asks_the_user_to_say_it_again(
    engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOICE_FAULTS", "asr:raise@1")  # every pass over the first utterance
    result = converse(engines, settings())
    assert [e["code"] for e in of(result, "error")] == ["asr_failed"]  # once, not per pass
    first_final, second_final = of(result, "final")
    assert first_final["text"] == "" and "shook hands" in second_final["text"].lower()
    apology, answer = of(result, "reply_start")
    assert apology["utterance_id"] == -1 and apology["text"] == ""  # nothing to answer
    assert apology["audio_ms"] == first_final["audio_ms"]
    first_end, second_end = of(result, "reply_end")
    assert first_end["heard_text"] == APOLOGY and not first_end["interrupted"]
    assert second_end["reply_id"] == answer["reply_id"] and second_end["text"].strip()
    assert APOLOGY not in second_end["heard_text"]


# -- the HTTP backend against a real llama.cpp server -------------------------------------


class Proxy:
    """A loopback TCP proxy in front of the llama.cpp server. ``fault`` applies to the
    next connection only: "cut" forwards the first ``after`` bytes of the response and
    then closes it, as a crashing server would; "stall" forwards them and then goes
    silent, as a hung one would."""

    def __init__(self, upstream_port: int, after: int = 1500) -> None:
        self.upstream_port = upstream_port
        self.after = after
        self.fault = ""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            fault, self.fault = self.fault, ""
            threading.Thread(target=self._serve, args=(client, fault), daemon=True).start()

    def _serve(self, client: socket.socket, fault: str) -> None:
        upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        sent = 0
        with contextlib.suppress(OSError), client, upstream:
            while data := upstream.recv(4096):
                if fault and sent + len(data) > self.after:
                    client.sendall(data[: max(0, self.after - sent)])
                    if fault == "stall":
                        self.stop.wait()
                    for sock in (client, upstream):  # FIN now, and wake the other pump
                        sock.shutdown(socket.SHUT_RDWR)
                    return
                client.sendall(data)
                sent += len(data)

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(4096):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServerProcess]:
    with LlamaServerProcess() as server:
        yield server


@pytest.mark.parametrize(("fault", "code"), [("cut", "llm_unavailable"), ("stall", "llm_timeout")])
def test_the_http_backend_losing_its_server_mid_reply(
    engines: Engines, llama_server: LlamaServerProcess, fault: str, code: str
) -> None:
    proxy = Proxy(llama_server.port)
    try:
        config = settings(backend="http", url=proxy.url, retries=2)
        http_engines = load_engines(config)
        proxy.fault = fault
        session = build_session(config, http_engines)
        result = simulate(two_turns(), session, http_engines, repeatable=True)
        assert_apologised_then_answered(result, code)
        assert http_engines.llm.state == "ok"  # type: ignore[attr-defined]
    finally:
        proxy.close()


def test_an_unreachable_llm_server_is_retried_then_apologised_for(engines: Engines) -> None:
    config = settings(backend="http", url=f"http://127.0.0.1:{free_port()}/v1", retries=2)
    http_engines = load_engines(config)
    session = build_session(config, http_engines)
    result = simulate(two_turns(), session, http_engines, repeatable=True)
    errors = of(result, "error")
    assert [e["code"] for e in errors] == ["llm_unavailable", "llm_unavailable"]
    assert "unreachable" in errors[0]["message"] and "llama_cpp.server" in errors[0]["message"]
    assert http_engines.llm.state == "unreachable"  # type: ignore[attr-defined]
    # Both turns were heard, and each got the apology instead of silence.
    assert len(of(result, "final")) == 2
    assert [e["heard_text"] for e in of(result, "reply_end")] == [APOLOGY, APOLOGY]
