"""Whether an entry gives the kind of fact a question asks for: a price or a time.

A visitor's near miss names a thing the file has and asks what the file does not say
about it: "how much does it cost to park" where the parking entry gives only where the
car park is, "when do the red pandas get fed" where their entry says where they live.
The entry for the thing wins with confidence, and saying it answers a question nobody
asked. Embeddings cannot see this (the question is about the car park); the kind of
fact can: a "how much" question wants a price, a "when" question a time. An entry
that has none of the kind asked for is not said outright; it is asked back ("Do you
mean: parking?"), as a weaker match would be, so a visitor who did mean it still gets
it after a "yes" and one who did not hears the unknown reply. Measured on the four
example sets (docs/knowledge.md): no right answer lost, a few more questions back.

English question words only: a question in another language is never held back here.
"""

from __future__ import annotations

import re

_PRICE_QUESTION = re.compile(
    r"\b(how much(?! (time|longer|later|earlier))|cost|costs|price|prices|pay|charge|"
    r"charges|fee|fees|cheaper|expensive)\b",
    re.IGNORECASE,
)
_PRICE = re.compile(
    r"[£$€¥]|\b(free|pounds?|euros?|dollars?|pence|penny|pennies|cents?|quid|bucks|yen|yuan|"
    r"rupees?|francs?|shillings?|gold|silver|copper|coins?|crowns?|credits?|gems?|"
    r"costs? nothing|no charge|included|includes|complimentary|each|apiece|"
    r"per (night|day|hour|person|head|ticket|visit|week|month|year))\b",
    re.IGNORECASE,
)  # a game's coins too: Brom's swords are "thirty silver"
_TIME_QUESTION = re.compile(
    r"^\s*when\b|\b(what time|how late|how early|until when|till when|opening hours)\b",
    re.IGNORECASE,
)
_CLOCK_NUMBER = r"(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_TIME = re.compile(
    r"\b(o'clock|noon|midday|midnight|a\.?m\b|p\.?m\b|half past|quarter (past|to)|"
    r"\d{1,2}[:.]\d{2}|in the (morning|afternoon|evening)|at night|daily|every day|"
    r"all day|twenty-four hours|24 hours|"
    r"(mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|weekdays?|minutes|hours|"
    rf"(until|till|from|at|by|before|after) {_CLOCK_NUMBER}|"
    # a date: "in 1898", "in eighteen ninety-eight", "ten years ago" (not "may", "march")
    r"\d{4}|(eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|"
    r"twenty)[ -](hundred|oh|ten|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)|"
    r"years? ago|century|since|january|february|april|june|july|august|september|"
    r"october|november|december|spring|summer|autumn|winter)\b",
    re.IGNORECASE,
)


def missing_kind(question: str, answer: str) -> str:
    """ "price" or "time" when ``question`` asks for that kind of fact and ``answer``
    gives none of it; "" otherwise."""
    if _PRICE_QUESTION.search(question) and not _PRICE.search(answer):
        return "price"
    if _TIME_QUESTION.search(question) and not _TIME.search(answer):
        return "time"
    return ""
