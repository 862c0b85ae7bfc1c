"""Real Redis, nginx and Prometheus for the many-workers tests, each started by the
test as a foreground subprocess on a free loopback port (Debian's redis-server, nginx
and prometheus; .ci/run installs them), and stopped with it. Nothing is left running.
And an OTLP/HTTP trace receiver, in a thread, that decodes what it is sent with
`opentelemetry-proto`.

nginx runs the shipped deploy/nginx.conf (see :mod:`voice.bench.balancer`)."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from voice.bench.balancer import NginxProcess, free_port, need, wait_port

__all__ = ["NginxProcess", "OtlpReceiver", "PrometheusProcess", "RedisProcess", "free_port"]


class RedisProcess:
    """``redis-server`` on loopback, nothing saved to disk."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [need("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        wait_port(self.port, self.proc, "redis-server")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def freeze(self) -> None:
        """SIGSTOP: it holds connections and answers nothing (a stalled store)."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.thaw()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class PrometheusProcess:
    """``prometheus`` scraping ``targets`` (host:port) every ``scrape_ms``, its data in
    ``folder``; :meth:`query` runs PromQL through its HTTP API."""

    def __init__(self, folder: Path, targets: list[str], scrape_ms: int = 1000) -> None:
        self.port = free_port()
        config = folder / "prometheus.yml"
        listed = ", ".join(f"'{t}'" for t in targets)
        config.write_text(
            f"global:\n  scrape_interval: {scrape_ms}ms\n  evaluation_interval: {scrape_ms}ms\n"
            f"scrape_configs:\n  - job_name: voice\n    static_configs:\n"
            f"      - targets: [{listed}]\n"
        )
        self.log = folder / "prometheus.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    need("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        wait_port(self.port, self.proc, "prometheus")

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def value(self, promql: str) -> float | None:
        """The single value of ``promql`` (None when the result is empty)."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def wait_value(self, promql: str, want: float, timeout_s: float = 20.0) -> float | None:
        deadline = time.monotonic() + timeout_s
        while (got := self.value(promql)) != want and time.monotonic() < deadline:
            time.sleep(0.25)
        return got

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class OtlpReceiver:
    """A minimal OTLP/HTTP trace receiver: every span it is sent, with its resource."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                received.add(request, self.path)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, request: ExportTraceServiceRequest, path: str) -> None:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    with self.lock:
                        self.spans.append(
                            {
                                "path": path,
                                "service": resource.get("service.name"),
                                "trace": span.trace_id.hex(),
                                "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "name": span.name,
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "attributes": {a.key: a.value for a in span.attributes},
                            }
                        )

    def traces(self) -> dict[str, list[dict[str, Any]]]:
        with self.lock:
            spans = list(self.spans)
        by_trace: dict[str, list[dict[str, Any]]] = {}
        for span in spans:
            by_trace.setdefault(span["trace"], []).append(span)
        return by_trace

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
