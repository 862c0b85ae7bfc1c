"""Words that talk about a tool's things without asking for its action.

The shortlist compares meanings, and an item or a room named in the words brings
them near the tool that handles it: "I already have a sword", "who forged the first
sword here", "the cafe was lovely" scored as high as real requests (0.5-0.6 against
``sell`` and ``find_room``), and the bundled 135M model asked "is the user asking for
this now? yes or no" answered "no" to nearly everything, requests included
(docs/tools.md). So the speech acts that are not requests are recognised by their
words: a refusal, something already had or done, a story or its maker, an opinion
or a comparison. English only, like the turn-taking word lists; in another language
nothing here matches and the shortlist alone decides.
"""

from __future__ import annotations

import re

_NOT_ASKING = [
    # refusing or putting off
    r"\bno,? thanks?\b", r"\bno thank you\b", r"\bdon'?t (need|want)\b", r"\bdo not (need|want)\b",
    r"\bnot (today|now|right now|yet|buying|interested)\b", r"\bmaybe later\b", r"\bi'?m good\b",
    # already had, done or seen
    r"\balready\b", r"\b(you|he|she|they) (fixed|mended|repaired|gave|sold|made|showed)\b",
    r"\blast (time|week|year|month)\b", r"\byesterday\b", r"\bheld up\b",
    r"\bthanks? (you )?for\b", r"\b(was|were) (\w+ )?(lovely|great|nice|good|friendly|amazing"
    r"|boring|awful|terrible|bad|fine|perfect|wonderful|brilliant)\b",
    # a story, its maker, its history
    r"\bwho (made|forged|built|founded|owns|painted|designed|wrote)\b", r"\blegend\b",
    r"\bstory\b", r"\bhistory of\b", r"\bhow old\b",
    # an opinion or a comparison
    r"\b(better|worse) (than|for|against)\b", r"\bis (it )?(better|worse)\b", r"\breckon\b",
    r"\bfavou?rite\b", r"\bdo you (like|prefer|think)\b",
    r"\bwhat do you think\b", r"\bwhich is better\b",
]  # fmt: skip
_PATTERN = re.compile("|".join(f"(?:{p})" for p in _NOT_ASKING))


def not_asking(text: str) -> bool:
    """Whether the words are talk that asks for no action (English cues)."""
    return _PATTERN.search(" ".join(text.lower().replace("’", "'").split())) is not None
