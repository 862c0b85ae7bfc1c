"""The web client in a real browser: Debian's Chromium, driven by Playwright, with a
fake microphone that plays corpus speech, against a real `voice serve`.

Screenshots go to $VOICE_TEST_ARTIFACTS (default: test-artifacts/ in the checkout).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SERVER_ENV, VoiceServer, clip

from voice.audio import write_wav

pytestmark = [pytest.mark.slow, pytest.mark.alone]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(
    os.environ.get("VOICE_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)


def mic_file(
    tmp_path: Path, name: str, parts: list[tuple[str, float]], tail_s: float = 20.0
) -> Path:
    """A fake-microphone WAV: for each (clip, silence before it), then a long silence.
    The browser loses the file's first few ms and plays silence after it ends."""
    audio = [
        np.concatenate([np.zeros(int(gap * 16000), np.float32), clip(n, lead_s=0)])
        for n, gap in parts
    ]
    audio.append(np.zeros(int(tail_s * 16000), np.float32))
    path = (tmp_path / f"{name}.wav").resolve()  # the flag needs an absolute path
    write_wav(path, np.concatenate(audio), 16000)
    return path


async def open_page(pw: Any, mic: Path | None, url: str, press: bool = True) -> tuple[Any, Any]:
    """A phone-sized page that pressed Start (unless not ``press``); without ``mic`` the
    microphone is denied."""
    args = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--autoplay-policy=no-user-gesture-required", "--use-fake-device-for-media-stream",
    ]  # fmt: skip
    if mic is not None:
        args += [
            "--use-fake-ui-for-media-stream",
            f"--use-file-for-fake-audio-capture={mic}%noloop",
        ]
    browser = await pw.chromium.launch(
        executable_path=CHROMIUM, args=args, ignore_default_args=["--mute-audio"]
    )
    page = await browser.new_page(viewport={"width": 390, "height": 760})  # a phone
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await page.goto(url)
    if press:
        await page.click("#toggle")
    page.errors = errors
    return browser, page


async def state(page: Any) -> dict[str, Any]:
    return dict(
        await page.evaluate(
            """() => ({
            state: voiceState.state, frames: voiceState.framesSent, peak: voiceState.micPeak,
            latencies: voiceState.latencies, played: voiceState.playedSamples,
            stops: voiceState.stops, partial: voiceState.partial,
            ready: voiceState.ready, notice: voiceState.notice,
            turns: voiceState.turns.map(t => ({role: t.role, text: t.text, meta: t.meta})),
        })"""
        )
    )


async def wait_until(page: Any, check: Any, timeout_s: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    seen: dict[str, Any] = {}
    while time.monotonic() < deadline:
        seen = await state(page)
        if check(seen):
            return seen
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout_s} s; page state: {seen}")


def words(text: str) -> str:
    return " ".join("".join(c for c in w.lower() if c.isalnum()) for w in text.split())


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def playwright_ready() -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `apt-get install chromium` (see .ci/run).")


def test_a_full_turn_in_the_browser(
    voice_server: VoiceServer, tmp_path: Path, playwright_ready: None
) -> None:
    from playwright.async_api import async_playwright

    mic = mic_file(tmp_path, "turn", [("cmu_arctic_axb_a0004", 1.0)])

    async def main() -> tuple[dict[str, Any], list[str], str]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, voice_server.url)
            partials: list[str] = []
            seen = await wait_until(
                page,
                lambda s: (s["partial"] and partials.append(s["partial"])) or s["latencies"],
                60,
                "reply audio",
            )
            seen = await wait_until(page, lambda s: s["state"] == "listening", 60, "reply end")
            latency = await page.inner_text("#last-latency")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "web-turn.png"))
            await browser.close()
            return seen, partials, latency

    seen, partials, latency = run(main())
    assert seen["frames"] > 50 and seen["peak"] > 0.01  # the fake microphone really streamed
    assert partials  # live partial transcripts showed while the user spoke
    user, assistant = seen["turns"][:2]
    assert user["role"] == "user" and "glad to see you" in user["text"].lower()
    assert assistant["role"] == "assistant" and assistant["text"].strip("… ")
    assert seen["played"] > 8000  # at least half a second of the reply played in the page
    assert "voice-to-voice" in latency and latency.endswith(" ms")
    assert 0 < seen["latencies"][0] < 10000
    assert (ARTIFACTS / "web-turn.png").stat().st_size > 1000


