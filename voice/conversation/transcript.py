"""A conversation's record on disk: one JSON line per thing said.

Opt-in (``voice serve --transcripts DIR``). Each session gets its own file,
``DIR/<UTC start>-<session>.jsonl``. A line is written with one ``write``
system call on a file opened for appending, so nothing is buffered in the
process to be lost, and lines never interleave. One ``write`` is not atomic
against a crash, though: on Linux a write to a regular file that spans pages
can stop at a page boundary when a fatal signal (SIGKILL, the OOM killer)
arrives, and a dying machine can cut it anywhere. So what holds is this:
every complete line is a whole record, and at most the last line can be
torn. A writer that reopens a file ending in a torn line ends that line
first, so its records start on lines of their own; the reader skips torn
lines wherever they are and says how many it skipped.

What the assistant said is recorded as the user *heard* it (a barge-in cuts
the record where playback stopped), which is what the conversation history
holds too.

Audio is stored only when asked for (``--record-audio``): the 16 kHz
microphone stream as a WAV beside the transcript. ``wave`` writes each block,
then rewrites the header's lengths and flushes both, so the header never
claims more samples than precede it on disk: after a crash the file plays up
to the last block whose header update landed (a torn block or an unpatched
header costs that block only).
"""

from __future__ import annotations

import json
import logging
import os
import time
import wave
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, to_pcm16
from voice.events import Error, Event, Final, ReplyEnded, ToolCall, ToolResult

Float32Array = npt.NDArray[np.float32]

log = logging.getLogger(__name__)


class TranscriptWriter:
    def __init__(
        self, folder: Path, session: str, record_audio: bool = False, *, path: Path | None = None
    ) -> None:
        """``path`` names the file instead of ``<UTC start>-<session>.jsonl`` in ``folder``;
        an existing file is appended to, its torn last line (if any) ended first."""
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.path = path if path is not None else folder / f"{stamp}-{session}.jsonl"
        self._fd: int | None = os.open(
            self.path,
            os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0),
            0o600,
        )
        _end_torn_line(self._fd)
        self._wav: wave.Wave_write | None = None
        if record_audio:  # private like the transcript: 0600, not the umask's 0644
            fd = os.open(self.path.with_suffix(".wav"), os.O_WRONLY | os.O_CREAT, 0o600)
            self._wav_file = os.fdopen(fd, "wb")
            self._wav = wave.open(self._wav_file, "wb")  # noqa: SIM115
            self._wav.setnchannels(1)
            self._wav.setsampwidth(2)
            self._wav.setframerate(SAMPLE_RATE)
        self.write({"type": "session_start", "session": session, "audio": record_audio})

    def write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        line = json.dumps({"t": round(time.time(), 3), **record}, ensure_ascii=False) + "\n"
        os.write(self._fd, line.encode())  # one call: no buffer to lose, no interleaving

    def observe(self, event: Event) -> None:
        if isinstance(event, Final) and event.text.strip():
            self.write(
                {"type": "user", "text": event.text.strip(), "audio_ms": round(event.end_ms)}
            )
        elif isinstance(event, ReplyEnded):
            record: dict[str, Any] = {"type": "assistant", "text": event.heard_text}
            if event.interrupted:
                record |= {"interrupted": True, "unheard": _unheard(event)}
            self.write(record)
        elif isinstance(event, Error):
            self.write({"type": "error", "code": event.code, "message": event.message})
        elif isinstance(event, ToolCall):
            self.write({"type": "tool_call", "name": event.name, "arguments": event.arguments})
        elif isinstance(event, ToolResult):
            self.write(
                {"type": "tool_result", "name": event.name, "status": event.status,
                 "result": event.result}
            )  # fmt: skip

    def audio(self, frame: Float32Array) -> None:
        if self._wav is not None:
            self._wav.writeframes(to_pcm16(frame))

    def close(self, reason: str = "closed") -> None:
        self.write({"type": "session_end", "reason": reason})
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._wav is not None:
            self._wav.close()  # writes the final header; the file is ours to close
            self._wav_file.close()
            self._wav = None


def _unheard(event: ReplyEnded) -> str:
    """The words generated but never played (not part of the conversation)."""
    heard, text = event.heard_text.split(), event.text.split()
    return " ".join(text[len(heard) :])


def _end_torn_line(fd: int) -> None:
    """A file whose last byte is not a newline ends in a torn record (its writer was
    killed mid-line): end that line, so the next record starts on its own."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


class TranscriptLines(NamedTuple):
    records: list[dict[str, Any]]
    torn: int  # lines skipped: cut mid-write by a crash


def load_transcript(path: Path) -> TranscriptLines:
    """Every whole record of a transcript, and how many torn lines were skipped.

    A line is whole when it parses as one JSON object: a record is written as one
    object on one line, so no strict prefix of it parses. That catches a torn last
    line and a torn line a reopened writer ended, and keeps a last record whose
    newline alone was lost."""
    records: list[dict[str, Any]] = []
    torn = 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            torn += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            torn += 1
    return TranscriptLines(records, torn)


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The whole records of a transcript; torn lines are skipped, with a warning."""
    lines = load_transcript(path)
    if lines.torn:
        log.warning("%s: skipped %d torn line(s), cut by a crash mid-write", path, lines.torn)
    return lines.records
