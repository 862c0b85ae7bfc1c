"""A conversation's record on disk: one JSON line per thing said, nothing half-written.

Opt-in (``voice serve --transcripts DIR``). Each session gets its own file,
``DIR/<UTC start>-<session>.jsonl``. A line is written with one ``write``
system call on a file opened for appending, so a crash or a kill between
lines never leaves a partial line, and nothing is buffered in the process to
be lost. What the assistant said is recorded as the user *heard* it (a
barge-in cuts the record where playback stopped), which is what the
conversation history holds too.

Audio is stored only when asked for (``--record-audio``): the 16 kHz
microphone stream as a WAV beside the transcript, its header rewritten with
every block so the file is playable up to the last block after a crash.
"""

from __future__ import annotations

import json
import os
import time
import wave
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, float_to_pcm16
from voice.events import Error, Event, Final, ReplyEnded

Float32Array = npt.NDArray[np.float32]


class TranscriptWriter:
    def __init__(self, folder: Path, session: str, record_audio: bool = False) -> None:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.path = folder / f"{stamp}-{session}.jsonl"
        self._fd: int | None = os.open(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o600
        )
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
        os.write(self._fd, line.encode())  # one call: the line lands whole or not at all

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

    def audio(self, frame: Float32Array) -> None:
        if self._wav is not None:
            self._wav.writeframes(float_to_pcm16(frame).tobytes())

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


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The records of a transcript; a final line without its newline (a write cut by
    the machine dying mid-call, which a process crash cannot do) is skipped."""
    records = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n"):
            records.append(json.loads(line))
    return records