def test_a_spoken_turn_switches_the_pages_light(
    voice_server: VoiceServer, tmp_path: Path, playwright_ready: None
) -> None:
    """The page declares its switch_light tool in hello; "Turn the light on, please."
    (the bundled Piper voice on the fake microphone: no corpus clip asks for a light)
    calls it, the page switches its light, answers, and the answer is said."""
    from playwright.async_api import async_playwright

    from voice.speak.tts import PiperTts

    speech = PiperTts().synthesize_all("Turn the light on, please.")
    mic = (tmp_path / "light.wav").resolve()
    silence = np.zeros(16000, np.float32)
    write_wav(mic, np.concatenate([silence, speech, *[silence] * 20]), 16000)

    async def main() -> tuple[dict[str, Any], bool]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, voice_server.url, press=False)
            await page.wait_for_function("() => voiceState.dirty === false")  # rendered
            assert not await page.eval_on_selector("#light", "el => el.classList.contains('on')")
            await page.click("#toggle")
            seen = await wait_until(
                page,
                lambda s: [
                    t for t in s["turns"] if t["role"] == "assistant" and t["text"].strip("… ")
                ],
                60,
                "the reply",
            )
            lit = await page.eval_on_selector("#light", "el => el.classList.contains('on')")
            seen["calls"] = await page.evaluate(
                "() => voiceState.toolCalls.map(c => ({name: c.name, arguments: c.arguments,"
                " status: c.status, result: c.result}))"
            )
            seen["light"] = await page.evaluate("() => voiceState.light")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "web-tool.png"))
            seen["errors"] = page.errors
            await browser.close()
            return seen, lit

    seen, lit = run(main())
    assert seen["light"] == "on" and lit  # the page's state and what it shows
    assert seen["calls"] == [
        {"name": "switch_light", "arguments": {"state": "on"}, "status": "ok",
         "result": "The light is on."}
    ]  # fmt: skip
    roles = [(t["role"], t["text"], t["meta"]) for t in seen["turns"]]
    assert roles[1] == ("tool", "switch_light(state: on)", "The light is on.")  # its log line
    assert roles[2][:2] == ("assistant", "The light is on.")
    assert not seen["errors"] and not seen["notice"]


def test_words_said_before_the_connection_is_ready_are_heard(
    voice_server: VoiceServer, tmp_path: Path, playwright_ready: None
) -> None:
    """Start pressed, then straight into speech: the microphone runs before the socket
    is ready (here 0.5 s late), and the page keeps what it hears until then (it dropped
    it, and a slow start lost "Lord, but I'm" of "Lord, but I'm glad to see you again,
    Phil.")."""
    from playwright.async_api import async_playwright

    mic = mic_file(tmp_path, "early", [("cmu_arctic_axb_a0004", 0.05)])

    def slow_start(socket: Any) -> None:
        """The server's messages ("ready" first) reach the page 0.5 s late."""
        server = socket.connect_to_server()
        held: list[Any] = []

        def release() -> None:
            for message in held:
                socket.send(message)
            held.clear()
            released.append(True)

        released: list[bool] = []
        server.on_message(lambda m: socket.send(m) if released else held.append(m))
        asyncio.get_running_loop().call_later(0.5, release)

    async def main() -> dict[str, Any]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, voice_server.url, press=False)
            await page.route_web_socket(lambda url: True, slow_start)
            await page.click("#toggle")
            seen = await wait_until(page, lambda s: len(s["turns"]) >= 2, 60, "a reply")
            await browser.close()
            return seen

    seen = run(main())
    user = seen["turns"][0]
    heard = words(user["text"])  # its first word, said 50 ms into the microphone's file
    assert user["role"] == "user" and heard.startswith("lord") and "glad to see you" in heard


