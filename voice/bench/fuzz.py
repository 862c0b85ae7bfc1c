"""``voice bench fuzz``: coverage-guided fuzzing of the browser protocol decoder (atheris).

Every byte a browser sends reaches :mod:`voice.serve.protocol` first, so it must
turn *any* input into either a message or a :class:`ProtocolError` /
:class:`ProtocolViolation` (answered with an ``error``, or a close); anything
else escaping it would end the session. libFuzzer (through atheris) mutates
inputs towards new branches of the decoder and feeds each one to
``parse_audio`` (at 8, 16 and 48 kHz), ``parse_downlink``, and ``parse_text``
(the bytes as they are, and decoded as UTF-8 with replacement characters).
Any other exception, or a decoded frame that does not re-encode byte for byte,
is a finding; libFuzzer stops at the first one and saves its input.

atheris exits the process when it is done (``sys.exit``), so the fuzzing runs
in a worker subprocess (``python -m voice.bench.fuzz --worker ...``) and this
module reads libFuzzer's statistics from the worker's stderr. The report gives
the executions done, the seconds taken, the coverage reached (libFuzzer's
``cov`` edges and ``ft`` features) and the crashing inputs, kept in a
temporary folder (removed when nothing was found).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from voice.errors import VoiceError

RATES = (8000, 16000, 48000)
MAX_LEN = 70000  # past MAX_MESSAGE_BYTES' 64 KiB, and three 48 kHz frame limits
INPUT_TIMEOUT_S = 10  # one input decoding slower than this is a finding ("timeout-...")
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/", re.MULTILINE)
_DONE = re.compile(r"^Done (\d+) runs in (\d+) second", re.MULTILINE)
_STAT = re.compile(r"^stat::(\w+):\s*(\d+)", re.MULTILINE)


def atheris_version() -> str:
    """The installed atheris version, or a clear error saying how to install it."""
    try:
        return metadata.version("atheris")
    except metadata.PackageNotFoundError as exc:
        raise VoiceError(
            "the fuzzer needs the atheris package.",
            "Install it with `pip install atheris` (Linux, CPython 3.11 wheels).",
            code="missing_dependency",
        ) from exc


def seed_inputs() -> dict[str, bytes]:
    """Messages of each kind (and a past finding), for libFuzzer to start mutating from."""
    import numpy as np

    from voice.audio.format import to_pcm16
    from voice.serve.protocol import downlink_frame, message

    tone = (0.5 * np.sin(np.arange(320) * 2 * np.pi * 440 / 16000)).astype(np.float32)
    return {
        "hello.json": message("hello", protocol=1, sample_rate=16000, format="pcm16").encode(),
        "played.json": message("played", reply_id=3, samples=320).encode(),
        "pcm16-20ms.raw": to_pcm16(tone),
        "downlink.raw": downlink_frame(7, 640, tone[:160]),
        "nested.json": b'{"type": "hello", "protocol": ' + b"[" * 64 + b"1" + b"]" * 64 + b"}",
        # Past Python's recursion limit: json.loads raised RecursionError, not ValueError.
        "deep.json": b"[" * 2000 + b"]" * 2000,
    }


# libFuzzer's dictionary: tokens it splices into inputs (JSON grammar, field names, values).
DICTIONARY = [
    b"{", b"}", b"[", b"]", b":", b",", b'"', b"\\u", b"true", b"false", b"null", b"NaN",
    b"Infinity", b"-Infinity", b"1e999", b"-0", b"2147483647", b"2147483648", b'"type"',
    b'"hello"', b'"played"', b'"protocol"', b'"sample_rate"', b'"format"', b'"pcm16"',
    b'"reply_id"', b'"samples"', b"\xef\xbb\xbf", b"\xff\xfe",
]  # fmt: skip


def dictionary_entry(token: bytes) -> str:
    """One line of a libFuzzer dictionary: the token in quotes, other bytes as \\xNN."""
    printable = set(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
    return '"' + "".join(chr(c) if c in printable else f"\\x{c:02x}" for c in token) + '"'


def fuzz_protocol(runs: int = 200_000, seconds: float = 120.0) -> dict[str, Any]:
    """Fuzz the protocol decoder for ``runs`` inputs or ``seconds``, whichever ends first."""
    version = atheris_version()
    work = Path(tempfile.mkdtemp(prefix="voice-fuzz-"))
    corpus, artifacts = work / "corpus", work / "artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    for name, data in seed_inputs().items():
        (corpus / name).write_bytes(data)
    dictionary = work / "protocol.dict"
    dictionary.write_text("".join(dictionary_entry(token) + "\n" for token in DICTIONARY))
    args = [
        f"-runs={int(runs)}",
        f"-max_total_time={max(1, round(seconds))}",
        f"-max_len={MAX_LEN}",
        f"-timeout={INPUT_TIMEOUT_S}",
        f"-artifact_prefix={artifacts}{os.sep}",
        f"-dict={dictionary}",
        "-print_final_stats=1",
        str(corpus),
    ]
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}  # this copy of voice, even without installing it
    command = [sys.executable, "-m", "voice.bench.fuzz", "--worker", *args]
    start = time.monotonic()
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            env=env,
            timeout=seconds + 120,  # start-up, and libFuzzer's own end-of-run work
            check=False,
        )
        returncode, log = done.returncode, done.stderr + done.stdout
    except subprocess.TimeoutExpired as exc:
        returncode = -1
        out = exc.stderr or b""
        log = out.decode(errors="replace") if isinstance(out, bytes) else out
    elapsed = time.monotonic() - start
    report = _report(log, returncode, artifacts, elapsed, runs, seconds, version)
    if report["crashes"] == 0 and returncode == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        report["work_dir"] = str(work)
    return report


def _report(
    log: str,
    returncode: int,
    artifacts: Path,
    elapsed: float,
    runs: int,
    seconds: float,
    version: str,
) -> dict[str, Any]:
    stats = {name: int(value) for name, value in _STAT.findall(log)}
    status = _STATUS.findall(log)
    done = _DONE.search(log)
    if "number_of_executed_units" in stats:
        executions = stats["number_of_executed_units"]
    elif done:
        executions = int(done.group(1))
    else:
        executions = int(status[-1][0]) if status else 0
    findings = sorted(p for p in artifacts.iterdir() if p.name.startswith(FINDING_PREFIXES))
    report: dict[str, Any] = {
        "target": "voice.serve.protocol: parse_text, parse_audio (8/16/48 kHz), parse_downlink",
        "atheris": version,
        "runs_requested": runs,
        "seconds_allowed": seconds,
        "executions": executions,
        "seconds": round(elapsed, 1),
        "exec_per_second": stats.get("average_exec_per_sec")
        or (round(executions / elapsed) if elapsed > 0 else 0),
        "coverage": {
            "cov": int(status[-1][1]) if status else None,  # edges / branches reached
            "ft": int(status[-1][2]) if status else None,  # libFuzzer's features
            "corpus_units": int(status[-1][3]) if status else None,
            "new_units_added": stats.get("new_units_added"),
        },
        "peak_rss_mb": stats.get("peak_rss_mb"),
        "crashes": len(findings),
        "crash_inputs": [
            {
                "path": str(path),
                "size": path.stat().st_size,
                "head_hex": path.read_bytes()[:64].hex(),
            }
            for path in findings
        ],
        "exit_code": returncode,
    }
    if findings or returncode != 0:
        report["log_tail"] = log.strip().splitlines()[-25:]
    return report


# -- the worker: runs under atheris, in its own process ------------------------------------


def _worker(libfuzzer_args: list[str]) -> None:
    import atheris
    import numpy as np  # numpy itself is not instrumented: only the decoder is of interest

    with atheris.instrument_imports(include=["voice"]):
        from voice.audio.format import to_pcm16
        from voice.serve import protocol

    def test_one_input(data: bytes) -> None:
        for rate in RATES:
            try:
                audio = protocol.parse_audio(data, rate)
            except protocol.ProtocolError:
                pass
            else:
                assert audio.dtype == np.float32 and to_pcm16(audio) == data
        try:
            reply_id, offset, samples = protocol.parse_downlink(data)
        except protocol.ProtocolError:
            pass
        else:
            assert protocol.downlink_frame(reply_id, offset, samples) == data
        for raw in (data, data.decode("utf-8", errors="replace")):
            with contextlib.suppress(protocol.ProtocolError, protocol.ProtocolViolation):
                protocol.parse_text(raw)

    atheris.Setup([sys.argv[0], *libfuzzer_args], test_one_input)
    atheris.Fuzz()  # never returns: libFuzzer exits the process


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        _worker(argv[1:])
        return 0
    runs = int(argv[0]) if argv else 200_000
    seconds = float(argv[1]) if len(argv) > 1 else 120.0
    print(json.dumps(fuzz_protocol(runs, seconds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
