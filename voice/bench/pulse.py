"""A private PulseAudio with a virtual microphone and speaker, for real-device tests
and benchmarks of ``voice listen`` on machines without a sound card (the recipe in
the project's RIGS notes): PortAudio reaches it through ALSA's pulse plugin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voice.bench.children import ctrl_c_stops


class PulseRig:
    """A private PulseAudio with a virtual microphone and speaker (see ../shared/RIGS.md):
    ``play`` speaks a WAV into the microphone at real time, ``record`` captures what the
    program played. Start it before importing sounddevice in the process under test."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        runtime = folder / "pulse"
        runtime.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "XDG_RUNTIME_DIR": str(folder),
            "PULSE_RUNTIME_PATH": str(runtime),
            "PULSE_SERVER": f"unix:{runtime}/native",
            "HOME": str(folder),
        }
        subprocess.run(
            ["pulseaudio", "--daemonize=yes", "--exit-idle-time=-1", "--system=false", "-n",
             "-L", f"module-native-protocol-unix auth-anonymous=1 socket={runtime}/native",
             "-L", "module-null-sink sink_name=vspk rate=16000 channels=1",
             "-L", "module-null-sink sink_name=vmic_feed rate=16000 channels=1",
             "-L", "module-remap-source master=vmic_feed.monitor source_name=vmic"],
            env=self.env, check=True, timeout=30,
        )  # fmt: skip
        self._procs: list[subprocess.Popen[bytes]] = []
        self.pactl("set-default-sink", "vspk")
        self.pactl("set-default-source", "vmic")
        for source in ("vspk.monitor", "vmic"):  # keep-alive readers: idle sinks lag 2 s
            self._procs.append(
                subprocess.Popen(
                    ["parec", "-d", source, "--latency-msec=10", "--raw"],
                    env=self.env,
                    stdout=subprocess.DEVNULL,
                )
            )
        time.sleep(1.0)

    def pactl(self, *args: str) -> str:
        done = subprocess.run(["pactl", *args], env=self.env, check=True, timeout=10,
                              capture_output=True, text=True)  # fmt: skip
        return done.stdout

    def loop_speaker_into_mic(self) -> str:
        """The microphone hears the speaker, as on a laptop; returns the module id."""
        return self.pactl(
            "load-module", "module-loopback", "source=vspk.monitor", "sink=vmic_feed",
            "latency_msec=30",
        ).strip()  # fmt: skip

    def play(self, wav: Path) -> None:
        """Speak ``wav`` into the virtual microphone (blocks for its duration)."""
        subprocess.run(["paplay", "-d", "vmic_feed", str(wav)], env=self.env, check=True,
                       timeout=120)  # fmt: skip

    def record(self, wav: Path):  # type: ignore[no-untyped-def]
        """Start recording the virtual speaker into ``wav``; stop with ``.send_signal(2)``."""
        proc = subprocess.Popen(
            ["parec", "-d", "vspk.monitor", "--file-format=wav", "--rate=16000",
             "--channels=1", str(wav)], env=self.env,
        )  # fmt: skip
        self._procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        subprocess.run(["pulseaudio", "--kill"], env=self.env, timeout=10, check=False)


class ListenProcess:
    """`voice listen --json` in a subprocess; its events are collected as they come."""

    def __init__(self, rig: PulseRig, env: dict[str, str], *flags: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "voice.cli", "listen", "--json", *flags],
            env={**rig.env, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=ctrl_c_stops,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()
        self.wait(lambda: any("Listening" in line for line in self.errors), 90)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                event["_t"] = time.monotonic()  # when it arrived, on this process's clock
                self.events.append(event)

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e["type"] == kind]

    def wait(self, check: Callable[[], object], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if self.proc.poll() is not None:
                raise RuntimeError(f"voice listen exited: {''.join(self.errors)}")
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        time.sleep(0.1)  # the readers drain the pipes
        return self.proc.returncode, "".join(self.errors)