def test_speaking_over_the_reply_stops_it_in_the_page(
    voice_server: VoiceServer, tmp_path: Path, playwright_ready: None
) -> None:
    from playwright.async_api import async_playwright

    # A long reply, then "stop" while it plays.
    mic = mic_file(
        tmp_path, "barge", [("ljspeech_LJ001-0008", 1.0), ("speechcommands_stop_6a27a9bf", 3.0)]
    )

    async def main() -> tuple[dict[str, Any], int]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, voice_server.url)
            seen = await wait_until(page, lambda s: s["stops"] > 0, 60, "a barge-in")
            seen = await wait_until(
                page, lambda s: any(t["meta"] == "interrupted" for t in s["turns"]), 20, "interrupt"
            )
            await asyncio.sleep(0.5)
            played = (await state(page))["played"]
            await asyncio.sleep(1.0)
            after = (await state(page))["played"]
            await page.screenshot(path=str(ARTIFACTS / "web-barge-in.png"))
            await browser.close()
            return seen, after - played

    seen, played_since = run(main())
    replies = [t for t in seen["turns"] if t["role"] == "assistant"]
    assert replies and replies[0]["meta"] == "interrupted"
    assert played_since == 0  # nothing of the interrupted reply plays on


def test_two_browsers_at_once_get_their_own_answers(
    voice_server: VoiceServer, tmp_path: Path, playwright_ready: None
) -> None:
    from playwright.async_api import async_playwright

    voice_server.wait_idle()
    mics = {
        "glad": mic_file(tmp_path, "a", [("cmu_arctic_axb_a0004", 1.0)]),
        "shook hands": mic_file(tmp_path, "b", [("cmu_arctic_aew_a0003", 1.0)]),
    }

    async def one(pw: Any, mic: Path) -> dict[str, Any]:
        browser, page = await open_page(pw, mic, voice_server.url)
        try:
            return await wait_until(
                page, lambda s: s["latencies"] and s["played"] > 0, 90, "an answer"
            )
        finally:
            await browser.close()

    async def main() -> list[dict[str, Any]]:
        async with async_playwright() as pw:
            return list(await asyncio.gather(*(one(pw, mic) for mic in mics.values())))

    for words, seen in zip(mics, run(main()), strict=True):
        user = [t["text"].lower() for t in seen["turns"] if t["role"] == "user"]
        assert user and words in user[0]
        assert seen["played"] > 0


def test_a_denied_microphone_says_what_to_do(
    voice_server: VoiceServer, playwright_ready: None
) -> None:
    from playwright.async_api import async_playwright

    async def main() -> tuple[str, bool]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, None, voice_server.url)
            await page.wait_for_selector("#notice:not([hidden])", timeout=10000)
            text, running = await page.inner_text("#notice"), await page.inner_text("#toggle")
            await browser.close()
            return text, running == "Start"

    text, can_retry = run(main())
    assert "denied" in text and "Start again" in text
    assert can_retry


def test_pressing_start_twice_opens_one_session(
    voice_server: VoiceServer, playwright_ready: None, tmp_path: Path
) -> None:
    """A second press while the first start waits (permission, worklets) used to open a
    second microphone, audio graph and session, both streaming into one socket."""
    import json

    from playwright.async_api import async_playwright

    mic = mic_file(tmp_path, "quiet", [], tail_s=30.0)

    def sessions() -> int:
        return int(json.loads(voice_server.get("/healthz")[1])["sessions"])

    async def main() -> list[int]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, voice_server.url, press=False)
            await page.evaluate(
                "() => { const b = document.getElementById('toggle'); b.click(); b.click(); }"
            )
            await wait_until(page, lambda s: s["ready"] and s["frames"] > 25, 30, "streaming")
            counts = []
            for _ in range(10):  # a second session would open within this
                counts.append(sessions())
                await asyncio.sleep(0.2)
            await browser.close()
            return counts

    assert set(run(main())) == {1}


