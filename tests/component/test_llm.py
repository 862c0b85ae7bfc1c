"""The language model backends on the bundled GGUF: embedded, and over HTTP against a
real llama.cpp server (llama-cpp-python's ``llama_cpp.server``) started on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from voice.bench.llama_server import LlamaServerProcess, free_port
from voice.models import resolve_llm_model
from voice.think.backend import LlmConfig, Message
from voice.think.http import LlmUnavailableError, OpenAiHttpBackend
from voice.think.llama import LlamaBackend

PROMPT = [
    Message("system", "You are a helpful assistant."),
    Message("user", "Write a long story about a dragon who learns to bake bread."),
]


@pytest.fixture(scope="module")
def llama() -> LlamaBackend:
    return LlamaBackend(LlmConfig(temperature=0.0))


def test_embedded_streams_cancels_within_a_token_and_answers_again(llama: LlamaBackend) -> None:
    reference = "".join(llama.stream(PROMPT, max_tokens=24))
    assert len(reference.split()) >= 5

    cancel = threading.Event()
    seen = []
    for delta in llama.stream(PROMPT, cancel, max_tokens=200):
        seen.append(delta)
        if len(seen) == 3:
            cancel.set()
    assert len(seen) == 3  # not one token more after the cancel

    # The model is free at once, and its state is intact: the same greedy answer again.
    assert "".join(llama.stream(PROMPT, max_tokens=24)) == reference


def test_reply_is_capped(llama: LlamaBackend) -> None:
    deltas = list(llama.stream(PROMPT, max_tokens=10))
    assert 1 <= len(deltas) <= 10


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, psutil.Process]]:
    with LlamaServerProcess() as llama_server:
        yield llama_server.url, llama_server.process


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def test_http_streams_and_cancel_stops_the_server(server: tuple[str, psutil.Process]) -> None:
    url, process = server
    backend = OpenAiHttpBackend(LlmConfig(backend="http", url=url, temperature=0.0))
    reply = "".join(backend.stream(PROMPT, max_tokens=20))
    assert len(reply.split()) >= 5

    # Generating costs the server CPU time...
    before = cpu_seconds(process)
    list(backend.stream(PROMPT, max_tokens=60))
    busy = cpu_seconds(process) - before
    assert busy > 0.3

    # ...and after a cancel mid-reply (400 tokens asked for) it spends next to none.
    cancel = threading.Event()
    for count, _ in enumerate(backend.stream(PROMPT, cancel, max_tokens=400), 1):
        if count == 10:
            cancel.set()
    time.sleep(0.3)
    before = cpu_seconds(process)
    time.sleep(1.5)
    idle = cpu_seconds(process) - before
    assert idle < busy / 5, (idle, busy)


def test_unreachable_server_is_a_clear_error_after_retries() -> None:
    backend = OpenAiHttpBackend(
        LlmConfig(backend="http", url=f"http://127.0.0.1:{free_port()}/v1", retries=1)
    )
    with pytest.raises(LlmUnavailableError, match="unreachable"):
        list(backend.stream(PROMPT))
    assert backend.state == "unreachable"


def test_prefill_moves_work_out_of_the_next_turn_without_changing_it(llama: LlamaBackend) -> None:
    from voice.reply.history import History

    history = History("You are brief.", llama.context_tokens, 40, llama.count_tokens)
    question = "Name a colour."
    history.add_turn(question, "".join(llama.stream(history.prompt_for(question), max_tokens=20)))
    follow_up = history.prompt_for("And another one?")
    expected = "".join(llama.stream(follow_up, max_tokens=12))

    llama.reset_cache()
    assert llama.prefill(history.so_far()) > 10  # the whole conversation, from scratch
    assert llama.prefill(history.so_far()) <= 1  # already there: nothing to do
    assert "".join(llama.stream(follow_up, max_tokens=12)) == expected


def test_q8_conversion_is_cached_and_skipped_for_high_precision_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from voice.think.requantize import converted_model

    monkeypatch.setenv("VOICE_CACHE_DIR", str(tmp_path))
    source = resolve_llm_model("default")
    converted = converted_model(source)
    assert converted.parent == tmp_path / "models" and converted.name.endswith(".q8_0.gguf")
    assert converted.stat().st_size > source.stat().st_size  # 8-bit weights, not 4-bit
    assert converted_model(source) == converted  # made once
    assert converted_model(converted) == converted  # already Q8_0: used as it is
    assert converted_model(source, "") == source  # turned off
