"""Access checks, rate limits, Prometheus metrics and transcripts: pure logic."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import wave
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from websockets.datastructures import Headers
from websockets.http11 import Request

from voice.conversation.transcript import TranscriptWriter, load_transcript, read_transcript
from voice.events import Error, Final, Interrupted, ReplyEnded, ReplyStarted, TurnMetrics
from voice.runtime.memory import HeapUsage, heap_usage
from voice.serve.access import Access, exposure_warning, is_loopback
from voice.serve.limits import LoopLag, RateGuard
from voice.serve.metrics import ServerMetrics


def request(path: str = "/ws", **headers: str) -> Request:
    h = Headers()
    for name, value in headers.items():
        h[name.replace("_", "-")] = value
    return Request(path, h)


# -- access --------------------------------------------------------------------------------


def test_no_token_configured_lets_anyone_from_the_same_origin_in() -> None:
    access = Access()
    assert access.check(request(Host="127.0.0.1:8765")) is None  # not a browser
    assert access.check(request(Host="127.0.0.1:8765", Origin="http://127.0.0.1:8765")) is None


def test_token_by_header_or_query_and_refusal_otherwise() -> None:
    access = Access(token="s3cret")
    assert access.check(request("/ws?token=s3cret")) is None
    assert access.check(request("/ws", Authorization="Bearer s3cret")) is None
    for bad in (request("/ws"), request("/ws?token=s3cre"), request("/ws", Authorization="x")):
        refusal = access.check(bad)
        assert refusal is not None and refusal.status == 401 and refusal.reason == "bad_token"
        assert "?token=" in refusal.text  # says what to do


def test_foreign_origins_are_refused_unless_allowed() -> None:
    other = request(Host="127.0.0.1:8765", Origin="https://evil.example")
    refusal = Access().check(other)
    assert refusal is not None and refusal.status == 403 and refusal.reason == "bad_origin"
    assert "--allow-origin https://evil.example" in refusal.text
    assert Access(origins=["https://evil.example"]).check(other) is None
    assert Access(origins=["*"]).check(other) is None
    # The origin check is for pages; /metrics callers (no browser) skip it.
    assert Access().check(other, need_origin_check=False) is None


def test_dns_rebinding_does_not_pass_for_the_same_origin() -> None:
    # attacker.example resolves to 127.0.0.1: Origin and Host agree, and the host is
    # not this machine's name. Without a token that is refused.
    rebound = request(Host="attacker.example:8765", Origin="http://attacker.example:8765")
    refusal = Access().check(rebound)
    assert refusal is not None and refusal.reason == "bad_origin"
    assert Access().check(request(Host="localhost:8765", Origin="http://localhost:8765")) is None
    assert Access().check(request(Host="[::1]:8765", Origin="http://[::1]:8765")) is None
    # With a token, a page served by a public name is the server's own.
    public = request("/ws?token=t", Host="voice.example", Origin="https://voice.example")
    assert Access(token="t").check(public) is None


def test_token_from_the_environment(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("VOICE_SERVE_TOKEN", "from-env")
    assert Access.from_options(None, None).token == "from-env"
    assert Access.from_options("flag", None).token == "flag"


def test_exposure_warning_names_what_is_missing() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("example.org")
    assert exposure_warning("127.0.0.1", "", False) is None
    warning = exposure_warning("0.0.0.0", "", False)
    assert warning is not None and "no token" in warning and "no TLS" in warning
    warning = exposure_warning("0.0.0.0", "t", False)
    assert warning is not None and "no token" not in warning
    assert exposure_warning("0.0.0.0", "t", True) is None


# -- rate ----------------------------------------------------------------------------------


def test_real_time_audio_passes_and_a_fast_sender_is_cut_to_real_time() -> None:
    guard = RateGuard(burst_s=1.0, flood_s=10.0)
    # A microphone: 20 ms frames at real time, jittered in clumps of five.
    t = 0.0
    for k in range(500):
        if k % 5 == 0:
            t = k * 0.02 + 0.1
        assert guard.admit(0.02, t)
    # A replayed file: 30 s of audio in one second of wall time.
    fast = RateGuard(burst_s=1.0, flood_s=10.0)
    admitted = sum(fast.admit(0.02, 100.0 + k / 1500) for k in range(1500))
    assert 0.02 * admitted <= 1.0 + 1.0 + 0.02  # the burst and the elapsed second
    assert fast.dropped_s > 25
    assert fast.flooding(101.0)
    assert not guard.flooding(t)


def test_quiet_time_cannot_be_saved_up_for_a_burst() -> None:
    guard = RateGuard(burst_s=1.0, flood_s=10.0)
    assert guard.admit(0.02, 0.0)
    # Ten minutes of nothing (a client that only sends text), then 500 s of audio at once.
    admitted = sum(guard.admit(0.02, 600.0 + k * 1e-5) for k in range(25000))
    assert 0.02 * admitted <= 1.0 + 0.25 + 0.02  # the burst and the 0.25 s it took
    assert guard.flooding(600.5)


def test_a_stall_is_counted_once_between_two_frames_even_before_the_heartbeat() -> None:
    lag = LoopLag(period_s=0.05)
    for _ in range(20):
        lag.beat(lag.last_beat + 0.05)
    start = lag.last_beat
    assert lag.stalled_since(start - 0.02, start + 0.04) == 0.0
    # The loop stood still 2 s; a connection reads its clump before the heartbeat runs.
    assert lag.stalled_since(start + 0.04, start + 2.0) == pytest.approx(1.95)
    lag.beat(start + 2.01)  # the heartbeat catches up: no second stall
    assert lag.stalled_since(start + 2.0, start + 2.05) == 0.0


def test_the_stall_credit_is_not_a_burst_allowance_for_later() -> None:
    """After a stall's clump is in, a client that goes quiet and then dumps audio gets
    no more than the burst, like any client; nor does one that connects afterwards."""
    lag = LoopLag(period_s=0.05)
    guard = RateGuard(burst_s=1.0, loop_lag=lag)
    t = lag.last_beat
    for _ in range(50):  # a second of real time, the loop running
        t += 0.02
        lag.beat(t)
        assert guard.admit(0.02, t)
    t += 3.0  # the loop stalls 3 s; the clump of 3 s follows at once
    assert all(guard.admit(0.02, t + k * 1e-4) for k in range(150))
    t += 4.0  # quiet for 4 s (the loop ran), then 5 s at once
    for k in range(80):
        lag.beat(t - 4.0 + k * 0.05)
    admitted = sum(guard.admit(0.02, t + k * 1e-5) for k in range(250))
    assert 0.02 * admitted <= 1.0 + 0.02
    newcomer = RateGuard(burst_s=1.0, loop_lag=lag)
    assert 0.02 * sum(newcomer.admit(0.02, t + k * 1e-5) for k in range(250)) <= 1.0 + 0.02


def test_audio_that_piled_up_while_the_server_stalled_is_not_too_fast() -> None:
    """A real event loop blocked for 2 s while a microphone thread goes on sending 20 ms
    frames: they are read in one clump afterwards. With the loop's stall forgiven the
    guard admits all of it; a guard that ignores the stall drops a second of speech."""
    import asyncio
    import threading

    lag = LoopLag()
    forgiving, strict = RateGuard(burst_s=1.0, loop_lag=lag), RateGuard(burst_s=1.0)
    frames = 250  # 5 s

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        heartbeat = asyncio.create_task(lag.watch())
        queue: asyncio.Queue[int] = asyncio.Queue()

        def microphone() -> None:
            start = time.monotonic()
            for k in range(frames):
                time.sleep(max(0.0, start + k * 0.02 - time.monotonic()))
                loop.call_soon_threadsafe(queue.put_nowait, k)

        def stall() -> None:
            time.sleep(2.0)  # a slow callback: nobody reads meanwhile

        threading.Thread(target=microphone, daemon=True).start()
        loop.call_later(1.0, stall)
        admitted = [0, 0]
        for _ in range(frames):
            await queue.get()
            now = time.monotonic()
            admitted[0] += forgiving.admit(0.02, now)
            admitted[1] += strict.admit(0.02, now)
        heartbeat.cancel()
        return admitted[0], admitted[1]

    kept, kept_strictly = asyncio.run(main())
    assert kept == frames
    assert kept_strictly < frames - 20  # the contrast: the stall would have cost speech
    assert not forgiving.flooding(time.monotonic())


# -- metrics -------------------------------------------------------------------------------


def _turn(v2v: float | None, barge: float | None) -> TurnMetrics:
    return TurnMetrics(
        audio_ms=0, turn_id=1, reply_id=1, user_text="hi", user_start_ms=0, user_end_ms=1,
        end_silence_ms=300, eot_probability=None, speculative=False, asr_final_ms=None,
        llm_first_token_ms=None, first_audio_ready_ms=None, voice_to_voice_ms=v2v,
        barge_in_ms=barge, interrupted=barge is not None,
    )  # fmt: skip


def test_prometheus_text_parses_and_carries_the_figures() -> None:
    metrics = ServerMetrics()
    for ms in range(100, 1100, 10):  # 100 turns, 100..1090 ms
        metrics.observe(_turn(float(ms), None))
    metrics.observe(_turn(None, 80.0))
    metrics.observe(ReplyStarted(audio_ms=0, reply_id=1, utterance_id=1, text="x", speculative=0))
    metrics.observe(Interrupted(audio_ms=0, reply_id=1, heard_text="", played_ms=0))
    metrics.observe(Error(audio_ms=0, code="llm_timeout", message="m"))
    metrics.error('odd"code')  # not a code of ours: counted, under a bounded label
    metrics.refuse("bad_token")
    hub = {"sessions": 2, "max_sessions": 4, "engine_busy": 0.5,
           "by_kind": {"tts": {"jobs": 3, "seconds": 1.5}}}  # fmt: skip
    heap = HeapUsage(in_use_bytes=1000, free_bytes=200, python_blocks=30)
    text = metrics.prometheus(hub, 123, heap, queue_depth=1).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}  # fmt: skip
    assert families["voice_voice_to_voice_seconds"].type == "histogram"
    assert samples[("voice_voice_to_voice_seconds_bucket", (("le", "0.5"),))] == 41  # 100..500
    assert samples[("voice_voice_to_voice_seconds_bucket", (("le", "1.0"),))] == 91
    assert samples[("voice_voice_to_voice_seconds_count", ())] == 100
    assert abs(samples[("voice_voice_to_voice_seconds_sum", ())] - 59.5) < 1e-6
    assert samples[("voice_barge_in_seconds_count", ())] == 1
    assert samples[("voice_turns_total", ())] == 101
    assert samples[("voice_replies_total", ())] == 1
    assert samples[("voice_interruptions_total", ())] == 1
    assert samples[("voice_errors_total", (("code", "llm_timeout"),))] == 1
    assert samples[("voice_errors_total", (("code", "other"),))] == 1
    assert samples[("voice_refused_total", (("reason", "bad_token"),))] == 1
    assert samples[("voice_active_sessions", ())] == 2
    assert samples[("voice_engine_queue_depth", ())] == 1
    assert samples[("voice_engine_jobs_total", (("kind", "tts"),))] == 3
    assert samples[("process_resident_memory_bytes", ())] == 123
    assert samples[("voice_heap_in_use_bytes", ())] == 1000
    assert samples[("voice_heap_free_bytes", ())] == 200
    assert samples[("voice_python_allocated_blocks", ())] == 30


def test_metrics_without_turns_still_parse() -> None:
    text = ServerMetrics().prometheus({"sessions": 0, "max_sessions": 1}, None).decode()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert "voice_voice_to_voice_seconds" in names


# -- transcripts ---------------------------------------------------------------------------


def test_transcript_records_what_was_said_and_heard(tmp_path: Path) -> None:
    writer = TranscriptWriter(tmp_path, "s1", record_audio=True)
    writer.observe(Final(audio_ms=0, utterance_id=1, text=" Hello there. ", start_ms=0,
                         end_ms=900, compute_ms=1))  # fmt: skip
    writer.observe(ReplyEnded(audio_ms=0, reply_id=1, text="Hi! How can I help you today?",
                              heard_text="Hi! How can", interrupted=True))  # fmt: skip
    writer.observe(Error(audio_ms=0, code="tts_failed", message="boom"))
    writer.audio(np.full(1600, 0.1, dtype=np.float32))
    writer.close()
    records = read_transcript(writer.path)
    assert [r["type"] for r in records] == [
        "session_start", "user", "assistant", "error", "session_end"
    ]  # fmt: skip
    assert records[1]["text"] == "Hello there."
    assert records[2] == {**records[2], "text": "Hi! How can", "interrupted": True,
                          "unheard": "I help you today?"}  # fmt: skip
    assert writer.path.with_suffix(".wav").stat().st_size == 44 + 3200
    assert oct(writer.path.stat().st_mode & 0o777) == "0o600"
    assert oct(writer.path.with_suffix(".wav").stat().st_mode & 0o777) == "0o600"


def test_no_audio_is_stored_unless_asked(tmp_path: Path) -> None:
    writer = TranscriptWriter(tmp_path, "s2")
    writer.audio(np.zeros(160, dtype=np.float32))
    writer.close()
    assert [p.suffix for p in tmp_path.iterdir()] == [".jsonl"]


def _kill_mid_stream(script: str, after_s: float) -> None:
    """Run a writing script until it says ready, let it write for ``after_s``, SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                            stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    time.sleep(after_s)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_killed_writer_leaves_whole_lines_and_a_reopened_one_goes_on_cleanly(
    tmp_path: Path,
) -> None:
    """SIGKILL a writer mid-stream of long lines: every line but possibly the last is a
    whole record with no gap in the sequence, and a writer reopening the file starts on
    a line of its own, wherever the kill landed (this never depends on the timing)."""
    path = tmp_path / "t.jsonl"
    _kill_mid_stream(
        f"""
        from pathlib import Path
        from voice.conversation.transcript import TranscriptWriter
        w = TranscriptWriter(Path({str(tmp_path)!r}), "k", path=Path({str(path)!r}))
        print("ready", flush=True)
        i = 0
        while True:
            w.write({{"type": "user", "text": "word " * (i % 900), "i": i}})
            i += 1
    """,
        after_s=0.3,
    )
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    whole, last = lines[:-1], lines[-1]  # ``last`` is b"" unless the last line was torn
    records = [json.loads(line) for line in whole]
    assert [r["i"] for r in records[1:]] == list(range(len(records) - 1))
    assert len(records) > 20

    try:  # a kill between a record and its newline leaves a whole record, kept
        records += [json.loads(last)] if last else []
        torn = 0
    except ValueError:
        torn = 1
    writer = TranscriptWriter(tmp_path, "k", path=path)
    writer.write({"type": "user", "text": "after the crash", "i": -1})
    writer.close()
    read = load_transcript(path)
    assert read.torn == torn
    assert read.records[: len(records)] == records
    assert [r["type"] for r in read.records[len(records) :]] == [
        "session_start", "user", "session_end"
    ]  # fmt: skip
    assert read.records[len(records) + 1]["text"] == "after the crash"


