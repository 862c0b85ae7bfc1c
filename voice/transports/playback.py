"""Reply audio waiting to be played: the one playback queue every output uses.

The simulated speaker, the desk's sound card callback and the Python protocol
client all play replies the same way: in order, pausing and resuming a reply
on the session's word, dropping a cleared reply at once (and anything of it
that still arrives), and counting what was played of each reply, which the
session needs to know what the user heard.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import numpy.typing as npt

from voice.conversation.actions import Clear, Pause, Play, Resume

Float32Array = npt.NDArray[np.float32]


class PlaybackQueue:
    def __init__(self) -> None:
        self._queue: deque[tuple[int, Float32Array]] = deque()
        self._paused: set[int] = set()
        self._cleared: set[int] = set()
        self.played: dict[int, int] = {}  # reply id -> samples played in all

    def add(self, reply_id: int, audio: Float32Array) -> int:
        """Queue audio of ``reply_id`` (dropped if that reply was cleared); samples queued."""
        if reply_id in self._cleared or not len(audio):
            return 0
        self._queue.append((reply_id, audio))
        return len(audio)

    def pause(self, reply_id: int) -> None:
        self._paused.add(reply_id)

    def resume(self, reply_id: int) -> None:
        self._paused.discard(reply_id)

    def clear(self, reply_id: int) -> None:
        self._cleared.add(reply_id)
        self._queue = deque(item for item in self._queue if item[0] != reply_id)

    def act(self, action: object) -> int:
        """Carry out a session output action; for ``Play``, the samples queued."""
        if isinstance(action, Play):
            return self.add(action.reply_id, action.audio)
        if isinstance(action, Pause):
            self.pause(action.reply_id)
        elif isinstance(action, Resume):
            self.resume(action.reply_id)
        elif isinstance(action, Clear):
            self.clear(action.reply_id)
        return 0

    @property
    def idle(self) -> bool:
        return not self._queue

    def take(self, n: int) -> tuple[Float32Array, dict[int, int]]:
        """The next ``n`` samples to play (silence where nothing plays, or the reply at
        the head is paused), and how many samples of each reply they hold."""
        out = np.zeros(n, dtype=np.float32)
        filled = 0
        moved: dict[int, int] = {}
        while filled < n and self._queue:
            reply_id, audio = self._queue[0]
            if reply_id in self._paused:
                break
            take = min(n - filled, len(audio))
            out[filled : filled + take] = audio[:take]
            filled += take
            moved[reply_id] = moved.get(reply_id, 0) + take
            self.played[reply_id] = self.played.get(reply_id, 0) + take
            if take == len(audio):
                self._queue.popleft()
            else:
                self._queue[0] = (reply_id, audio[take:])
        return out, moved


class PlayedLedger:
    """Maps playback positions at an output's rate to the session's 16 kHz count.

    Resampling a reply's chunks rounds their lengths, so a proportional mapping
    could leave a fully played reply a sample short, and never over: a reply
    whose every queued sample was played counts as played in full."""

    def __init__(self) -> None:
        self._queued16: dict[int, int] = {}
        self._queued_device: dict[int, int] = {}

    def queued(self, reply_id: int, samples16: int, samples_device: int) -> None:
        self._queued16[reply_id] = self._queued16.get(reply_id, 0) + samples16
        self._queued_device[reply_id] = self._queued_device.get(reply_id, 0) + samples_device

    def to16(self, reply_id: int, played_device: int) -> int:
        device = self._queued_device.get(reply_id, 0)
        queued16 = self._queued16.get(reply_id, 0)
        if device == 0:
            return 0
        if played_device >= device:
            return queued16  # all of it: resampling rounding must not leave a reply open
        return round(played_device * queued16 / device)
