"""voice bench scale and serve --url: what they accept (no timing here)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from voice.bench.balancer import nginx_config
from voice.bench.corpus import load_corpus
from voice.bench.scale import bench_scale
from voice.bench.serve import bench_serve, client_tls
from voice.errors import VoiceError

CORPUS = Path(__file__).resolve().parents[1] / "corpus"


@pytest.mark.parametrize(
    ("workers", "clients", "modes"),
    [([0], [2], None), ([1], [], None), ([1], [2], ["gpu"])],
)
def test_scale_refuses_what_it_cannot_run(
    workers: list[int], clients: list[int], modes: list[str] | None
) -> None:
    with pytest.raises(VoiceError) as caught:
        bench_scale(load_corpus(str(CORPUS)), workers, clients, modes)
    assert caught.value.code == "config"


def test_serve_url_must_be_a_websocket() -> None:
    with pytest.raises(VoiceError) as caught:
        bench_serve(load_corpus(str(CORPUS)), [1], url="http://127.0.0.1:8080/v1")
    assert "WebSocket URL" in str(caught.value)


def test_tls_is_verified_except_on_loopback() -> None:
    assert client_tls("ws://127.0.0.1:1/ws") is None
    loopback = client_tls("wss://127.0.0.1:8443/ws")
    remote = client_tls("wss://voice.example.com/ws")
    assert loopback is not None and loopback.verify_mode == ssl.CERT_NONE
    assert remote is not None and remote.verify_mode == ssl.CERT_REQUIRED


def test_the_shipped_nginx_config_is_pointed_at_the_workers(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    main = nginx_config(tmp_path, 9443, [9001, 9002, 9003], cert, key)
    site = (tmp_path / "site.conf").read_text()
    assert f"include {tmp_path / 'site.conf'};" in main.read_text()
    assert "listen 127.0.0.1:9443 ssl;" in site and f"ssl_certificate {cert};" in site
    assert [line.split()[1] for line in site.splitlines() if line.strip().startswith("server 1")] \
        == ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"]  # fmt: skip
    for kept in ("least_conn;", "proxy_read_timeout 3600s;", "$connection_upgrade",
                 "proxy_next_upstream error timeout http_502 http_503;"):  # fmt: skip
        assert kept in site
    assert "listen 443" not in site and "8801" not in site
