"""`voice serve` with its guards on: a token, an origin list, TLS, limits on rate,
idle time and session length, live Prometheus metrics and JSONL transcripts.

One real server (real models) with every guard configured, over loopback."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SERVER_ENV, VoiceServer, clip
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from voice.conversation.transcript import read_transcript
from voice.serve.client import VoiceClient

pytestmark = [pytest.mark.slow, pytest.mark.alone]

TOKEN = "t0k-for-tests"
ALLOWED = "https://kiosk.example"
IDLE_S = 3
SESSION_S = 14  # a turn over TLS (7-8 s here with its checks) still fits in one session
HELLO = json.dumps({"type": "hello", "protocol": 1, "sample_rate": 16000, "format": "pcm16"})


def _tls() -> ssl.SSLContext:
    return ssl._create_unverified_context()  # our own self-signed certificate, on loopback


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("guarded")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    args = ("--token", TOKEN, "--allow-origin", ALLOWED, "--certfile", str(cert),
            "--keyfile", str(key), "--idle-timeout-s", str(IDLE_S), "--max-session-s",
            str(SESSION_S), "--transcripts", str(folder / "transcripts"))  # fmt: skip
    server = VoiceServer(2, SERVER_ENV, args=args)
    server.transcripts = folder / "transcripts"  # type: ignore[attr-defined]
    yield server
    server.stop()


def bare_url(server: VoiceServer) -> str:
    return server.ws_url.split("?", 1)[0]


async def _status_of_refusal(url: str, **headers: str) -> int:
    with pytest.raises(InvalidStatus) as refused:
        await connect(url, ssl=_tls(), additional_headers=headers)
    return int(refused.value.response.status_code)


async def _next_json(ws: Any, timeout: float = 10) -> dict[str, Any]:
    while True:
        raw = await asyncio.wait_for(ws.recv(), timeout)
        if isinstance(raw, str):
            return dict(json.loads(raw))


def test_the_token_and_the_origin_are_checked_before_any_session(guarded: VoiceServer) -> None:
    async def main() -> list[int]:
        statuses = [await _status_of_refusal(bare_url(guarded))]
        statuses.append(await _status_of_refusal(bare_url(guarded) + "?token=wrong"))
        statuses.append(await _status_of_refusal(guarded.ws_url, Origin="https://evil.example"))
        # The right token from an allowed page, and from a non-browser client: ready.
        for headers in ({"Origin": ALLOWED}, {}):
            async with connect(guarded.ws_url, ssl=_tls(), additional_headers=headers) as ws:
                await ws.send(HELLO)
                assert (await _next_json(ws))["type"] == "ready"
        return statuses

    assert run(main()) == [401, 401, 403]
    status, body = guarded.get("/metrics")
    assert status == 401 and b"Bearer" in body
    assert guarded.get("/healthz")[0] == 200  # liveness probes need no secret


def test_a_turn_over_tls_shows_in_the_metrics_and_the_transcript(guarded: VoiceServer) -> None:
    guarded.wait_idle()

    async def main() -> VoiceClient:
        async with VoiceClient(guarded.ws_url, ssl_context=_tls()) as client:
            client.say(clip("cmu_arctic_axb_a0004", lead_s=0.3), onset_s=0.3)
            await client.wait_for(lambda: client.message_count("turn_metrics") >= 1, 40, "a turn")
            return client

    client = run(main())
    (end,) = client.of_type("reply_end")
    status, body = guarded.get("/metrics", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }
    assert samples[("voice_turns_total", ())] >= 1
    assert samples[("voice_voice_to_voice_seconds_count", ())] >= 1
    count = samples[("voice_voice_to_voice_seconds_count", ())]
    assert samples[("voice_voice_to_voice_seconds_bucket", (("le", "+Inf"),))] == count
    assert 0 < samples[("voice_voice_to_voice_seconds_sum", ())] < 10 * count
    assert samples[("voice_refused_total", (("reason", "bad_token"),))] >= 1
    assert samples[("process_resident_memory_bytes", ())] > 100e6
    guarded.wait_idle()
    time.sleep(0.2)
    transcripts = sorted(guarded.transcripts.glob("*.jsonl"))  # type: ignore[attr-defined]
    records = [r for path in transcripts for r in read_transcript(path)]
    said = [r["text"] for r in records if r["type"] == "user"]
    heard = [r["text"] for r in records if r["type"] == "assistant"]
    assert any("glad to see you" in s.lower() for s in said)
    assert end["heard_text"] in heard
    assert not list(guarded.transcripts.glob("*.wav"))  # type: ignore[attr-defined]


def test_audio_faster_than_real_time_is_dropped_then_cut_off(guarded: VoiceServer) -> None:
    guarded.wait_idle()

    async def main() -> tuple[list[str], int | None, bool]:
        async with VoiceClient(guarded.ws_url, ssl_context=_tls()) as bystander:
            ws = await connect(guarded.ws_url, ssl=_tls())
            await ws.send(HELLO)
            await _next_json(ws)
            codes: list[str] = []
            frame = (np.zeros(320, dtype="<i2")).tobytes()
            with pytest.raises(ConnectionClosed):
                for _ in range(5000):  # 100 s of audio as fast as the socket takes it
                    await ws.send(frame)
                    while True:
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.0005)
                        except TimeoutError:
                            break
                        if isinstance(raw, str) and json.loads(raw)["type"] == "error":
                            codes.append(json.loads(raw)["code"])
                while True:
                    raw = await asyncio.wait_for(ws.recv(), 5)
                    if isinstance(raw, str) and json.loads(raw)["type"] == "error":
                        codes.append(json.loads(raw)["code"])
            return codes, ws.close_code, not bystander.closed

    codes, close_code, bystander_alive = run(main())
    assert codes and set(codes) == {"too_fast"}
    assert close_code == 1008 and bystander_alive


def test_a_silent_client_is_closed_after_the_idle_timeout(guarded: VoiceServer) -> None:
    async def main() -> tuple[str, int | None, float]:
        async with connect(guarded.ws_url, ssl=_tls()) as ws:
            await ws.send(HELLO)
            await _next_json(ws)
            started = time.monotonic()
            error = await _next_json(ws, timeout=IDLE_S + 10)
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 5)
            return error["code"], ws.close_code, time.monotonic() - started

    code, close_code, waited = run(main())
    assert code == "idle_timeout" and close_code == 1008
    assert IDLE_S - 0.5 < waited < IDLE_S + 5


def test_a_session_ends_at_its_maximum_length(guarded: VoiceServer) -> None:
    async def main() -> tuple[dict[str, Any], int | None, float]:
        async with connect(guarded.ws_url, ssl=_tls()) as ws:
            await ws.send(HELLO)
            await _next_json(ws)
            started = time.monotonic()
            frame = np.zeros(320, dtype="<i2").tobytes()
            error: dict[str, Any] = {}
            with pytest.raises(ConnectionClosed):
                while time.monotonic() - started < SESSION_S + 10:
                    await ws.send(frame)  # a slow trickle keeps it from idling out
                    try:
                        raw = await asyncio.wait_for(ws.recv(), 1.0)
                    except TimeoutError:
                        continue
                    if isinstance(raw, str) and json.loads(raw)["type"] == "error":
                        error = json.loads(raw)
            return error, ws.close_code, time.monotonic() - started

    error, close_code, lasted = run(main())
    assert error.get("code") == "session_too_long" and "Reconnect" in error["message"]
    assert close_code == 1008 and SESSION_S - 1 < lasted < SESSION_S + 5


def test_a_bad_certificate_fails_at_once_with_what_to_do(tmp_path: Path) -> None:
    bad = tmp_path / "cert.pem"
    bad.write_text("not a certificate")
    result = subprocess.run(
        [sys.executable, "-m", "voice.cli", "serve", "--certfile", str(bad), "--port", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "cannot load the TLS certificate" in result.stderr and "--keyfile" in result.stderr
    assert "Traceback" not in result.stderr


def run(coro: Any) -> Any:
    return asyncio.run(coro)
