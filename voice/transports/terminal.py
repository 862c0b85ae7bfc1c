"""A terminal view of a live conversation that a person can follow.

One status line is redrawn in place (state and the live partial transcript)
when stdout is a terminal; everything that stays (what the user said, what the
assistant said as it is heard, each turn's latency) is printed as lines above
it. Without a terminal (a pipe, a log) only the lasting lines are printed.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from voice.events import Event


class TerminalView:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.live = self.out.isatty()
        self.state = "listening"
        self.partial = ""
        self._status_shown = False
        self._chunks: dict[int, list[tuple[int, str]]] = {}  # reply -> (start sample, text)
        self._shown: dict[int, int] = {}  # reply -> chunks printed
        self._queued: dict[int, int] = {}

    def show(self, event: Event) -> None:
        data: dict[str, Any] = event.to_dict()
        kind = data["type"]
        if kind == "state":
            self.state = str(data["state"])
        elif kind == "partial":
            self.partial = f"{data['committed']} {data['unstable']}".strip()
        elif kind == "final":
            self.partial = ""
            if str(data["text"]).strip():
                self._line(f"you:       {data['text']}")
        elif kind == "audio_chunk":
            reply_id = int(data["reply_id"])
            start = self._queued.get(reply_id, 0)
            self._chunks.setdefault(reply_id, []).append((start, str(data["text"]).strip()))
            self._queued[reply_id] = start + round(float(data["duration_ms"]) * 16)
        elif kind == "reply_end":
            reply_id = int(data["reply_id"])
            if data["interrupted"]:
                self._line(f"           [interrupted; heard: {data['heard_text'] or 'nothing'}]")
            elif not self._chunks.get(reply_id):
                self._line(f"assistant: {data['heard_text'] or '(nothing heard)'}")
            for done in (self._chunks, self._shown, self._queued):
                done.pop(reply_id, None)
        elif kind == "turn_metrics" and data.get("voice_to_voice_ms") is not None:
            self._line(f"           (voice-to-voice {data['voice_to_voice_ms']:.0f} ms)")
        elif kind == "error":
            self._line(f"error:     {data['message']}")
        elif kind == "wake":
            reason = str(data["reason"])
            heard = f'heard "{data["phrase"]}"' if reason == "wake_word" else reason
            self._line(f"           [awake: {heard}]")
        elif kind == "idle" and data["reason"] != "start":
            self._line("           [idle: say the wake word]")
        self._status()

    def played(self, reply_id: int, samples: int) -> None:
        """The output has played ``samples`` (16 kHz) of the reply: print the words it
        has reached, as they are spoken."""
        chunks = self._chunks.get(reply_id)
        if not chunks:
            return  # over, or nothing of it queued yet
        shown = self._shown.get(reply_id, 0)
        while shown < len(chunks) and chunks[shown][0] < samples:
            prefix = "assistant: " if shown == 0 else "           "
            self._line(prefix + chunks[shown][1])
            shown += 1
        self._shown[reply_id] = shown
        if shown:
            self._status()

    def _line(self, text: str) -> None:
        if self.live and self._status_shown:
            self.out.write("\r\033[K")
        self.out.write(text + "\n")
        self._status_shown = False
        self.out.flush()

    def _status(self) -> None:
        if not self.live:
            return
        text = f"[{self.state.replace('_', ' ')}] {self.partial}"[:200]
        self.out.write("\r\033[K" + text)
        self._status_shown = True
        self.out.flush()

    def close(self) -> None:
        if self.live and self._status_shown:
            self.out.write("\r\033[K")
            self.out.flush()
