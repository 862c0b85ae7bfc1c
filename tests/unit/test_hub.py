"""The shared engine thread's schedule across sessions (fake sessions and engines)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import numpy as np
import pytest

from voice.conversation.actions import AsrJob, Job, LlmStep, PrefillJob
from voice.listen.listener import TranscribeRequest
from voice.runtime.hub import EngineHub, HubSession, ServerFull


def asr(uid: int, live: bool = True) -> AsrJob:
    request = TranscribeRequest(
        request_id=uid, utterance_id=uid, audio=np.zeros(160, np.float32), context="",
        with_timestamps=False, end_sample=160, final=not live, live=live,
    )  # fmt: skip
    return AsrJob(request)


class FakeSession:
    """Hands out a fixed list of jobs, then nothing."""

    def __init__(self, jobs: list[Job], audio_ahead_ms: float = 0.0) -> None:
        self.jobs = list(jobs)
        self.results: list[Job] = []
        self.audio_ahead_ms = audio_ahead_ms
        self.awaiting_first_audio = False
        self.closed = False

    def next_job(self) -> Job | None:
        return self.jobs.pop(0) if self.jobs else None

    def on_result(self, job: Job, result: object) -> None:
        self.results.append(job)

    def take_back(self, job: Job) -> bool:
        return False

    def on_job_failed(self, job: Job, error: BaseException) -> None:
        raise AssertionError(error)

    def close(self) -> None:
        self.closed = True


class FakeLane:
    def __init__(self, name: str, log: list[str], gate: threading.Event | None = None) -> None:
        self.name, self.log, self.gate, self.closed = name, log, gate, False

    def run(self, job: Job) -> object:
        if self.gate is not None:
            self.gate.wait(5)
        kind = {AsrJob: "asr", PrefillJob: "prefill"}.get(type(job), "llm")
        self.log.append(f"{self.name}:{kind}")
        return None

    def close(self) -> None:
        self.closed = True


def attach(hub: EngineHub, name: str, jobs: list[Job], log: list[str], ahead_ms: float = 0.0,
           **kw: Any) -> HubSession:  # fmt: skip
    session = FakeSession(jobs, ahead_ms)
    return hub.attach(HubSession(session, FakeLane(name, log, **kw), None, lambda: None))  # type: ignore[arg-type]


def hub_for_tests(max_sessions: int = 4) -> EngineHub:
    return EngineHub(None, max_sessions=max_sessions)  # a scheduler only: nothing is loaded


def run_until(log: list[str], count: int) -> None:
    deadline = time.monotonic() + 5
    while len(log) < count and time.monotonic() < deadline:
        time.sleep(0.005)


def test_recognition_goes_before_another_sessions_reply() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    attach(hub, "talker", [LlmStep(1, [])] * 5, log, ahead_ms=5000, gate=gate)  # a long reply
    with hub:
        time.sleep(0.05)  # the talker's first step is running (held at the gate)
        attach(hub, "listener", [asr(1), asr(2), asr(3, live=False)], log, gate=gate)
        gate.set()
        run_until(log, 8)
    assert log[0] == "talker:llm"  # already running: one step is the most anyone waits
    assert log[1:4] == ["listener:asr"] * 3
    assert log[4:] == ["talker:llm"] * 4


def test_a_user_waiting_for_the_first_sound_goes_before_live_captions() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    attach(hub, "captions", [asr(1), asr(2)], log, gate=gate)
    waiting = attach(hub, "waiting", [LlmStep(1, [])] * 2, log, gate=gate)
    waiting.session.awaiting_first_audio = True  # type: ignore[attr-defined]
    with hub:
        gate.set()
        run_until(log, 4)
    assert log == ["waiting:llm"] * 2 + ["captions:asr"] * 2


def test_sessions_with_the_same_kind_of_work_take_turns() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    attach(hub, "a", [LlmStep(1, [])] * 4, log, gate=gate)
    attach(hub, "b", [LlmStep(2, [])] * 4, log, gate=gate)
    with hub:
        gate.set()
        run_until(log, 8)
    assert log == ["a:llm", "b:llm"] * 4


def test_a_reply_with_plenty_of_audio_queued_waits_for_another_reply_to_start() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    attach(hub, "covered", [LlmStep(1, [])] * 3, log, ahead_ms=5000, gate=gate)
    attach(hub, "silent", [LlmStep(2, [])] * 3, log, ahead_ms=0, gate=gate)
    with hub:
        gate.set()
        run_until(log, 6)
    assert log == ["silent:llm"] * 3 + ["covered:llm"] * 3


def test_a_closed_session_runs_nothing_more_and_it_and_its_generation_are_closed() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    gone = attach(hub, "gone", [LlmStep(1, [])] * 50, log, gate=gate)
    with hub:
        time.sleep(0.05)
        hub.close(gone)
        assert not gone.finished.is_set()  # its step is still running
        assert hub.stats()["sessions"] == 0 and hub.stats()["sessions_closing"] == 1
        gate.set()
        assert gone.finished.wait(1.0)  # what a process about to exit waits for
        time.sleep(0.1)
        assert hub.stats()["sessions_closing"] == 0
    assert log == ["gone:llm"]  # the step that was running when it closed
    assert gone.lane.closed  # type: ignore[attr-defined]
    assert gone.session.closed  # type: ignore[attr-defined]  # its native models freed
    assert len(hub.cancel_ms) == 1 and hub.stats()["sessions"] == 0


def test_closing_a_session_twice_or_after_the_hub_stopped_does_not_leave_a_waiter_hanging() -> None:
    hub = hub_for_tests()
    with hub:
        session = attach(hub, "once", [], [])
        hub.close(session)
        assert session.finished.wait(1.0)
        hub.close(session)  # again: already done
        left = attach(hub, "left", [], [])
    assert left.finished.is_set()  # the hub stopped with it still open


def test_sessions_beyond_the_maximum_are_refused() -> None:
    hub = hub_for_tests(max_sessions=1)
    attach(hub, "one", [], [])
    with pytest.raises(ServerFull) as refused:
        attach(hub, "two", [], [])
    assert "--max-sessions" in str(refused.value)


class PrefillThenReply(FakeSession):
    """Offers a pre-fill (which can wait) until a reply becomes due."""

    def __init__(self) -> None:
        super().__init__([])
        self.reply_due = False
        self.taken_back = 0

    def next_job(self) -> Job | None:
        if self.reply_due:
            self.reply_due = False
            return LlmStep(9, [])
        return PrefillJob([])

    def take_back(self, job: Job) -> bool:
        self.taken_back += 1
        return isinstance(job, PrefillJob)


def test_work_that_can_wait_is_handed_back_so_urgent_work_is_not_stuck_behind_it() -> None:
    log: list[str] = []
    hub = hub_for_tests()
    gate = threading.Event()
    busy = attach(hub, "busy", [LlmStep(1, [])] * 40, log, gate=gate)
    session = PrefillThenReply()
    idle = hub.attach(HubSession(session, FakeLane("idle", log, gate), None, lambda: None))  # type: ignore[arg-type]
    with hub:
        time.sleep(0.05)
        session.awaiting_first_audio = True
        session.reply_due = True  # the turn ended: its reply is due now
        gate.set()
        run_until(log, 4)
    assert session.taken_back >= 1
    assert log[1] == "idle:llm"  # the reply's step, not the pre-fill it had offered first
    assert "idle:prefill" not in log[:2]
    assert busy is not idle


def test_closing_a_session_aborts_the_speech_it_is_rendering() -> None:
    from voice.conversation.actions import TtsJob

    class Tts:
        aborted = threading.Event()

        def abort(self) -> None:
            self.aborted.set()

    class RenderingLane(FakeLane):
        engines = type("E", (), {"tts": Tts()})()

        def run(self, job: Job) -> object:
            Tts.aborted.wait(5)  # a sentence that only ends when aborted
            self.log.append("aborted" if Tts.aborted.is_set() else "finished")
            return None

    log: list[str] = []
    hub = hub_for_tests()
    speaking = hub.attach(
        HubSession(FakeSession([TtsJob(1, 0, "A long sentence.")]), RenderingLane("x", log),
                   None, lambda: None)  # type: ignore[arg-type]
    )  # fmt: skip
    with hub:
        time.sleep(0.05)
        hub.close(speaking)
        run_until(log, 1)
    assert log == ["aborted"]


def test_a_session_that_fails_to_open_gives_its_llm_context_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An application hook that raises must not cost the pool a context for good."""
    import voice.runtime.hub as hub_module
    from voice.runtime.engines import Engines

    built: list[FakeSession] = []

    def build_session(engines: Engines) -> FakeSession:
        built.append(FakeSession([]))
        return built[-1]

    monkeypatch.setattr(hub_module, "make_lane", lambda engines, timeout: FakeLane("x", []))
    engines = Engines(asr=None, llm="context-0", tts=None)  # type: ignore[arg-type]
    failures = [RuntimeError("the application's hook failed")]

    def configure(session: object) -> None:
        if failures:
            raise failures.pop()

    hub = EngineHub(
        engines, max_sessions=1, build=build_session, new_context=lambda: "context-new",
        configure=configure,
    )  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(RuntimeError):
        hub.open(lambda: None)
    assert built[0].closed  # the half-built session's native parts are freed at once
    opened = hub.open(lambda: None)
    assert opened.context == "context-0"
    assert not built[1].closed
    assert hub.stats()["llm_contexts"] == 1


def test_opens_that_overlap_beyond_the_maximum_are_refused_without_making_contexts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A crowd reconnecting at once: before, every open passed the check, borrowed (or
    after a wait made) a context, and was refused only when attaching, so the pool kept
    a context per refused client for good."""
    import voice.runtime.hub as hub_module
    from voice.runtime.engines import Engines

    def build_session(engines: Engines) -> FakeSession:
        time.sleep(0.2)  # loading Silero, warming the context
        return FakeSession([])

    monkeypatch.setattr(hub_module, "make_lane", lambda engines, timeout: FakeLane("x", []))
    made = itertools.count(1)
    engines = Engines(asr=None, llm="context-0", tts=None)  # type: ignore[arg-type]
    hub = EngineHub(
        engines, max_sessions=2, build=build_session,
        new_context=lambda: f"context-{next(made)}",
    )  # type: ignore[arg-type]  # fmt: skip
    outcomes: list[str] = []

    def connect() -> None:
        try:
            hub.open(lambda: None)
            outcomes.append("open")
        except ServerFull:
            outcomes.append("full")

    threads = [threading.Thread(target=connect) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(outcomes) == ["full"] * 4 + ["open"] * 2
    assert hub.stats()["llm_contexts"] == 2
