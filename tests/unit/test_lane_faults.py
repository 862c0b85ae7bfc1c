"""The lane's step timeout and the fault-drill spec (pure logic, fake engines)."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from voice.conversation.actions import LlmClose, LlmStep, TtsJob
from voice.errors import ConfigError
from voice.runtime.engines import EngineLane, Engines, EngineTimeout
from voice.runtime.faults import Fault, FaultyLane, make_lane, parse_faults


class SlowVoice:
    """A synthesizer that blocks until released, or until aborted."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.aborted = False
        self.calls = 0

    def synthesize(self, text: str) -> Any:
        self.calls += 1
        if text == "hang":
            self.release.wait(5)
        yield np.ones(10, dtype=np.float32)

    def abort(self) -> None:
        self.aborted = True  # noted; the hang is not released (a worse case than Piper's)


def engines(voice: SlowVoice) -> Engines:
    return Engines(asr=None, llm=None, tts=voice)  # type: ignore[arg-type]


def test_a_hung_step_times_out_and_the_next_runs_on_a_fresh_worker() -> None:
    voice = SlowVoice()
    lane = EngineLane(engines(voice), timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(EngineTimeout) as caught:
        lane.run(TtsJob(1, 0, "hang"))
    assert 0.3 <= time.monotonic() - started < 1.0
    assert caught.value.code == "tts_timeout" and "0.3 s" in str(caught.value)
    assert voice.aborted  # speech can be stopped, so it was
    # The old worker is still blocked; the next step runs on a fresh one at once.
    started = time.monotonic()
    assert len(lane.run(TtsJob(1, 1, "fine"))) == 10  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.2
    voice.release.set()


class StuckModel:
    """A serial (embedded-like) LLM whose steps block while ``hold`` is set."""

    serial = True
    context_tokens = 2048

    def __init__(self) -> None:
        self.free = threading.Event()

    def count_tokens(self, messages: Any) -> int:
        return 1

    def stream(self, messages: Any, cancel: Any = None, max_tokens: Any = None) -> Any:
        self.free.wait(5)
        yield "word "


def test_a_stuck_model_fails_later_llm_work_at_once_until_it_returns() -> None:
    model = StuckModel()
    lane = EngineLane(Engines(asr=None, llm=model, tts=SlowVoice()), timeout_s=0.3)  # type: ignore[arg-type]
    with pytest.raises(EngineTimeout):
        lane.run(LlmStep(1, []))
    started = time.monotonic()
    with pytest.raises(EngineTimeout, match="still stuck"):
        lane.run(LlmStep(2, []))
    assert lane.run(LlmClose(2)) is None
    assert time.monotonic() - started < 0.1  # no second wait
    assert len(lane.run(TtsJob(1, 0, "fine"))) == 10  # type: ignore[arg-type]  # speech goes on
    model.free.set()
    time.sleep(0.1)
    assert lane.run(LlmStep(3, [])) == "word "  # it came back: the model works again


def test_phrases_rendered_ahead_are_rendered_once_per_process() -> None:
    voice = SlowVoice()
    shared = engines(voice)
    for _ in range(3):
        EngineLane(shared).run(TtsJob(-1, 0, "Sorry."))
    assert voice.calls == 1


def test_fault_specs() -> None:
    assert parse_faults("llm:raise@3, tts:hang@1x2") == [
        Fault("llm", "raise", 3, 1), Fault("tts", "hang", 1, 2)
    ]  # fmt: skip
    assert parse_faults("") == []
    fault = Fault("asr", "raise", 2, 2)
    assert [fault.hits(n) for n in range(1, 5)] == [False, True, True, False]
    for bad in ("llm:explode@1", "gpu:raise@1", "llm:raise", "llm:raise@x"):
        with pytest.raises(ConfigError, match="ENGINE:MODE@N"):
            parse_faults(bad)


def test_make_lane_drills_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    shared = engines(SlowVoice())
    monkeypatch.delenv("VOICE_FAULTS", raising=False)
    assert type(make_lane(shared)) is EngineLane
    monkeypatch.setenv("VOICE_FAULTS", "tts:raise@2")
    lane = make_lane(shared)
    assert isinstance(lane, FaultyLane)
    lane.run(TtsJob(-1, 0, "phrase"))  # phrases rendered ahead are not counted
    lane.run(TtsJob(1, 0, "one"))
    with pytest.raises(RuntimeError, match="injected tts fault"):
        lane.run(TtsJob(1, 1, "two"))
    lane.run(TtsJob(1, 2, "three"))


def test_the_engine_thread_hands_freed_memory_back_when_it_falls_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from voice.runtime import engines

    trims: list[int] = []
    monkeypatch.setattr(engines, "release_freed_memory", lambda: trims.append(1))
    worker = engines._Worker()
    release = threading.Event()
    first = worker.submit(lambda: release.wait(5))
    second = worker.submit(lambda: "done")  # queued behind the first: no trim between
    release.set()
    assert second.result(5) == "done" and first.result(5) is True
    deadline = time.monotonic() + 5
    while not trims and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.shutdown()
    assert trims == [1]
