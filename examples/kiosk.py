"""A museum information kiosk: hands-free behind a wake word (or push-to-talk), offline.

    python examples/kiosk.py                         # "Hey Jarvis, where is the cafe?"
    python examples/kiosk.py --wake-word none        # always listening: answers everyone
    python examples/kiosk.py --push-to-talk          # Enter starts talking, Enter ends
    python examples/kiosk.py --text                  # no audio devices: type questions
    python examples/kiosk.py --wav question.wav      # a recording as the microphone

Passers-by talking among themselves are not answered: only speech after the wake word
is (the question may follow it in the same breath), and for a few seconds after each
reply, a follow-up without it. It greets, answers from its knowledge file, looks up
the day's events with a tool (``events``), and after ``--idle-timeout``
seconds without anyone talking to it forgets the visitor (history cleared) and greets
the next one. Memory
stays bounded for hours: the history is trimmed and the models are loaded once.
``--json`` prints every event as a JSON line (what the tests read).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Literal

import numpy as np

from voice import Assistant
from voice.audio import read_wav, write_wav
from voice.config import load_settings
from voice.errors import VoiceError
from voice.events import Event

HERE = Path(__file__).resolve().parent
Day = Literal["today", "tomorrow", "weekend"]
# What a real kiosk would read from the museum's calendar, which changes every day: a
# tool, not the knowledge file (docs/tools.md).
EVENTS: dict[str, list[str]] = {
    "today": ["a fossil talk at eleven in the Dinosaur Hall", "a family tour at two o'clock"],
    "tomorrow": ["a drawing class for children at ten", "a talk on meteorites at three"],
    "weekend": ["guided tours every hour from ten to four", "a dinosaur puppet show at noon"],
}


def add_tools(assistant: Assistant) -> None:
    """The kiosk's lookup: today's (or another day's) events, said as written."""

    def events(day: Day = "today") -> str:
        """List the museum's events, talks and tours on a day."""
        listing = EVENTS.get(day, [])
        when = "This weekend" if day == "weekend" else day.capitalize()
        if not listing:
            return f"{when} there are no events."
        return f"{when}: {' and '.join(listing)}."

    assistant.tool(examples=["what's on today", "are there any tours this afternoon"])(events)


class Kiosk:
    """The kiosk's manners on top of an assistant: greeting, idle reset, output."""

    def __init__(self, assistant: Assistant, idle_timeout_s: float, as_json: bool) -> None:
        self.assistant = assistant
        self.idle_timeout_s = idle_timeout_s
        self.as_json = as_json
        self.last_activity = time.monotonic()
        self.visitor_spoke = False
        self.replies_ended = 0
        self._ended = threading.Condition()
        assistant.on("*", self.show)

    def wait_for_reply_end(self, count: int, timeout_s: float = 60.0) -> None:
        with self._ended:
            self._ended.wait_for(lambda: self.replies_ended >= count, timeout_s)

    def show(self, event: Event) -> None:
        if event.type == "reply_end":
            with self._ended:
                self.replies_ended += 1
                self._ended.notify_all()
        if event.type in ("speech_start", "final", "reply_end", "reply_start"):
            self.last_activity = time.monotonic()
        if event.type == "final" and getattr(event, "text", "").strip():
            self.visitor_spoke = True
        if self.as_json:
            if event.type not in ("partial", "state"):
                print(json.dumps(event.to_dict()), flush=True)
        elif event.type == "final":
            print(f"\nvisitor: {event.text}", flush=True)  # type: ignore[attr-defined]
        elif event.type == "reply_text":
            print(event.text, end="", flush=True)  # type: ignore[attr-defined]
        elif event.type == "reply_end":
            print(flush=True)
        elif event.type == "wake":
            print("(listening)", file=sys.stderr, flush=True)
        elif event.type == "idle":
            phrase = self.assistant.session.wake.phrase if self.assistant.session.wake else ""
            print(f'(idle: say "{phrase}" to ask)', file=sys.stderr, flush=True)

    def watch_idle(self, stop: threading.Event) -> None:
        """A visitor who has gone quiet for the timeout has left: the next is new."""
        while not stop.wait(0.25):
            idle = time.monotonic() - self.last_activity
            if self.visitor_spoke and idle > self.idle_timeout_s:
                self.visitor_spoke = False
                self.assistant.reset()
                if self.as_json:
                    print(json.dumps({"type": "kiosk_reset"}), flush=True)
                self.assistant.greet()
                self.last_activity = time.monotonic()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default=str(HERE / "personas" / "guide.toml"))
    parser.add_argument("--idle-timeout", type=float, default=60.0, help="seconds")
    parser.add_argument(
        "--wake-word",
        default="hey_jarvis",
        help="hey_jarvis (default), okay_nabu, hey_mycroft, alexa, a microWakeWord .json, "
        "or none (always listening)",
    )
    parser.add_argument("--push-to-talk", action="store_true", help="Enter toggles talking")
    parser.add_argument("--text", action="store_true", help="type instead of speaking")
    parser.add_argument("--wav", help="a recording to use as the microphone")
    parser.add_argument("--tail", type=float, default=8.0, help="--wav: silence after it (s)")
    parser.add_argument("--out", help="--wav: write what the kiosk said here")
    parser.add_argument("--json", action="store_true", help="events as JSON lines")
    args = parser.parse_args()
    try:
        settings = load_settings()
        # Push-to-talk hears the microphone only while the button is down: no wake word.
        wake_word = "" if args.push_to_talk or args.wake_word == "none" else args.wake_word
        settings.set("wake", "wake_word", wake_word)
        assistant = Assistant(settings, persona=args.persona)
        add_tools(assistant)
    except VoiceError as exc:
        print(f"kiosk: {exc}", file=sys.stderr)
        return 2
    kiosk = Kiosk(assistant, args.idle_timeout, args.json)
    stop = threading.Event()
    threading.Thread(target=kiosk.watch_idle, args=(stop,), daemon=True).start()
    assistant.greet()
    try:
        if args.wav:
            mic = read_wav(args.wav)
            mic = np.concatenate([mic, np.zeros(int(args.tail * 16000), np.float32)])
            played = assistant.run_audio(mic)
            if args.out:
                write_wav(args.out, played, 16000)
        elif args.text:
            clock = threading.Thread(target=assistant.run_silent, args=(stop,), daemon=True)
            clock.start()
            if assistant.settings.conversation.greeting:
                kiosk.wait_for_reply_end(1)  # the greeting first
            for line in sys.stdin:
                if line.strip():
                    done = kiosk.replies_ended
                    assistant.send_text(line.strip())
                    kiosk.wait_for_reply_end(done + 1)  # one question at a time
        else:
            run_desk(assistant, args.push_to_talk, stop)
    except KeyboardInterrupt:
        pass
    except VoiceError as exc:  # no sound card, PortAudio missing, ...
        print(f"kiosk: {exc} (try --text)", file=sys.stderr)
        return 2
    finally:
        stop.set()
        assistant.close()
    return 0


def run_desk(assistant: Assistant, push_to_talk: bool, stop: threading.Event) -> None:
    if push_to_talk:
        assistant.push_to_talk = True

        def keys() -> None:
            talking = False
            print("Press Enter to talk, Enter again when done.", file=sys.stderr)
            for _ in sys.stdin:
                talking = not talking
                assistant.talk(talking)
                print("(listening...)" if talking else "(thinking...)", file=sys.stderr)

        threading.Thread(target=keys, daemon=True).start()
    assistant.run_desk(stop=stop, ready=lambda devices: print(f"Kiosk ready ({devices}).",
                                                              file=sys.stderr))  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
