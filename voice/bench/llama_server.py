"""A real llama.cpp server (llama-cpp-python's ``llama_cpp.server``) on loopback, on the
bundled GGUF: what the HTTP backend is tested and measured against.

Its CPU time is the honest witness of whether it is still generating: a server
that stopped producing tokens stops spending CPU.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from voice.cpus import thread_budget
from voice.errors import VoiceError


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServerProcess:
    """Started and ready when constructed; ``stop()`` it (or use it as a context)."""

    def __init__(self, threads: int = 1, context_tokens: int = 2048, port: int = 0) -> None:
        import psutil

        from voice.models import resolve_llm_model

        threads = thread_budget(threads)  # the server inherits this process's CPUs
        self.port = port or free_port()
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "voice.llamacpp",  # llama_cpp.server, kept off AMX
                 "--model", str(resolve_llm_model("default")), "--host", "127.0.0.1",
                 "--port", str(self.port), "--n_threads", str(threads),
                 "--n_threads_batch", str(threads), "--n_ctx", str(context_tokens)],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.process = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(self.url + "/models", timeout=1)
                return
            except OSError as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.proc.kill()
                    self.proc.wait()
                    tail = self.log.read_text()[-1500:]
                    self.log.unlink(missing_ok=True)
                    raise VoiceError(
                        f"the llama.cpp server did not start: {tail}",
                        "Install it with `pip install 'llama-cpp-python[server]'`.",
                        code="server_failed",
                    ) from exc
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def cpu_s(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        """Stop the server and delete its log: a run of the tests or benches starts
        dozens, and each left 200 kB in the temporary folder."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> LlamaServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
