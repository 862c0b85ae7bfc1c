"""``voice listen``: an :class:`Assistant` on the sound card, set up from settings.

The desk transport (:mod:`voice.transports.desk`) opens the devices and moves the
audio; what ``[desk]`` asks for (which devices, how to treat the assistant's own
echo) is decided here, above it, where the settings are read.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from voice.assistant.assistant import Assistant
from voice.config import Settings
from voice.errors import VoiceError
from voice.transports.desk import ECHO_MODES, pick_device


def run_listen(settings: Settings, view: Any, stop: threading.Event | None = None) -> int:
    """``voice listen``: a conversation on the chosen devices until Ctrl-C (or ``stop``)."""
    from voice.transports.echo import EchoMeter, make_echo_canceller

    desk = settings.desk
    if desk.echo not in ECHO_MODES:
        raise VoiceError(
            f"desk.echo = {desk.echo!r} is not a mode.", f"Use one of: {', '.join(ECHO_MODES)}."
        )
    input_device = pick_device(desk.input or None, "input")
    output_device = pick_device(desk.output or None, "output")
    if desk.echo == "half-duplex":
        settings.conversation.barge_in = False
    meter = EchoMeter(make_echo_canceller() if desk.echo == "cancel" else None)
    assistant = Assistant(settings)  # seconds: after everything that can fail fast
    assistant.session.echo = meter
    assistant.on("*", view.show)
    if settings.conversation.greeting:
        assistant.say(settings.conversation.greeting)

    gate = assistant.session.wake
    speak = f'Say "{gate.phrase}" to wake it' if gate is not None else "Speak"

    def ready(devices: str) -> None:
        print(f"Listening ({devices}, echo: {desk.echo}). {speak}; Ctrl-C stops.",
              file=sys.stderr, flush=True)  # fmt: skip

    devices: list[str] = []  # the devices' line (drift, xruns), once the streams close
    try:
        assistant.run_desk(input_device, output_device, view, stop, ready, devices.append)
    except KeyboardInterrupt:
        pass
    finally:
        view.close()
        print(meter.summary(), file=sys.stderr, flush=True)
        for line in devices:
            print(line, file=sys.stderr, flush=True)
    return 0