def test_the_page_reconnects_when_the_server_comes_back(
    tmp_path: Path, playwright_ready: None
) -> None:
    from playwright.async_api import async_playwright

    mic = mic_file(tmp_path, "quiet", [], tail_s=60.0)
    first = VoiceServer(1, SERVER_ENV)

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, first.url)
            await wait_until(page, lambda s: s["frames"] > 10, 30, "streaming")
            first.stop()
            gone = await wait_until(page, lambda s: "Reconnecting" in s["notice"], 10, "a notice")
            second = VoiceServer(1, SERVER_ENV, port=first.port)
            try:
                # A new process with no shared store does not have the conversation: the
                # page says a new one has started (and nothing else).
                back = await wait_until(
                    page,
                    lambda s: s["ready"] and s["frames"] > 10 and "new one" in s["notice"],
                    60,
                    "back",
                )
            finally:
                await browser.close()
                second.stop()
            return gone, back

    try:
        gone, back = run(main())
    finally:
        first.stop()
    assert "lost" in gone["notice"] or "restarting" in gone["notice"]
    assert back["ready"] and back["frames"] > 10  # streaming again on a new session


# Records the page's socket closes (with their codes) and opens, with times.
TRACE_SOCKETS = """() => {
  window.socketTrace = [];
  const mark = (ws) => ws.addEventListener("close", (e) =>
    socketTrace.push(["close", e.code, performance.now()]));
  mark(voiceState.ws);
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      socketTrace.push(["open", 0, performance.now()]);
      mark(this);
    }
  };
}"""


def test_a_draining_server_sends_the_page_to_the_next_one_with_its_conversation(
    tmp_path: Path, playwright_ready: None
) -> None:
    """SIGTERM: the page hears going_away and 1001, reconnects at once, and the server
    that takes over (sharing the store, as workers behind a balancer do) goes on with
    the conversation the page names in its hello."""
    from playwright.async_api import async_playwright
    from services import RedisProcess

    mic = mic_file(tmp_path, "quiet", [], tail_s=60.0)
    store = RedisProcess()
    args = ("--store", store.url)
    first = VoiceServer(1, SERVER_ENV, args=args)

    async def main() -> tuple[str, list[Any], str, dict[str, Any]]:
        async with async_playwright() as pw:
            browser, page = await open_page(pw, mic, first.url)
            await wait_until(page, lambda s: s["ready"] and s["frames"] > 10, 30, "streaming")
            before = await page.evaluate("() => voiceState.conversationId")
            await page.evaluate(TRACE_SOCKETS)
            first.drain()  # nothing is being said: it goes away at once
            await wait_until(page, lambda s: not s["ready"], 10, "the close")
            await asyncio.to_thread(first.proc.wait, 20)
            trace = await page.evaluate("() => window.socketTrace")
            second = VoiceServer(1, SERVER_ENV, port=first.port, args=args)
            try:
                back = await wait_until(
                    page, lambda s: s["ready"] and not s["notice"] and s["frames"] > 10, 60, "back"
                )
                after = await page.evaluate("() => voiceState.conversationId")
                back["errors"] = page.errors
            finally:
                await browser.close()
                second.stop()
            return before, trace, after, back

    try:
        before, trace, after, back = run(main())
    finally:
        first.stop()
        store.stop()
    # Closed with 1001, and the next connection opened at once (no backoff; the page's
    # own close handler runs before the trace's, so the open may be listed first).
    (closed_t,) = [t for kind, code, t in trace if kind == "close" and code == 1001]
    opened = [t for kind, _, t in trace if kind == "open"]
    assert opened and min(abs(t - closed_t) for t in opened) < 250, trace
    assert before and after == before  # the same conversation went on
    assert not back["errors"] and back["frames"] > 10
