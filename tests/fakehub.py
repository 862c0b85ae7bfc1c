"""A local HTTP server that speaks the Hugging Face hub's file API, for `voice models`.

It answers what ``huggingface_hub`` asks of the hub when it downloads one file:

* ``HEAD/GET /{owner}/{repo}/resolve/{revision}/{path}`` with ``X-Repo-Commit``; a file
  kept in git answers 200 with its git blob id as ``ETag``; an LFS file answers 302 to
  ``/cdn/{sha256}`` with ``X-Linked-Etag`` (its sha256) and ``X-Linked-Size``, as the
  hub does; a missing one 404 with ``X-Error-Code: EntryNotFound``;
* ``GET /cdn/{sha256}`` honours ``Range: bytes=N-`` (206 + ``Content-Range``). The
  "CDN" listens on another loopback address (127.0.0.2), as the hub's is another host:
  the client follows redirects on the hub's host itself, and reads an LFS file's
  metadata from the redirect only when it leaves the hub.

Knobs for the tests: ``stall_after`` (send that many bytes of an LFS body, then hang
until :meth:`release`), ``corrupt`` (serve other bytes than the hash it declares), and
``requests`` (every request's method, path and Range header).
"""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str], tuple[bytes, bool]] = {}  # (repo, path) -> (data, lfs)
        self.stall_after: int | None = None
        self.corrupt = False
        self.requests: list[tuple[str, str, str | None]] = []
        self._release = threading.Event()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

            def do_GET(self) -> None:
                hub._answer(self, body=True)

        self.servers = []
        for host in ("127.0.0.1", "127.0.0.2"):
            server = ThreadingHTTPServer((host, 0), Handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
            self.servers.append(server)
        self.url = f"http://127.0.0.1:{self.servers[0].server_address[1]}"
        self.cdn = f"http://127.0.0.2:{self.servers[1].server_address[1]}"

    def add(self, repo: str, path: str, data: bytes, *, lfs: bool) -> str:
        self.files[(repo, path)] = (data, lfs)
        return hashlib.sha256(data).hexdigest()

    def release(self) -> None:
        self._release.set()

    def close(self) -> None:
        self.release()
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def _by_sha(self, sha: str) -> bytes | None:
        for data, lfs in self.files.values():
            if lfs and hashlib.sha256(data).hexdigest() == sha:
                return data
        return None

    def _answer(self, h: BaseHTTPRequestHandler, *, body: bool) -> None:
        path = unquote(h.path.split("?", 1)[0])
        self.requests.append((h.command, path, h.headers.get("Range")))
        if path.startswith("/cdn/"):
            data = self._by_sha(path.removeprefix("/cdn/"))
            if data is None:
                h.send_response(404)
                h.end_headers()
                return
            self._send_blob(h, data, body=body)
            return
        parts = path.lstrip("/").split("/", 4)
        if len(parts) < 5 or parts[2] != "resolve":
            h.send_response(404)
            h.end_headers()
            return
        repo, filename = f"{parts[0]}/{parts[1]}", parts[4]
        found = self.files.get((repo, filename))
        if found is None:
            h.send_response(404)
            h.send_header("X-Repo-Commit", COMMIT)
            h.send_header("X-Error-Code", "EntryNotFound")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        data, lfs = found
        if lfs:
            sha = hashlib.sha256(data).hexdigest()
            h.send_response(302)
            h.send_header("Location", f"{self.cdn}/cdn/{sha}")
            h.send_header("X-Repo-Commit", COMMIT)
            h.send_header("X-Linked-Etag", f'"{sha}"')
            h.send_header("X-Linked-Size", str(len(data)))
            h.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        blob = hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()
        h.send_response(200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("ETag", f'"{blob}"')
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if body:
            h.wfile.write(data)

    def _send_blob(self, h: BaseHTTPRequestHandler, data: bytes, *, body: bool) -> None:
        if self.corrupt:
            data = bytes(b ^ 0x55 for b in data)
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng.removeprefix("bytes=").split("-", 1)[0] or 0)
        part = data[start:]
        h.send_response(206 if start else 200)
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Length", str(len(part)))
        h.end_headers()
        if not body:
            return
        if self.stall_after is not None and start == 0:
            h.wfile.write(part[: self.stall_after])
            h.wfile.flush()
            self._release.wait(30)
            return
        for i in range(0, len(part), 1 << 16):
            h.wfile.write(part[i : i + (1 << 16)])
