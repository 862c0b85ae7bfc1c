"""Whether an entry gives the kind of fact a question asks for: a price, a time, a
number to ring, an email or web address, a count, or how long or how far.

A visitor's near miss names a thing the file has and asks what the file does not say
about it: "how much does it cost to park" where the parking entry gives only where the
car park is, "when do the red pandas get fed" where their entry says where they live.
The entry for the thing wins with confidence, and saying it answers a question nobody
asked. Embeddings cannot see this (the question is about the car park); the kind of
fact can: a "how much" question wants a price, a "when" question a time, "what's the
phone number for the pharmacy" a number to ring (where the entry only says where the
pharmacy is), "how many" a number, "how long" or "how far" a length of time or way. An entry
that has none of the kind asked for is not said outright; it is asked back ("Do you
mean: parking?"), as a weaker match would be, so a visitor who did mean it still gets
it after a "yes" and one who did not hears the unknown reply. Measured on the example
sets (docs/knowledge.md): no right answer lost, a few more questions back.

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


_DIGIT_WORD = r"(oh|zero|one|two|three|four|five|six|seven|eight|nine|double|treble|triple)"
_PHONE_QUESTION = re.compile(
    r"\b(phone|telephone|direct|contact|emergency|helpline|help line|what|which) number\b|"
    r"\bnumber (for|of|to (call|ring|phone|dial))\b",
    re.IGNORECASE,
)  # a number to ring, not a phone: "my phone's about to die", "pay with an app on my phone"
_PHONE = re.compile(
    rf"\d[\d ()-]{{3,}}\d|\b{_DIGIT_WORD}([ ,-]+{_DIGIT_WORD}\b){{3,}}|\bextension\b",
    re.IGNORECASE,
)  # "01746 762 000", "oh one seven four six...", "extension four"
_MAIL_QUESTION = re.compile(r"\b(e-?mail|website|web ?site|web address|url)\b", re.IGNORECASE)
_MAIL = re.compile(
    r"@|\bwww\b|\.(com|org|net|uk)\b|\bdot (com|org|net|co|uk)\b|\b(e-?mail|website|"
    r"web ?site|online|app)\b",
    re.IGNORECASE,
)  # an address, or where to find one ("on our website", "email us through the app")
_COUNT_QUESTION = re.compile(r"\bhow many\b", re.IGNORECASE)
_NUMBER_WORDS = (
    r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
    r"eighty|ninety|hundred|thousand|million|dozen|couple|single|none|no one|nobody"
)
_COUNT = re.compile(rf"\d|\b({_NUMBER_WORDS})s?\b", re.IGNORECASE)
_EXTENT_QUESTION = re.compile(
    r"\bhow (long|far)\b(?! ago)|\bwhat distance\b", re.IGNORECASE
)  # "how long ago" asks for a time (above)
_EXTENT = re.compile(
    r"\b(seconds?|minutes?|mins|hours?|hrs|days?|nights?|weeks?|fortnights?|months?|years?|"
    r"morning|afternoon|evening|overnight|metres?|meters?|kilomet(re|er)s?|km|miles?|yards?|"
    r"feet|foot|steps|walk|ride|drive|journey|lengths?|long|far|close|near|next to|"
    r"beside|opposite|across)\b",
    re.IGNORECASE,
)  # a length of time or of way, or how near: "five minutes' walk", "next to the pool"
# Checked in this order: the first kind a question asks for that the entry lacks.
_KINDS = (
    ("price", _PRICE_QUESTION, _PRICE),
    ("time", _TIME_QUESTION, _TIME),
    ("phone", _PHONE_QUESTION, _PHONE),
    ("address", _MAIL_QUESTION, _MAIL),
    ("count", _COUNT_QUESTION, _COUNT),
    ("extent", _EXTENT_QUESTION, _EXTENT),
)


def missing_kind(question: str, answer: str) -> str:
    """The kind of fact (``price``, ``time``, ``phone``, ``address``, ``count``,
    ``extent``) that ``question`` asks for and ``answer`` gives none of; "" when the
    answer has what is asked, or the question asks for none of these."""
    for kind, asks, gives in _KINDS:
        if asks.search(question) and not gives.search(answer):
            return kind
    return ""
