"""Two game NPCs with their own personas, one player talking to them.

    python examples/npc.py            # microphone: talk to the NPC you face
    python examples/npc.py --text     # no audio devices (or none found): type

Brom the blacksmith (deep, slow, curt) and Pip the herbalist (light, quick,
chatty) share one set of loaded models. You face one of them at a time: say or
type the other's name to turn to them ("Pip, what potions do you have?"); in
audio mode, Enter also turns you. Each NPC only hears you while you face it,
and their voices are mixed into one output, frames in and frames out, the way
a game engine's audio callback would drive them.

They act on the game through tools (docs/tools.md): Brom sells you weapons
("I'll buy two swords": your gold goes down, your bag fills), Pip gives you a
potion, a map or herbs. Each tool is a plain function; its docstring and type
hints are all the model is told of it.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Literal

import numpy as np

from voice import Assistant
from voice.errors import VoiceError
from voice.events import Event
from voice.tools import Say

HERE = Path(__file__).resolve().parent
PERSONAS = ("brom", "pip")
PRICES = {"sword": 30, "axe": 20, "shield": 25, "dagger": 10, "helmet": 15}


class Player:
    """What the game knows of the player: the tools change it."""

    def __init__(self, gold: int = 100) -> None:
        self.gold = gold
        self.bag: list[str] = []

    def equip(self, brom: Assistant, pip: Assistant) -> None:
        """Give the NPCs their tools (closures over this player)."""

        def sell(
            item: Literal["sword", "axe", "shield", "dagger", "helmet"], quantity: int = 1
        ) -> str | Say:
            """Sell the player weapons or armour from the smithy: a sword, an axe, a shield."""
            cost = PRICES[item] * quantity
            if quantity < 1 or cost > self.gold:
                return Say(f"You can't afford that. {cost} gold, and you have {self.gold}.")
            self.gold -= cost
            self.bag += [item] * quantity
            return f"There. {quantity} {item}{'s' if quantity > 1 else ''}, {cost} gold."

        def give(item: Literal["potion", "map", "herbs"]) -> str:
            """Give the player a potion, a map or herbs."""
            self.bag.append(item)
            return f"Here's your {item}, dear!"

        # (a function of the module can take the decorator: @brom.tool(examples=[...]))
        brom.tool(examples=["I'd like to buy a sword", "I'll take two axes"])(sell)
        pip.tool(examples=["can I have a potion", "give me the map please"])(give)


class Village:
    def __init__(self, npcs: list[Assistant]) -> None:
        self.npcs = {npc.persona.name.lower(): npc for npc in npcs}
        self.facing = npcs[0]
        self.replies_ended = 0
        self._ended = threading.Condition()
        for npc in npcs:
            npc.on("*", lambda event, npc=npc: self.show(npc, event))
            npc.before_reply(lambda text, npc=npc: self.route(npc, text))

    def addressed(self, text: str) -> Assistant | None:
        words = {w.strip(",.!?").lower() for w in text.split()}
        return next((npc for name, npc in self.npcs.items() if name in words), None)

    def route(self, hearer: Assistant, text: str) -> str | None:
        """Before an NPC answers: words meant for the other one go to the other one."""
        other = self.addressed(text)
        if other is not None and other is not hearer:
            self.face(other)
            other.send_text(text)
            return None
        return text

    def face(self, npc: Assistant) -> None:
        if npc is not self.facing:
            self.facing = npc
            print(f"(you turn to {npc.persona.name})", flush=True)

    def say(self, text: str) -> None:
        """A typed line: to the NPC it names, else to the one you face."""
        self.face(self.addressed(text) or self.facing)
        self.facing.send_text(text)

    def show(self, npc: Assistant, event: Event) -> None:
        name = npc.persona.name
        if event.type == "tool_call":  # the game acted: show it
            args = ", ".join(f"{k}={v!r}" for k, v in event.arguments.items())  # type: ignore[attr-defined]
            print(f"({name} calls {event.name}({args}))", flush=True)  # type: ignore[attr-defined]
        elif event.type == "final" and npc is self.facing:
            print(f"you: {event.text}", flush=True)  # type: ignore[attr-defined]
        elif event.type == "reply_end":
            print(f"{name}: {event.heard_text}", flush=True)  # type: ignore[attr-defined]
            with self._ended:
                self.replies_ended += 1
                self._ended.notify_all()

    def wait_for_reply_end(self, count: int, timeout_s: float = 60.0) -> None:
        with self._ended:
            self._ended.wait_for(lambda: self.replies_ended >= count, timeout_s)

    def process(self, mic: np.ndarray) -> np.ndarray:
        """One audio block: the player's voice reaches the NPC faced; both may speak."""
        out = np.zeros(len(mic), dtype=np.float32)
        for npc in self.npcs.values():
            out += npc.process(mic if npc is self.facing else np.zeros_like(mic))
        return np.clip(out, -1.0, 1.0)


def play_text(village: Village) -> None:
    stop = threading.Event()
    for npc in village.npcs.values():
        threading.Thread(target=npc.run_silent, args=(stop,), daemon=True).start()
    village.facing.greet()
    village.wait_for_reply_end(1)
    print("Type to talk; name an NPC to turn to them. Ctrl-D leaves.", flush=True)
    try:
        for line in sys.stdin:
            if line.strip():
                done = village.replies_ended
                village.say(line.strip())
                village.wait_for_reply_end(done + 1)
    finally:
        stop.set()
        time.sleep(0.1)


def play_audio(village: Village) -> None:
    """The frames-in, frames-out loop, as a game engine's audio callback runs it."""
    from voice.transports.desk import import_sounddevice

    sd = import_sounddevice()

    def callback(indata, outdata, frames, when, status) -> None:  # type: ignore[no-untyped-def]
        outdata[:, 0] = village.process(indata[:, 0].astype(np.float32))

    def keys() -> None:
        for _ in sys.stdin:  # Enter: turn to the other NPC
            names = list(village.npcs)
            current = names.index(village.facing.persona.name.lower())
            village.face(village.npcs[names[(current + 1) % len(names)]])

    threading.Thread(target=keys, daemon=True).start()
    for npc in village.npcs.values():
        npc.start()
    village.facing.greet()
    with sd.Stream(samplerate=16000, blocksize=320, channels=1, dtype="float32",
                   callback=callback):  # fmt: skip
        print("Talk to the NPC you face; Enter turns you; Ctrl-C leaves.", flush=True)
        while True:
            time.sleep(1)


def has_audio_devices() -> bool:
    try:
        from voice.transports.desk import import_sounddevice

        devices = import_sounddevice().query_devices()
    except (VoiceError, OSError):
        return False
    return any(d["max_input_channels"] > 0 for d in devices) and any(
        d["max_output_channels"] > 0 for d in devices
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", action="store_true", help="type instead of speaking")
    args = parser.parse_args()
    try:
        npcs = [Assistant(persona=HERE / "personas" / f"{name}.toml") for name in PERSONAS]
    except VoiceError as exc:
        print(f"npc: {exc}", file=sys.stderr)
        return 2
    player = Player()
    player.equip(*npcs)
    village = Village(npcs)
    text = args.text or not has_audio_devices()
    if text and not args.text:
        print("(no microphone or speaker found: text mode)", flush=True)
    try:
        if text:
            play_text(village)
        else:
            play_audio(village)
    except KeyboardInterrupt:
        pass
    finally:
        for npc in npcs:
            npc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
