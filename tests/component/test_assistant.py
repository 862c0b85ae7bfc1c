"""The embedding API and the examples through the real models: personas that sound and
behave differently, several assistants sharing one set of models, the kiosk driven by
a corpus recording, and the NPCs by typed turns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import clip

from voice.assistant import Assistant, ModelPool
from voice.audio import write_wav
from voice.config import Settings
from voice.events import Event

# Paced in real time, but a core of their own is enough (a test worker has one: tests/conftest.py).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PERSONAS = ROOT / "examples" / "personas"
SENTENCE = "Good steel takes time, and a good blade takes longer."


@pytest.fixture(scope="module")
def pool() -> ModelPool:
    return ModelPool()


@pytest.fixture(scope="module")
def npcs(pool: ModelPool) -> tuple[Assistant, Assistant]:
    settings = Settings()
    settings.llm.temperature = 0.0  # the same answers every run
    return (Assistant(settings, PERSONAS / "brom.toml", pool=pool),
            Assistant(settings, PERSONAS / "pip.toml", pool=pool))  # fmt: skip


def median_f0(audio: np.ndarray, rate: int = 16000) -> float:
    """The median pitch of the voiced 40 ms frames (autocorrelation, 60-400 Hz)."""
    pitches = []
    for i in range(0, len(audio) - 640, 320):
        frame = audio[i : i + 640] - audio[i : i + 640].mean()
        if np.sqrt(np.mean(frame**2)) < 0.02:
            continue
        ac = np.correlate(frame, frame, "full")[639:]
        lo, hi = rate // 400, rate // 60
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.4 * ac[0]:
            pitches.append(rate / lag)
    return float(np.median(pitches))


def test_assistants_share_the_models_they_can(
    pool: ModelPool, npcs: tuple[Assistant, Assistant]
) -> None:
    brom, pip = npcs
    assert brom.engines.asr is pip.engines.asr  # Whisper once
    assert brom.engines.llm is not pip.engines.llm  # each its own conversation (KV cache)
    assert pool.loaded == {"asr": 1, "tts": 2}  # one recogniser; a voice per pace/pitch
    before = anonymous_mb()
    third = Assistant(persona=PERSONAS / "brom.toml", pool=pool)
    grew_mb = anonymous_mb() - before
    assert third.engines.tts is brom.engines.tts and pool.loaded == {"asr": 1, "tts": 2}
    # Its own KV cache and buffers (~70 MB here), not another copy of any model. (RSS
    # would count the weights' file pages twice, once per mapping; they are shared.)
    assert grew_mb < 120, grew_mb


def anonymous_mb() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_two_personas_sound_different(npcs: tuple[Assistant, Assistant]) -> None:
    brom, pip = npcs
    deep = np.concatenate(list(brom.engines.tts.synthesize(SENTENCE)))
    light = np.concatenate(list(pip.engines.tts.synthesize(SENTENCE)))
    # Brom speaks at 0.85, Pip at 1.2: the same words take Brom ~1.4x as long.
    assert 1.2 < len(deep) / len(light) < 1.7
    # Pitch 0.8 against 1.25: Brom's voice is clearly lower.
    assert median_f0(deep) < 0.8 * median_f0(light)


def ask(npc: Assistant, question: str) -> str:
    """A typed turn, answered in full (the clock runs on silence at real time)."""
    ended = threading.Event()
    answers: set[int] = set()  # replies to the user's turns (not greetings)
    heard: list[str] = []

    def on_event(event: Event) -> None:
        if event.type == "reply_start" and event.utterance_id != -1:  # type: ignore[attr-defined]
            answers.add(event.reply_id)  # type: ignore[attr-defined]
        elif event.type == "reply_end" and event.reply_id in answers:  # type: ignore[attr-defined]
            heard.append(event.heard_text)  # type: ignore[attr-defined]
            ended.set()

    npc.on("*", on_event)
    stop = threading.Event()
    clock = threading.Thread(target=npc.run_silent, args=(stop,))
    clock.start()
    try:
        npc.send_text(question)
        assert ended.wait(60), "no reply"
    finally:
        stop.set()
        clock.join()
    return heard[-1]


def test_two_personas_behave_differently(npcs: tuple[Assistant, Assistant]) -> None:
    brom, pip = npcs
    brom_says = ask(brom, "What do you sell?").lower()
    pip_says = ask(pip, "What do you sell?").lower()
    assert any(w in brom_says for w in ("sword", "axe", "steel", "horseshoe", "blade", "forge"))
    assert any(w in pip_says for w in ("potion", "herb", "remed", "tonic", "brew"))
    # Brom answers in one sentence; Pip runs on.
    assert brom_says.count(".") + brom_says.count("!") <= 2
    assert len(pip_says.split()) > len(brom_says.split())


def run_example(
    args: list[str], stdin: str = "", timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def test_the_kiosk_greets_answers_a_visitor_and_resets_when_idle(tmp_path: Path) -> None:
    wav = tmp_path / "visitor.wav"
    write_wav(wav, clip("cmu_arctic_axb_a0004", lead_s=4.0))  # after the greeting
    out = tmp_path / "kiosk.wav"
    result = run_example(["examples/kiosk.py", "--wav", str(wav), "--out", str(out), "--json",
                          "--idle-timeout", "3", "--tail", "12",
                          "--wake-word", "none"])  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    kinds = [e["type"] for e in events]
    starts = [e for e in events if e["type"] == "reply_start"]
    greeting, answer = starts[0], starts[1]
    assert greeting["utterance_id"] == -1  # said on its own
    (final,) = [e for e in events if e["type"] == "final" and e["text"]]
    assert "glad to see you" in final["text"].lower()
    assert answer["utterance_id"] == final["utterance_id"]
    # Idle after the answer: the visitor is forgotten and the next one greeted.
    assert "kiosk_reset" in kinds
    assert any(s["utterance_id"] == -1 for s in starts[2:])
    assert kinds.index("kiosk_reset") > kinds.index("final")
    from voice.audio import read_wav

    played = read_wav(out)
    assert np.abs(played[int(final["end_ms"] * 16) :]).max() > 0.05  # the answer was played


def test_the_kiosk_looks_up_the_days_events_with_its_tool() -> None:
    result = run_example(["examples/kiosk.py", "--text", "--json", "--wake-word", "none"],
                         stdin="What's on this weekend?\nWhen was the museum founded?\n",
                         )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    # The museum's age: from the knowledge, nearer the words than the events tool is.
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert (call["name"], call["arguments"]) == ("events", {"day": "weekend"})
    (done,) = [e for e in events if e["type"] == "tool_result"]
    assert done["status"] == "ok" and "puppet show" in done["result"]
    replies = [e["text"] for e in events if e["type"] == "reply_end"]
    assert any("puppet show" in text for text in replies)
    assert "1898" in replies[-1], replies


def test_the_npcs_answer_typed_turns_in_their_own_way() -> None:
    result = run_example(
        ["examples/npc.py", "--text"], stdin="What do you sell?\nPip, what do you sell?\n"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    brom = [line for line in lines if line.startswith("Brom: ")]
    pip = [line for line in lines if line.startswith("Pip: ")]
    assert len(brom) == 2 and len(pip) == 1, result.stdout  # greeting + answer; answer
    assert "(you turn to Pip)" in lines
    assert lines.index("(you turn to Pip)") < lines.index(pip[0])


def test_the_websocket_transport_brings_the_hook_and_callbacks(pool: ModelPool) -> None:
    import asyncio
    import time
    import urllib.request

    from voice.bench.llama_server import free_port
    from voice.serve.client import VoiceClient
    from voice.serve.server import ServeConfig

    bot = Assistant(Settings(), PERSONAS / "guide.toml", pool=pool)
    asked: list[str] = []
    finals: list[str] = []

    @bot.before_reply
    def hook(text: str) -> str:
        asked.append(text)
        return text

    bot.on("final", lambda event: finals.append(event.text))  # type: ignore[attr-defined]
    port, stop = free_port(), threading.Event()
    server = threading.Thread(target=bot.serve, args=(ServeConfig(port=port, max_sessions=1), stop))
    server.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

        async def talk() -> VoiceClient:
            async with VoiceClient(f"ws://127.0.0.1:{port}/ws") as client:
                await client.wait_for(lambda: client.message_count("reply_end") >= 1, 30, "hi")
                client.say(clip("cmu_arctic_axb_a0004", lead_s=0.3), onset_s=0.3)
                await client.wait_for(lambda: client.message_count("turn_metrics") >= 1, 40, "turn")
                return client

        client = asyncio.run(talk())
    finally:
        stop.set()
        server.join(30)
    greeting = client.of_type("reply_start")[0]
    assert greeting["utterance_id"] == -1  # the persona's greeting, said on connecting
    assert asked and "glad to see you" in asked[0].lower()  # the app's hook saw the turn
    assert any("glad to see you" in f.lower() for f in finals)  # and its callbacks the events
    assert not server.is_alive()
