"""The desk transport: a person at a computer, its microphone and its speakers.

``voice listen`` (:mod:`voice.assistant.desk`) runs an assistant on real devices
through sounddevice (PortAudio).
The audio callbacks only move samples between the device and queues, never
block and never touch a model: the microphone's blocks go into a queue; the
speaker plays from a queue of reply audio, obeying pause, resume and clear at
once, counting what it played of each reply and keeping a copy of what it
played as the echo canceller's reference. The main thread resamples the
microphone to 16 kHz and feeds the session; an engine thread (the assistant's
:class:`~voice.runtime.hub.EngineHub`) runs the models.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE
from voice.audio.resample import Resampler, resample
from voice.conversation.actions import Play
from voice.errors import VoiceError
from voice.transports.drift import EchoDrift
from voice.transports.playback import PlaybackQueue

log = logging.getLogger(__name__)

Float32Array = npt.NDArray[np.float32]
BLOCK_MS = 20
NO_INPUT_S = 3.0  # no microphone block this long while streaming: the device is gone
MAX_REFERENCE_LAG = SAMPLE_RATE // 4  # played audio buffered beyond this is clock drift
TRIM_WINDOW = 50  # mic frames (1 s) over which the reference backlog's floor is judged
REFERENCE_SLACK = SAMPLE_RATE // 50  # reference kept beyond that floor: 20 ms of jitter
SILENCE = 1e-4  # played samples below this are silence
REFERENCE_WAIT_S = 0.06  # how long a mic frame waits for its reference from a late speaker
CLOSE_DEADLINE_S = 3.0  # how long the streams may take to close before they are left open

_streams_left_open = 0  # in this process (PortAudio's state is the process's too)


class DeviceError(VoiceError):
    code = "audio_device"


def import_sounddevice() -> Any:
    """sounddevice, or a clear error when PortAudio (its C library) is missing."""
    try:
        import sounddevice
    except OSError as exc:  # "PortAudio library not found"
        raise DeviceError(
            f"the audio library PortAudio is missing ({exc}).",
            "Install it: `apt-get install libportaudio2` (Debian/Ubuntu), "
            "`brew install portaudio` (macOS).",
            code="missing_dependency",
        ) from exc
    except ImportError as exc:
        raise DeviceError(
            "the desk mode needs the sounddevice package.",
            "Install it with `pip install sounddevice`.",
            code="missing_dependency",
        ) from exc
    return sounddevice


def list_devices() -> list[dict[str, Any]]:
    """Every device PortAudio sees: index, name, channels in and out, default rate."""
    sd = import_sounddevice()
    try:
        devices = sd.query_devices()
        default_in, default_out = sd.default.device
    except Exception as exc:
        raise DeviceError(f"could not list audio devices: {exc}.") from exc
    return [
        {
            "index": i,
            "name": d["name"],
            "inputs": int(d["max_input_channels"]),
            "outputs": int(d["max_output_channels"]),
            "rate": int(d["default_samplerate"]),
            "default_input": i == default_in,
            "default_output": i == default_out,
        }
        for i, d in enumerate(devices)
    ]


def pick_device(spec: str | None, kind: str) -> int:
    """A device index from an index, a (part of a) name, or the default; or a clear error."""
    devices = [d for d in list_devices() if d["inputs" if kind == "input" else "outputs"] > 0]
    if not devices:
        raise DeviceError(
            f"no audio {kind} device was found.",
            "Plug one in (or start PulseAudio/PipeWire), then run `voice devices` to check.",
            code="no_audio_device",
        )
    if spec is None:
        flag = "default_input" if kind == "input" else "default_output"
        chosen = [d for d in devices if d[flag]] or devices
        return int(chosen[0]["index"])
    if spec.isdigit():
        matches = [d for d in devices if d["index"] == int(spec)]
    else:
        matches = [d for d in devices if spec.lower() in str(d["name"]).lower()]
    if not matches:
        names = ", ".join(f"{d['index']}: {d['name']}" for d in devices)
        raise DeviceError(
            f"no {kind} device matches {spec!r}.",
            f"Use an index or part of a name from `voice devices` ({names}).",
            code="no_audio_device",
        )
    return int(matches[0]["index"])


class Speaker:
    """Reply audio for the output callback; every method is thread-safe."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._queue = PlaybackQueue()
        self._moved: set[int] = set()  # replies played from since moved() was last asked
        self.reference: queue.SimpleQueue[Float32Array] = queue.SimpleQueue()

    def moved(self) -> dict[int, int]:
        """Reply id -> samples played in all (device rate), for the replies that played
        since the last call: the caller's per-frame work stays small however many
        replies a long session has had."""
        with self._lock:
            moved = {r: self._queue.played[r] for r in self._moved}
            self._moved.clear()
        return moved

    def act(self, action: object) -> int:
        """Carry out an output action; for ``Play``, the samples queued at the device rate."""
        if isinstance(action, Play) and len(action.audio):
            action = Play(
                action.reply_id, action.seq, resample(action.audio, SAMPLE_RATE, self.rate)
            )
        with self._lock:
            return self._queue.act(action)

    def fill(self, out: Float32Array) -> None:
        """The output callback's work: fill ``out`` (silence where nothing plays)."""
        with self._lock:
            out[:], moved = self._queue.take(len(out))
            self._moved.update(moved)
        self.reference.put(out.copy())


