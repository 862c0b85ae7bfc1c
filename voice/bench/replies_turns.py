"""What people say to a desk assistant, a museum kiosk and two game characters:
the turns of ``voice bench replies``, written for it.

Every checkable question and every follow-up lists the words one of which a
reply must contain to count as on topic (the answer) or as using the earlier
turn (what was said there). Requests and small talk have no check: they are
there because people say them, and because what the model says to them seeds
the next turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from voice.assistant.persona import Persona


@dataclass(frozen=True)
class Turn:
    text: str
    kind: str  # "question" (checkable), "followup" (needs the earlier turn), "request", "chat"
    expect: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dialogue:
    name: str
    persona: Persona | None  # None: the default assistant
    turns: tuple[Turn, ...]


def q(text: str, *expect: str) -> Turn:
    return Turn(text, "question", expect)


def f(text: str, *expect: str) -> Turn:
    return Turn(text, "followup", expect)


def r(text: str) -> Turn:
    return Turn(text, "request")


def c(text: str) -> Turn:
    return Turn(text, "chat")


ADA = Persona(
    name="Ada",
    system_prompt="You are Ada, the information guide of a small science museum. The museum "
    "is open from nine to five, the cafe is on the ground floor, and the dinosaur hall is "
    "upstairs. Be warm and helpful.",
    reply_length="short",
)
BROM = Persona(
    name="Brom",
    system_prompt="You are Brom, the gruff village blacksmith in a fantasy game. You sell "
    "swords, axes and horseshoes, and you are proud of your forge. Speak bluntly, like a "
    "busy craftsman.",
    reply_length="short",
)
PIP = Persona(
    name="Pip",
    system_prompt="You are Pip, a cheerful travelling herbalist in a fantasy game. You sell "
    "potions and herbs, you love gossip, and you are always excited to talk.",
    reply_length="medium",
)

DIALOGUES = (
    Dialogue("desk-1", None, (
        q("What is the capital of France?", "paris"),
        f("And what language do they speak there?", "french"),
        r("Can you set a timer for ten minutes?"),
        q("Thanks. How many minutes are in an hour?", "sixty", "60"),
        f("How long was the timer I asked for?", "ten", "10"),
    )),
    Dialogue("desk-2", None, (
        c("My name is Sam and I work as a nurse."),
        f("What is my name?", "sam"),
        q("How many days are in a week?", "seven", "7"),
        r("Give me one tip for staying focused at work."),
        f("What is my job?", "nurse"),
    )),
    Dialogue("desk-3", None, (
        c("Good morning! How are you today?"),
        q("What colour is the sky on a clear day?", "blue"),
        q("What is two plus two?", "four", "4"),
        f("Now add three to that.", "seven", "7"),
        r("Remind me to call my mother tonight."),
    )),
    Dialogue("kiosk-1", ADA, (
        r("Hello, where can I buy a ticket?"),
        q("When does the museum close?", "five", "5"),
        f("And when does it open?", "nine", "9"),
        q("Where is the cafe?", "ground"),
        c("Thank you, have a nice day."),
    )),
    Dialogue("kiosk-2", ADA, (
        q("What is the largest planet in our solar system?", "jupiter"),
        f("Which planet did I just ask you about?", "jupiter"),
        q("What is the freezing point of water in Celsius?", "zero", "0"),
        r("Can you recommend something for kids to see?"),
        q("Which floor is the dinosaur hall on?", "upstairs", "first", "second", "upper"),
    )),
    Dialogue("kiosk-3", ADA, (
        c("I am visiting from Spain."),
        f("Which country did I say I am from?", "spain"),
        q("How many legs does a spider have?", "eight", "8"),
        f("And how many does an insect have?", "six", "6"),
        r("Where can I leave my coat?"),
    )),
    Dialogue("brom-1", BROM, (
        q("Hello there, who are you?", "brom", "blacksmith", "smith"),
        r("What do you sell?"),
        r("How much is a sword?"),
        f("I will take the one you just mentioned.", "sword", "blade"),
        c("Goodbye, blacksmith."),
    )),
    Dialogue("brom-2", BROM, (
        q("What is your name?", "brom"),
        c("Your forge looks hot today."),
        r("My horse needs new shoes. Can you help?"),
        f("What does my horse need?", "shoe"),
        q("How many days are in a year?", "365", "three hundred"),
    )),
    Dialogue("pip-1", PIP, (
        q("Hi! What is your name?", "pip"),
        r("What potion would help me heal?"),
        q("What colour is grass?", "green"),
        f("And the colour of snow?", "white"),
        c("Farewell, friend."),
    )),
)  # fmt: skip
