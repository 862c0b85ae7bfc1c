"""Reply audio to a client at about real time, a small lead ahead of its playback.

Sending a whole sentence at once would put seconds of audio in the client's
buffer, and a barge-in would then have to reach and flush all of it. Sending
at real time with a lead (200 ms by default) keeps the client fed through
network jitter while leaving little to drop. Pure logic on a clock passed in,
so it is tested without a socket.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Float32Array = npt.NDArray[np.float32]


@dataclass
class _Queued:
    reply_id: int
    audio: Float32Array
    offset: int  # of audio[0] within its reply


class Pacer:
    """Queues reply audio; ``due(now_s)`` gives the frames to send now."""

    def __init__(self, rate: int, lead_ms: float = 200.0, frame_ms: float = 20.0) -> None:
        self.rate = rate
        self.lead_s = lead_ms / 1000.0
        self.frame = max(1, int(rate * frame_ms / 1000.0))
        self._queue: deque[_Queued] = deque()
        self._next_offset: dict[int, int] = {}
        self._paused: set[int] = set()
        self._paused_at: float | None = None
        self._sent = 0  # samples sent: the client's playback clock
        self._anchor: float | None = None  # wall time at which that clock read zero

    def add(self, reply_id: int, audio: Float32Array) -> None:
        if not len(audio):
            return
        offset = self._next_offset.get(reply_id, 0)
        self._next_offset[reply_id] = offset + len(audio)
        self._queue.append(_Queued(reply_id, audio, offset))

    def unsent(self, reply_id: int) -> bool:
        """Some audio of ``reply_id`` is still waiting to be sent."""
        return any(q.reply_id == reply_id for q in self._queue)

    def queued_samples(self, reply_id: int) -> int:
        """Samples of ``reply_id`` handed to the pacer so far (sent or not)."""
        return self._next_offset.get(reply_id, 0)

    def pause(self, reply_id: int, now_s: float) -> None:
        self._paused.add(reply_id)
        if self._paused_at is None:
            self._paused_at = now_s

    def resume(self, reply_id: int, now_s: float) -> None:
        self._paused.discard(reply_id)
        if not self._paused and self._paused_at is not None:
            if self._anchor is not None:  # the client's playback stood still meanwhile
                self._anchor += now_s - self._paused_at
            self._paused_at = None

    def clear(self, reply_id: int, now_s: float) -> None:
        """Drop the reply's unsent audio; the client flushes what it holds."""
        self._queue = deque(q for q in self._queue if q.reply_id != reply_id)
        self.resume(reply_id, now_s)
        self._anchor = now_s - self._sent / self.rate  # the client's buffer is empty now

    def due(self, now_s: float) -> list[tuple[int, int, Float32Array]]:
        """(reply id, offset, samples) frames to send now, in order."""
        out: list[tuple[int, int, Float32Array]] = []
        if not self._queue or self._queue[0].reply_id in self._paused:
            return out
        if self._anchor is None or (now_s - self._anchor) * self.rate > self._sent:
            self._anchor = now_s - self._sent / self.rate  # the client ran dry: a new run
        allowed = round((now_s - self._anchor + self.lead_s) * self.rate)
        while self._queue and self._sent < allowed:
            head = self._queue[0]
            if head.reply_id in self._paused:
                break
            frame = head.audio[: self.frame]
            out.append((head.reply_id, head.offset, frame))
            self._sent += len(frame)
            if len(frame) == len(head.audio):
                self._queue.popleft()
            else:
                head.audio = head.audio[len(frame) :]
                head.offset += len(frame)
        return out

    @property
    def idle(self) -> bool:
        return not self._queue

    def next_due_in(self, now_s: float) -> float:
        """Seconds until ``due`` may have something (a hint for the sender's sleep).
        While the head is paused, nothing is due however far behind the clock is: the
        sender sleeps until woken (a resume or a clear), not in a busy loop."""
        if not self._queue or self._anchor is None or self._queue[0].reply_id in self._paused:
            return 0.02
        ahead = self._sent / self.rate - (now_s - self._anchor) - self.lead_s
        return max(0.0, min(0.02, ahead))
