"""Real nginx running the shipped ``deploy/nginx.conf`` on loopback, in front of workers
on given ports: for ``voice bench scale`` and the many-workers tests.

The shipped file is used as it is, but for its worker, listen and certificate lines,
which are pointed at this run's ports and a self-signed certificate made here; every
rewrite must match, so a change to the file's shape fails loudly instead of measuring
something else. nginx runs in the foreground (``daemon off``) with its pid, logs and
temporary files in a folder of its own, and is stopped with the run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from voice.errors import VoiceError

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise VoiceError(f"{what} did not start (exit {proc.poll()}).") from None
            time.sleep(0.05)


def need(binary: str) -> str:
    """The path of a Debian binary (sbin is often not on a user's PATH), or a clear error."""
    found = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.path.exists(p)), None
    )
    if found is None:
        raise VoiceError(
            f"{binary} is not installed.",
            f"apt-get install -y {binary} (.ci/run installs it for the tests).",
            code="not_installed",
        )
    return found


def nginx_config(
    folder: Path, port: int, workers: list[int], cert: Path, key: Path, fail_timeout_s: int = 10
) -> Path:
    """deploy/nginx.conf pointed at ``workers`` and listening with TLS on ``port``, inside
    a main config that keeps nginx's files in ``folder``."""
    site = (DEPLOY / "nginx.conf").read_text()

    def sub(pattern: str, new: str, text: str, count: int = 0) -> str:
        out, n = re.subn(pattern, new, text, count=count, flags=re.MULTILINE)
        if not n:
            raise VoiceError(f"deploy/nginx.conf has no line matching {pattern!r}.")
        return out

    servers = "\n".join(
        f"    server 127.0.0.1:{w} max_fails=1 fail_timeout={fail_timeout_s}s;" for w in workers
    )
    site = sub(r"^\s*server 127\.0\.0\.1:\d+ .*;\n(?:\s*server 127\.0\.0\.1:\d+ .*;\n)*",
               servers + "\n", site, count=1)  # fmt: skip
    site = sub(r"^\s*listen 80;.*$", f"    listen 127.0.0.1:{free_port()};", site)
    site = sub(r"^\s*listen \[::\]:80;.*$", "", site)
    site = sub(r"^\s*listen 443 ssl;.*$", f"    listen 127.0.0.1:{port} ssl;", site)
    site = sub(r"^\s*listen \[::\]:443 ssl;.*$", "", site)
    site = sub(r"^\s*ssl_certificate .*;$", f"    ssl_certificate {cert};", site)
    site = sub(r"^\s*ssl_certificate_key .*;$", f"    ssl_certificate_key {key};", site)
    (folder / "site.conf").write_text(site)
    temp = "".join(
        f"    {kind}_temp_path {folder / kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = (
        f"pid {folder / 'nginx.pid'};\n"
        f"error_log {folder / 'error.log'} warn;\n"
        "worker_processes 1;\n"
        "events { worker_connections 256; }\n"
        "http {\n"
        f"    access_log {folder / 'access.log'};\n{temp}"
        f"    include {folder / 'site.conf'};\n"
        "}\n"
    )
    (folder / "nginx.conf").write_text(main)
    return folder / "nginx.conf"


class NginxProcess:
    """nginx in the foreground with :func:`nginx_config`, TLS on ``port`` with a
    self-signed certificate made here (``openssl``)."""

    def __init__(self, folder: Path, workers: list[int], fail_timeout_s: int = 10) -> None:
        import psutil

        self.folder = folder
        self.port = free_port()
        cert, key = folder / "cert.pem", folder / "key.pem"
        made = subprocess.run(
            [need("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
            capture_output=True, text=True,
        )  # fmt: skip
        if made.returncode:
            raise VoiceError(f"openssl could not make a certificate: {made.stderr[-500:]}")
        config = nginx_config(folder, self.port, workers, cert, key, fail_timeout_s)
        # As root, nginx's workers would run as nobody, who may not enter a private
        # temporary folder; they run as this user instead.
        extra = "daemon off; master_process on;" + (" user root;" if os.geteuid() == 0 else "")
        command = [need("nginx"), "-p", str(folder), "-c", str(config), "-g", extra]
        check = subprocess.run([*command, "-t"], capture_output=True, text=True)
        if check.returncode:
            raise VoiceError(f"nginx refused the configuration: {check.stderr[-1500:]}")
        self.proc = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "nginx")
        self.ps = psutil.Process(self.proc.pid)

    @property
    def ws_url(self) -> str:
        return f"wss://127.0.0.1:{self.port}/ws"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """The master's and its workers' CPU time."""
        total = 0.0
        for proc in [self.ps, *self.ps.children(recursive=True)]:
            try:
                times = proc.cpu_times()
            except Exception:
                continue
            total += times.user + times.system
        return total

    def error_log(self) -> str:
        path = self.folder / "error.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)  # a fast shutdown: open WebSockets are cut
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
