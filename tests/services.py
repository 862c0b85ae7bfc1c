"""Real Redis and nginx for the many-workers tests, each started by the test as a
foreground subprocess on a free loopback port (Debian's redis-server and nginx;
.ci/run installs them), and stopped with it. Nothing is left running.

nginx runs the shipped deploy/nginx.conf (see :mod:`voice.bench.balancer`)."""

from __future__ import annotations

import signal
import subprocess

from voice.bench.balancer import NginxProcess, free_port, need, wait_port

__all__ = ["NginxProcess", "RedisProcess", "free_port"]


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
