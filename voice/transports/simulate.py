"""The simulation transport: a scripted user, a simulated speaker, one timeline.

A script places recorded utterances on the input timeline, either at fixed
times or relative to the assistant's replies::

    {"turns": [
        {"audio": "a.wav", "at": 0.5},
        {"audio": "stop.wav", "after": "reply_start", "delay": 0.8},
        {"audio": "b.wav", "after": "reply_end", "delay": 0.6}
    ]}

``after`` waits for the start of a reply that began after the previous clip
began, or for the end of a reply that either began after the previous clip
began or ends after that clip is over (so a clip after a barge-in waits for
the answer to the barge-in, not for the end of the reply it cut off). A reply
interrupted while the previous clip still plays never counts: it cut in on a
pause, and one speaker does not start the next clip over their own last one.

The simulated speaker plays what the session queues at real time on the same
clock, honours pause, resume and clear at once, and reports its position
back, as a device transport does. The session runs on
a :class:`~voice.runtime.clocks.VirtualClock` (faster than real time,
latencies still real) or a :class:`~voice.runtime.clocks.WallClock`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE
from voice.audio.wav import read_wav
from voice.conversation.session import Output, Session
from voice.errors import ConfigError
from voice.events import Event, ReplyEnded, ReplyStarted
from voice.runtime.clocks import ModelledCost, VirtualClock, WallClock
from voice.runtime.engines import Engines
from voice.runtime.faults import make_lane
from voice.transports.playback import PlaybackQueue

Float32Array = npt.NDArray[np.float32]

FRAME_MS = FRAME_SAMPLES * 1000.0 / SAMPLE_RATE
WAIT_FOR_REPLY_S = 30.0  # a turn waiting on a reply that never comes starts anyway
TAIL_S = 1.0  # keep listening this long after everything is over
MAX_EXTRA_S = 120.0  # hard stop: this long after the last clip began

log = logging.getLogger(__name__)


@dataclass
class ScriptTurn:
    audio: Float32Array
    name: str
    at_s: float | None = None
    after: str | None = None  # "reply_start" or "reply_end"
    delay_s: float = 0.0
    expect: str = ""  # free-form tag for benchmarks: "turn", "barge_in", "noise", ...
    start_sample: int | None = None  # decided during the run


SCRIPT_SHAPE = '{"turns": [{"audio": "a.wav", "at": 0.5}, ...]}'


@dataclass
class Script:
    turns: list[ScriptTurn]

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """A JSON script, or one WAV file: a single turn said 0.5 s in (``voice simulate
        talk.wav``, the quickest look at how one recording is taken)."""
        path = Path(path)
        if path.suffix.lower() == ".wav":
            return cls([ScriptTurn(audio=read_wav(path), name=path.name, at_s=0.5)])
        hint = f"Give a WAV file, or a script: {SCRIPT_SHAPE}."
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ConfigError(f"script not found: {path}.") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"script {path} is not valid JSON: {exc}.", hint) from None
        return cls.from_dict(data, path.parent)

    @classmethod
    def from_dict(cls, data: Any, base: Path) -> Script:
        hint = f"A script is {SCRIPT_SHAPE}."
        if not isinstance(data, dict) or not isinstance(data.get("turns"), list):
            raise ConfigError("a script needs a list of turns.", hint)
        turns = []
        for i, raw in enumerate(data["turns"]):
            if not isinstance(raw, dict) or "audio" not in raw:
                raise ConfigError(f"turn {i + 1} needs an 'audio' file.", hint)
            after = raw.get("after")
            if after not in (None, "reply_start", "reply_end"):
                raise ConfigError(f"turn {i + 1}: 'after' must be 'reply_start' or 'reply_end'.")
            if (raw.get("at") is None) == (after is None) and i > 0:
                raise ConfigError(f"turn {i + 1} needs either 'at' or 'after' (not both).", hint)
            audio_path = base / str(raw["audio"])
            turns.append(
                ScriptTurn(
                    audio=read_wav(audio_path),
                    name=audio_path.name,
                    at_s=float(raw["at"]) if raw.get("at") is not None else None,
                    after=after,
                    delay_s=float(raw.get("delay", 0.0)),
                    expect=str(raw.get("expect", "")),
                )
            )
        if turns and turns[0].at_s is None:
            turns[0].at_s = 0.5
        return cls(turns)


class ScriptedUser:
    """The input timeline: clips placed as the script says, decided as the run goes."""

    def __init__(self, script: Script) -> None:
        self.turns = script.turns
        self._next = 0  # first turn not yet placed
        self._previous_start = 0
        self._previous_end = 0
        self._waiting_since = 0
        self._reply_starts: dict[int, int] = {}

    def place(self, now: int, event: Event | None) -> None:
        """Place every turn whose time is now known (at ``now`` or on ``event``)."""
        while self._next < len(self.turns):
            turn = self.turns[self._next]
            if turn.at_s is not None:
                start = max(int(turn.at_s * SAMPLE_RATE), 0)
            elif event is not None and self._anchors(event, turn.after, now):
                start = now + int(turn.delay_s * SAMPLE_RATE)
            elif now - self._waiting_since > WAIT_FOR_REPLY_S * SAMPLE_RATE:
                start = now  # the reply never came: go on rather than hang
            else:
                return
            turn.start_sample = start
            self._previous_start = start
            self._previous_end = start + len(turn.audio)
            self._waiting_since = start + len(turn.audio)
            self._next += 1
            event = None  # one event places one turn

    def _anchors(self, event: Event, after: str | None, now: int) -> bool:
        if isinstance(event, ReplyStarted):
            self._reply_starts[event.reply_id] = now
        if event.type != after:
            return False
        reply_id = getattr(event, "reply_id", -1)
        over = now >= self._previous_end
        if isinstance(event, ReplyEnded) and event.interrupted and not over:
            return False  # a reply that cut in and was cut off: the answer is yet to come
        began_after = self._reply_starts.get(reply_id, -1) >= self._previous_start
        return began_after or (isinstance(event, ReplyEnded) and over)

    @property
    def all_placed(self) -> bool:
        return self._next >= len(self.turns)

    @property
    def end(self) -> int:
        return max(
            (
                (t.start_sample or 0) + len(t.audio)
                for t in self.turns
                if t.start_sample is not None
            ),
            default=0,
        )

    def frame(self, start: int) -> Float32Array:
        out = np.zeros(FRAME_SAMPLES, dtype=np.float32)
        for turn in self.turns:
            if turn.start_sample is None:
                continue
            lo = max(start, turn.start_sample)
            hi = min(start + FRAME_SAMPLES, turn.start_sample + len(turn.audio))
            if lo < hi:
                out[lo - start : hi - start] += turn.audio[
                    lo - turn.start_sample : hi - turn.start_sample
                ]
        return out


class SimulatedSpeaker(PlaybackQueue):
    """Plays queued reply audio one frame per input frame; obeys pause/resume/clear."""

    def tick(self) -> tuple[Float32Array, set[int]]:
        """The next output frame, and the replies whose position moved."""
        out, moved = self.take(FRAME_SAMPLES)
        return out, set(moved)


@dataclass
class SimulationResult:
    events: list[dict[str, Any]] = field(default_factory=list)
    heard: Float32Array = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    played: Float32Array = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    turns: list[ScriptTurn] = field(default_factory=list)
    wall_s: float = 0.0
    compute_ms: float = 0.0


def simulate(
    script: Script,
    session: Session,
    engines: Engines,
    realtime: bool = False,
    repeatable: bool = False,
) -> SimulationResult:
    """Play ``script`` into ``session`` and record everything that comes out.
    ``repeatable``: charge jobs a modelled cost, not their compute time, so every run
    gives the same words (with a voice rendered without variation, which it warns of
    otherwise, and a fixed seed)."""
    if repeatable and getattr(getattr(engines.tts, "config", None), "variation", False):
        # Piper's random timing makes each reply a little longer or shorter, and moves
        # every turn placed after one: load the voice with tts.variation = False.
        log.warning("simulate(repeatable=True) with a voice that varies: set tts.variation = False")
    lane = make_lane(engines, session.config.job_timeout_s)
    user = ScriptedUser(script)
    speaker = SimulatedSpeaker()
    result = SimulationResult(turns=script.turns)
    heard: list[Float32Array] = []
    played: list[Float32Array] = []
    started = time.perf_counter()
    virtual = VirtualClock(session, lane, ModelledCost() if repeatable else None)
    quiet_frames = 0
    with contextlib.ExitStack() as stack:
        stack.callback(lane.close)
        wall = stack.enter_context(WallClock(session, lane)) if realtime else None
        sample = 0
        while True:
            now_ms = sample * 1000.0 / SAMPLE_RATE
            user.place(sample, None)
            if wall is None:
                virtual.advance(now_ms + FRAME_MS)
                events = _step(session, user, speaker, sample, heard, played)
            else:
                due = started + (sample + FRAME_SAMPLES) / SAMPLE_RATE
                time.sleep(max(0.0, due - time.perf_counter()))
                with wall.lock:
                    events = _step(session, user, speaker, sample, heard, played)
                wall.poke()
            for event in events:
                result.events.append(event.to_dict())
                if isinstance(event, ReplyStarted | ReplyEnded):
                    user.place(sample + FRAME_SAMPLES, event)
            sample += FRAME_SAMPLES
            clock_idle = virtual.idle if wall is None else wall.idle
            over = user.all_placed and sample >= user.end
            quiet = over and not session.busy and speaker.idle and clock_idle
            quiet_frames = quiet_frames + 1 if quiet else 0
            if quiet_frames * FRAME_MS >= TAIL_S * 1000 or (
                user.all_placed and sample > user.end + MAX_EXTRA_S * SAMPLE_RATE
            ):
                break
    result.heard = np.concatenate(heard) if heard else result.heard
    result.played = np.concatenate(played) if played else result.played
    result.wall_s = time.perf_counter() - started
    result.compute_ms = virtual.compute_ms if wall is None else wall.compute_ms
    return result


def _step(
    session: Session,
    user: ScriptedUser,
    speaker: SimulatedSpeaker,
    sample: int,
    heard: list[Float32Array],
    played: list[Float32Array],
) -> list[Event]:
    """One 20 ms frame: the user's audio in, the speaker's audio out, positions reported;
    returns the events, having carried out the output actions."""
    frame = user.frame(sample)
    heard.append(frame)
    session.feed(frame)
    events = _carry_out(session.take(), speaker)
    out, moved = speaker.tick()
    played.append(out)
    for reply_id in moved:
        session.on_played(reply_id, speaker.played[reply_id])
    return events + _carry_out(session.take(), speaker)


def _carry_out(outputs: list[Output], speaker: SimulatedSpeaker) -> list[Event]:
    events = []
    for item in outputs:
        if isinstance(item, Event):
            events.append(item)
        else:
            speaker.act(item)
    return events


def write_outputs(result: SimulationResult, out_dir: str | Path, title: str = "") -> dict[str, Any]:
    """conversation.wav (left: heard, right: played), events.jsonl, metrics.json,
    timeline.png; returns the metrics."""
    from voice.audio.wav import write_wav
    from voice.conversation.metrics import summarize
    from voice.conversation.timeline import render_timeline

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    length = max(len(result.heard), len(result.played))
    stereo = np.zeros((length, 2), dtype=np.float32)
    stereo[: len(result.heard), 0] = result.heard
    stereo[: len(result.played), 1] = result.played
    write_wav(out / "conversation.wav", np.clip(stereo, -1.0, 1.0))
    with open(out / "events.jsonl", "w") as f:
        for event in result.events:
            f.write(json.dumps(event) + "\n")
    metrics = summarize(result.events)
    metrics["summary"]["wall_s"] = round(result.wall_s, 2)
    metrics["summary"]["audio_s"] = round(length / SAMPLE_RATE, 2)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    render_timeline(out / "timeline.png", result.events, result.heard, result.played, title)
    return metrics