def test_a_torn_line_is_ended_by_the_next_writer_and_skipped_by_the_reader(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type": "user", "text": "whole"}\n{"type": "user", "text": "to')
    assert read_transcript(path) == [{"type": "user", "text": "whole"}]
    TranscriptWriter(tmp_path, "s", path=path).close()
    raw = path.read_bytes()
    assert b'"text": "to\n{' in raw  # the torn line ended before the next record
    read = load_transcript(path)
    assert read.torn == 1
    assert [r["type"] for r in read.records] == ["user", "session_start", "session_end"]


def test_a_last_record_that_lost_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type": "user", "text": "a"}\n{"type": "user", "text": "b"}')
    assert load_transcript(path) == ([{"type": "user", "text": "a"},
                                      {"type": "user", "text": "b"}], 0)  # fmt: skip


def test_a_killed_audio_recorder_leaves_a_wav_that_plays_every_sample_its_header_claims(
    tmp_path: Path,
) -> None:
    """The header is patched after each block is written and flushed, so it never claims
    samples that are not on disk, whenever the process dies."""
    _kill_mid_stream(
        f"""
        from pathlib import Path
        import numpy as np
        from voice.conversation.transcript import TranscriptWriter
        w = TranscriptWriter(Path({str(tmp_path)!r}), "a", record_audio=True)
        block = np.full(320, 0.25, dtype=np.float32)
        w.audio(block)
        print("ready", flush=True)
        while True:
            w.audio(block)
    """,
        after_s=0.3,
    )
    (wav_path,) = tmp_path.glob("*.wav")
    with wave.open(str(wav_path), "rb") as wav:
        frames = wav.getnframes()
        samples = np.frombuffer(wav.readframes(frames), dtype=np.int16)
    assert frames >= 320
    assert len(samples) == frames  # every claimed sample is there
    assert np.all(samples == samples[0])


def test_heap_usage_sees_a_live_allocation_and_its_release() -> None:
    """What tells a leak from kept free memory: a live 64 MB block counts as in use
    (Python's numpy buffer comes from the C heap), and stops counting once freed."""
    before = heap_usage()
    if before.in_use_bytes is None:
        pytest.skip("glibc's mallinfo2 is not available here")
    block = np.ones(64 * 2**20, dtype=np.uint8)
    held = heap_usage()
    del block
    after = heap_usage()
    assert held.in_use_bytes is not None and after.in_use_bytes is not None
    assert held.in_use_bytes - before.in_use_bytes >= 64 * 2**20
    assert held.in_use_bytes - after.in_use_bytes >= 64 * 2**20
    assert before.python_blocks > 0


def test_freed_memory_goes_back_to_the_system_at_most_every_few_seconds() -> None:
    from voice.runtime import memory

    memory._last = 0.0
    assert memory.release_freed_memory(now=1000.0) is (memory._libc is not False)
    assert memory.release_freed_memory(now=1001.0) is False  # rate-limited
    assert memory.release_freed_memory(now=1000.0 + memory.MIN_INTERVAL_S) is (
        memory._libc is not False
    )


def test_a_connection_cancelled_while_its_session_opens_closes_that_session() -> None:
    """The session opens on a worker thread (it may wait for an LLM context); a server
    shutting down meanwhile must not leave it holding a place and a context."""
    import asyncio
    import threading

    from voice.serve.server import Connection

    class SlowHub:
        def __init__(self) -> None:
            self.closed: list[str] = []
            self.done = threading.Event()

        def open(self, wake: object) -> str:
            time.sleep(0.2)
            return "session"

        def close(self, session: str) -> None:
            self.closed.append(session)
            self.done.set()

    hub = SlowHub()
    connection = object.__new__(Connection)
    connection.hub = hub  # type: ignore[assignment]

    async def cancel_while_opening() -> None:
        task = asyncio.create_task(connection._open_session())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.4)  # the thread finishes; its session is closed on the loop

    asyncio.run(cancel_while_opening())
    assert hub.closed == ["session"]