class DeskAudio:
    """The two device streams; ``frames()`` yields 16 kHz microphone frames and the
    16 kHz reference (what the speaker played meanwhile)."""

    def __init__(self, input_device: int, output_device: int, correct_drift: bool = True,
                 measure_drift: bool = True) -> None:  # fmt: skip
        """``correct_drift``: make up the clocks' drift in the reference (else only
        measure it); ``measure_drift``: False where nothing is cancelled (a headset),
        so that no second of audio is cross-correlated for nothing."""
        self.sd = import_sounddevice()
        self.correct_drift = correct_drift
        info_in = self.sd.query_devices(input_device)
        info_out = self.sd.query_devices(output_device)
        self.in_rate = int(info_in["default_samplerate"])
        self.out_rate = int(info_out["default_samplerate"])
        self.speaker = Speaker(self.out_rate)
        self._mic: queue.SimpleQueue[Float32Array] = queue.SimpleQueue()
        self._last_output = time.monotonic()  # the output callback runs even in silence
        # Xruns and the like, as the callbacks report them, counted by kind: an input
        # overflow loses microphone samples, which shifts the echo reference against
        # its echo (the one slip the alignment cannot undo), so it is worth showing.
        self.problems: Counter[str] = Counter()
        self.reference = PlayedReference()
        # The two clocks' drift, measured on the echo.
        self.drift: EchoDrift | None = EchoDrift() if measure_drift else None
        try:
            self._in = self.sd.InputStream(
                device=input_device, channels=1, samplerate=self.in_rate, dtype="float32",
                blocksize=self.in_rate * BLOCK_MS // 1000, callback=self._on_input,
            )  # fmt: skip
            self._out = self.sd.OutputStream(
                device=output_device, channels=1, samplerate=self.out_rate, dtype="float32",
                blocksize=self.out_rate * BLOCK_MS // 1000, callback=self._on_output,
            )  # fmt: skip
        except Exception as exc:
            raise DeviceError(
                f"could not open the audio devices: {exc}.",
                "Check them with `voice devices`, or pick others with --input/--output.",
            ) from exc

    def _on_input(self, indata: Any, frames: int, when: Any, status: Any) -> None:
        if status:
            self._note(status)
        self._mic.put(np.array(indata[:, 0], dtype=np.float32))

    def _on_output(self, outdata: Any, frames: int, when: Any, status: Any) -> None:
        self._last_output = time.monotonic()
        if status:
            self._note(status)
        block = np.zeros(frames, dtype=np.float32)
        self.speaker.fill(block)
        outdata[:, 0] = block

    def _note(self, status: Any) -> None:
        """Count a callback's status flags ("input overflow, output underflow")."""
        self.problems.update(flag.strip() for flag in str(status).split(",") if flag.strip())

    def devices_summary(self) -> str:
        """One line for the end of a session: the clocks' drift, which xruns happened
        and how often."""
        if self.drift is None:
            drift = "the clocks' drift not measured (nothing is cancelled)"
        elif self.drift.known:
            drift = (
                f"the speaker's clock ran {self.drift.skew * 1e6:+.0f} ppm against the "
                f"microphone's, from {self.drift.lags} echo lags "
                f"({self.reference.drift_corrected:+d} samples of reference made up)"
            )
        else:
            drift = f"too little echo ({self.drift.lags} lags) to compare the clocks"
        if not self.problems:
            return f"devices: {drift}; no overflows or underflows"
        counts = ", ".join(f"{n} x {kind}" for kind, n in sorted(self.problems.items()))
        return (
            f"devices: {drift}; {counts} (audio was lost or late; a busy machine or a "
            "small block size causes this, and it can make the reply hear its own echo)"
        )

    def __enter__(self) -> DeskAudio:
        self._out.start()
        self._in.start()
        self._last_output = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        # Aborted, not stopped: stopping waits for what the output has queued to drain,
        # which a sound server that has gone away may never do, and nothing queued is
        # owed to anyone once the session ends. Even an abort may never return after a
        # device failed: PortAudio 19.6's ALSA code can loop in its error handling
        # (PortAudio issue 1037, fixed upstream in 2025), and the abort waits for that
        # thread; `voice listen` once in 26 loaded runs did not exit after its sound
        # server was killed. So the closing has a deadline, and the session ends
        # whether or not the device let go.
        global _streams_left_open
        if not close_streams((self._in, self._out), CLOSE_DEADLINE_S):
            _streams_left_open += 1
            log.warning(
                "the audio devices did not close within %.0f s (did their sound server go "
                "away?); they are left to the operating system", CLOSE_DEADLINE_S,
            )  # fmt: skip

    def frames(self, running: Callable[[], bool]) -> Any:
        """(mic, reference) 20 ms frames at 16 kHz, as the devices deliver them."""
        mic_rs = Resampler(self.in_rate, SAMPLE_RATE)
        ref_rs = Resampler(self.out_rate, SAMPLE_RATE)
        mic_buf = np.zeros(0, dtype=np.float32)
        reference = self.reference
        last = time.monotonic()
        while running():
            try:
                block = self._mic.get(timeout=0.1)
            except queue.Empty:
                if time.monotonic() - last > NO_INPUT_S or not self._in.active:
                    raise DeviceError(
                        "the microphone stopped delivering audio (unplugged?).",
                        "Reconnect it and run `voice listen` again; `voice devices` lists "
                        "what is there.",
                    ) from None
                continue
            last = time.monotonic()
            if last - self._last_output > NO_INPUT_S or not self._out.active:
                # Replies would queue for a speaker that no longer plays: each would stay
                # "speaking" for good, and history would record nothing as heard.
                raise DeviceError(
                    "the speaker stopped playing audio (unplugged?).",
                    "Reconnect it and run `voice listen` again; `voice devices` lists "
                    "what is there.",
                )
            mic_buf = np.concatenate([mic_buf, mic_rs.process(block)])
            while not self.speaker.reference.empty():
                reference.add(ref_rs.process(self.speaker.reference.get()))
            while len(mic_buf) >= FRAME_SAMPLES:
                frame, mic_buf = mic_buf[:FRAME_SAMPLES], mic_buf[FRAME_SAMPLES:]
                self._await_reference(reference, ref_rs)
                played = reference.take(FRAME_SAMPLES)
                if self.drift is not None:
                    self.drift.feed(frame, played, reference.drift_corrected)
                    reference.skew = self.drift.skew if self.correct_drift else 0.0
                yield frame, played

    def _await_reference(self, reference: PlayedReference, ref_rs: Resampler) -> None:
        """Give a late output callback a moment before the frame's reference runs short.

        Under load the output thread can run late; filling the gap with silence would
        shift every later frame's reference against its echo, and the canceller would
        have to start over. The wait only happens when the microphone is not behind
        (its queue is empty): a mic clock faster than the speaker's also runs the
        reference short, and that must stay a shortfall, not a growing delay."""
        deadline = time.monotonic() + REFERENCE_WAIT_S
        while reference.buffered < FRAME_SAMPLES and self._mic.empty():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                played = self.speaker.reference.get(timeout=left)
            except queue.Empty:
                return
            reference.add(ref_rs.process(played))


