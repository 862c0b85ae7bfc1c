"""The desk's echo reference against the real WebRTC echo canceller, with the two
device streams' timing played out block by block: how far the reference leads its
echo must not depend on when the microphone started (the PulseAudio rig in
test_desk.py shows the same on real streams, but only when the machine is loaded)."""

from __future__ import annotations

import numpy as np
from conftest import clip

from voice.transports.desk import TRIM_WINDOW, PlayedReference
from voice.transports.echo import WebRtcEchoCanceller

BLOCK = 320  # 20 ms at 16 kHz, both streams
OUTPUT_LATENCY = 2 * BLOCK + 32  # a block filled now is heard 42 ms later
INPUT_LATENCY = 2  # blocks: a mic block reaches the program 40 ms after it was heard


def echo_left_db(mic_starts_late_by: int) -> float:
    """Residual echo (dB against the echo itself) over a spoken reply, when the
    microphone's first block came ``mic_starts_late_by`` blocks after the speaker's.
    The speaker's callback runs two blocks at a time, as PulseAudio's does."""
    reply = 0.5 * clip("ljspeech_LJ001-0008", lead_s=0.0)
    quiet = np.zeros(BLOCK * (TRIM_WINDOW + 25), np.float32)  # start-up, before a reply
    played = np.concatenate([quiet, reply, np.zeros(BLOCK * 25, np.float32)])
    played = played[: len(played) // BLOCK * BLOCK]
    heard = np.concatenate([np.zeros(OUTPUT_LATENCY, np.float32), played])
    reference, canceller = PlayedReference(), WebRtcEchoCanceller()
    echoes, left = [], []
    for tick in range(len(played) // BLOCK):
        if tick % 2:
            reference.add(played[(tick - 1) * BLOCK : (tick + 1) * BLOCK])
        captured = tick - INPUT_LATENCY
        if captured >= mic_starts_late_by:
            echo = 0.5 * heard[captured * BLOCK : (captured + 1) * BLOCK]
            echoes.append(echo)
            left.append(canceller.process(echo, reference.take(BLOCK)))
    echo, rest = np.concatenate(echoes), np.concatenate(left)
    loud = np.abs(echo) > 0.01
    return float(10 * np.log10(np.mean(rest[loud] ** 2) / np.mean(echo[loud] ** 2)))


def test_the_echo_is_cancelled_however_late_the_microphone_started() -> None:
    on_time, late = echo_left_db(0), echo_left_db(10)  # late: 200 ms after the speaker
    # Without keeping the reference's lead, 200 ms late left -15 dB of the echo: the
    # reference came after its echo and the canceller could not remove it.
    assert on_time < -25 and late < -25, (on_time, late)
    assert abs(late - on_time) < 6, (on_time, late)