def close_streams(streams: tuple[Any, ...], deadline_s: float) -> bool:
    """Abort and close ``streams`` on a helper thread; whether it was done within
    ``deadline_s``. A stream that cannot be closed (its device vanished) is left as it
    is: there is nothing of it to release that the process's end does not."""
    done = threading.Event()

    def close() -> None:
        for stream in streams:
            try:
                stream.abort()
                stream.close()
            except Exception:  # a device that vanished cannot be closed; nothing to release
                pass
        done.set()

    threading.Thread(target=close, name="audio-close", daemon=True).start()
    return done.wait(deadline_s)


def streams_left_open() -> bool:
    """Whether a desk stream of this process did not close within its deadline.

    PortAudio's own clean-up (``Pa_Terminate``, which sounddevice runs at interpreter
    exit) closes what is still open, and would wait on such a stream for good: a
    program that sees this should end its process without that clean-up (``os._exit``)
    once its own output is flushed, as ``voice listen`` does."""
    return _streams_left_open > 0


class PlayedReference:
    """What the speaker played (16 kHz), handed out a frame per microphone frame as the
    echo canceller's reference.

    The canceller can only remove an echo whose reference it was given first, and its
    filter is fitted to one alignment, sample for sample. Pairing is by count, so how
    far the reference leads its echo is set by how much played audio waits here
    unpaired, and that depends on how long the speaker ran before the microphone's
    first block: on a loaded machine a slow start left the reference behind its own
    echo, nothing was cancelled, and the assistant took its voice for the user's.

    So the backlog is brought to its floor before the speaker first plays: once
    ``TRIM_WINDOW`` frames have gone by, if even the lowest backlog in that time is
    over twice ``REFERENCE_SLACK``, the (silent) excess is dropped down to
    ``REFERENCE_SLACK``. Each mic frame then gets the newest played audio it can
    without running dry, and the lead is the devices' own buffering, never a start-up
    accident. It is never realigned after that, not even in a quiet spell: the
    canceller keeps its filter between replies, and a reply after a shift of 4 ms
    leaked its echo for seconds.

    For the same reason a shortfall (the output callback ran late) is silence for
    that frame, but the alignment is kept: as much of the late audio, when it comes,
    is skipped. Filling 6 ms with silence and moving on shifted every later reference
    by 6 ms, and the canceller let the echo through for three seconds.
    (``DeskAudio.frames`` also waits a little for a late callback when it can.)

    Two devices run on two clocks, so the played signal drifts against the mic's, and
    the canceller does not follow even 50 ppm. ``skew`` (measured on the echo by
    :class:`voice.transports.drift.EchoDrift`) is how many played
    samples the speaker gains per microphone sample: a sample is dropped (or
    repeated) each time that adds up to one, which keeps the echo path still. Played
    audio that piles up beyond ``MAX_REFERENCE_LAG`` all the same is dropped, oldest
    first."""

    def __init__(self) -> None:
        self._buffer = np.zeros(0, dtype=np.float32)
        self._left: deque[int] = deque(maxlen=TRIM_WINDOW)  # backlog after each take
        self._played = False  # the speaker has played: the alignment is final
        self._owed = 0  # samples handed out as silence for a late callback, to skip
        self.trimmed = 0  # samples dropped to keep the lead (a figure for diagnosis)
        self.skew = 0.0  # played samples gained per microphone sample (clock drift)
        self._drift = 0.0  # drift not yet made up, in samples
        self.drift_corrected = 0  # samples dropped (> 0) or repeated (< 0) for drift

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def add(self, played: Float32Array) -> None:
        skip = min(self._owed, len(played))
        self._owed -= skip
        self._buffer = np.concatenate([self._buffer, played[skip:]])[-MAX_REFERENCE_LAG:]

    def take(self, n: int) -> Float32Array:
        self._drift += n * self.skew
        if self._drift >= 1.0 and len(self._buffer) > n:  # the speaker gained a sample
            self._buffer = self._buffer[1:]
            self._drift -= 1.0
            self.drift_corrected += 1
        elif self._drift <= -1.0 and n > 1:  # the microphone gained one: repeat a sample
            self._drift += 1.0
            self.drift_corrected -= 1
            out = self._take(n - 1)
            return np.concatenate([out, out[-1:]])
        return self._take(n)

    def _take(self, n: int) -> Float32Array:
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        if len(out) < n:
            self._owed = min(self._owed + n - len(out), MAX_REFERENCE_LAG)
            out = np.concatenate([out, np.zeros(n - len(out), np.float32)])
        if not self._played:  # until the first reply plays, the alignment may still move
            self._played = bool(np.abs(out).max(initial=0.0) >= SILENCE)
            self._left.append(len(self._buffer))
            self._keep_the_lead()
        return out

    def _keep_the_lead(self) -> None:
        if self._played or len(self._left) < TRIM_WINDOW:
            return
        if min(self._left) <= 2 * REFERENCE_SLACK:
            return
        excess = min(self._left) - REFERENCE_SLACK
        if np.abs(self._buffer[:excess]).max() >= SILENCE:
            return  # the first reply is in what would go: too late to align
        self._buffer = self._buffer[excess:]
        self.trimmed += excess
        self._left.clear()  # levels from before the trim no longer apply


@dataclass
class DeskConfig:
    """The ``[desk]`` settings: how ``voice listen`` treats its own voice in the mic."""

    # "cancel": speakers; the echo of the reply is cancelled with the played signal as
    #   reference, and the user can still barge in.
    # "headset": no echo reaches the microphone; nothing is cancelled.
    # "half-duplex": speakers without cancellation; the assistant does not listen for
    #   barge-ins while it speaks (it never interrupts itself, nor can the user).
    echo: str = "cancel"
    input: str = ""  # device index or part of a name; "" = the default
    output: str = ""
    # Make up the two devices' clock drift (measured on the echo) in the reference:
    # WebRTC's canceller does not follow 50-100 ppm by itself. Off: measured only.
    drift: bool = True


ECHO_MODES = ("cancel", "headset", "half-duplex")
