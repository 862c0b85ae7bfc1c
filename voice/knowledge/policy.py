"""The answer policy: say the entry as written, say ``unknown_reply``, or let the
model talk.

The bundled 135M model cannot be trusted to restate a fact it was given (it turned
"the cafe is on the ground floor" into "the cafe is in the basement"), so:

- ``verbatim``: a confident match is said as written; a question that matches
  nothing is answered with ``unknown_reply``; small talk goes to the model;
- ``generate``: the same, but the model words a confident match's answer, with the
  best entries in its prompt (for a model that can be trusted to restate them);
- ``auto``: ``verbatim`` for a confident match, the model with the best entries in
  its prompt for a weaker one (between ``context_threshold`` and ``threshold``),
  ``unknown_reply`` below that. docs/knowledge.md measures each.

Small talk ("hello", "thanks", "how are you") is told apart by meaning: the
words' embedding close to one of a few dozen small-talk lines and closer to them
than to any entry. A question about the assistant itself ("what's your name?", "who
are you?", "what can you do?") is told apart the same way and answered with its
``introduction`` ("I'm Ada." from a persona's name, for who it is): the 135M model,
asked the name in its own prompt, called Ada "Mara".
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from voice.embed.recent import RecentByText
from voice.errors import ConfigError
from voice.knowledge.fact_kinds import missing_kind
from voice.knowledge.parse import read_knowledge
from voice.knowledge.retrieve import Embeds, FloatArray, KnowledgeIndex, Match, without_fillers
from voice.models import user_cache_dir

POLICIES = ("auto", "verbatim", "generate")
UNKNOWN_REPLY = "Sorry, I don't know that."
ASK_TEXT = "Do you mean: {heading}?"  # a weaker match asked back (``clarify``)
RECENT = 64  # decisions remembered by text
SMALL_TALK = (
    "hello", "hi", "hi there", "hey", "good morning", "good afternoon", "good evening",
    "thanks", "thank you", "thank you very much", "cheers", "great, thanks", "okay thanks",
    "how are you", "how are you doing", "how's it going", "what's up", "nice to meet you",
    "nice to see you", "glad to see you", "pleased to meet you",
    "who are you", "what's your name", "what are you", "are you a robot",
    "bye", "goodbye", "see you later", "have a nice day", "you're welcome",
    "that's great", "cool", "awesome", "wow", "sorry", "excuse me", "never mind",
    "can you hear me", "tell me a joke", "I'm fine, thanks", "good, and you",
)  # fmt: skip
# Questions about the assistant itself: who it is (its ``introduction``, else "I'm
# <name>."), and what it can do (its ``introduction`` only: a name does not say that).
IDENTITY = (
    "what's your name", "what is your name", "may I ask your name",
    "do you have a name of your own", "who are you", "who am I talking to", "who is this",
    "what are you called", "what should I call you", "tell me about yourself",
    "introduce yourself",
)  # fmt: skip
# ("do you have a name of your own", not "do you have a name": that one was as near to
# "do you have one?" (0.67) as small talk must be, and "I'm Brom." answered it.)
CAPABILITY = (
    "what can you do", "what can you help me with", "how can you help me",
    "what can I ask you", "what do you know", "what are you for",
)  # fmt: skip
# Asking for the last reply again: a visitor at a noisy kiosk who missed it ("pardon?")
# had been told "Sorry, I don't know that."
REPEAT = (
    "say that again", "sorry, can you say that again", "can you repeat that", "pardon",
    "what did you say", "sorry, what was that", "come again", "I didn't catch that",
    "sorry, I missed that", "I didn't hear you", "one more time, please",
)  # fmt: skip
# An entry with a phrasing this close to one of IDENTITY (CAPABILITY) is the file's own
# answer to such questions ("Who are you? | What is your name?" is; "Who founded the
# museum?" is not).
OWN_ENTRY = 0.8
# A question about someone else ("who is he?", "what's her name?", "who is it?") is not
# about the assistant, however near its embedding is to "who is this?" (0.78-0.88: the
# encoder barely weighs a pronoun). English words: another language is never held back.
_SOMEONE_ELSE = re.compile(
    r"\b(he|she|it|they|him|her|them|his|their|that (man|woman|guy|lady|person|boy|girl))\b",
    re.IGNORECASE,
)
_TO_YOU = re.compile(r"\b(you|your|yours|yourself|ya|this)\b", re.IGNORECASE)
# One word asked back, too short for its meaning to be sure of, taken as it is written.
_REPEAT_WORDS = {"what?", "sorry?", "huh?", "eh?", "pardon?", "pardon", "pardon me?", "again?"}


@dataclass
class KnowledgeConfig:
    """The ``[knowledge]`` settings."""

    path: str = ""  # a Markdown file or a folder of them; "" = no knowledge
    answer: str = "verbatim"  # auto | verbatim | generate
    unknown_reply: str = UNKNOWN_REPLY
    # A match this confident (its score plus its lead over the next entry, see
    # voice.knowledge.retrieve) is said; a weaker one down to context_threshold is
    # asked back (verbatim, ``clarify``) or given to the model (auto). Chosen on the
    # museum, hotel and held-out station sets (docs/knowledge.md): 0.55 / 0.36 gave
    # the most right answers and the fewest wrong facts; 0.49 / 0.40 without asking
    # back had let the station's uncovered questions through (75% unknown, 6% wrong).
    threshold: float = 0.55
    context_threshold: float = 0.36
    # verbatim: a match between context_threshold and threshold is asked back ("Do you
    # mean: where is the cafe?"); "yes" gets the entry, "no" the unknown reply. A
    # question back never says a wrong fact (docs/knowledge.md).
    clarify: bool = True
    ask_text: str = ASK_TEXT  # the question back, in the persona's language
    # Entries asked back one after another: after a "no", the next best is asked too
    # when it is itself a weaker match (its score plus its lead over the one after it
    # reaches context_threshold). 1: the best only, then the unknown reply.
    asks: int = 2
    # A confident entry without the kind of fact asked for (no price for "how much", no
    # time for "when", no number to ring for "what's the phone number", none for "how
    # many", no length for "how long"; voice.knowledge.fact_kinds) is asked back.
    fact_kinds: bool = True
    small_talk_threshold: float = 0.6  # this close to a small-talk line is small talk
    # Said as written to a question about the assistant itself, who it is or what it
    # can do (as close to one of IDENTITY or CAPABILITY as small talk must be to its
    # lines, and closer than to any entry: a file's own "Who are you?" entry wins).
    introduction: str = ""
    # Without an introduction, "I'm <name>." answers who it is (a persona sets its name,
    # in English). Neither: such questions go to the model, as small talk.
    name: str = ""
    context_entries: int = 2  # entries put in the model's prompt (generate, auto)
    cache_dir: str = ""  # where entry embeddings are kept; "" = ~/.cache/voice/knowledge

    def validate(self) -> None:
        try:
            fits = "{heading}" in self.ask_text and bool(self.ask_text.format(heading="x"))
        except (KeyError, IndexError, ValueError):
            fits = False
        if not fits:
            raise ConfigError(
                f"knowledge.ask_text {self.ask_text!r} does not name the entry as {{heading}}.",
                "Put {heading} where the entry goes, and no other braces: "
                '"Do you mean: {heading}?"',
            )
        if self.asks < 1:
            raise ConfigError(
                f"knowledge.asks must be at least 1, not {self.asks}.",
                "1 asks back about the best entry only; 2 also the next after a no.",
            )
        if self.answer not in POLICIES:
            raise ConfigError(
                f"knowledge.answer {self.answer!r} is not one of {', '.join(POLICIES)}.",
                "verbatim says a matched entry as written; see docs/knowledge.md.",
            )


Kind = Literal["say", "unknown", "context", "chat", "ask", "repeat"]


@dataclass(frozen=True)
class Decision:
    """What to do with one turn's words.

    ``say``: speak ``text`` (an entry's answer) as written; ``unknown``: speak
    ``text`` (the unknown reply); ``context``: the model answers with ``text`` (the
    best entries) in its prompt; ``chat``: the model answers as it would without
    knowledge (small talk); ``ask``: speak ``text``, a question back ("Do you mean:
    where is the cafe?"), whose "yes" is answered with ``if_yes`` (the entry) and
    "no" with ``if_no`` (the unknown reply); ``repeat``: say the last reply again (the
    conversation knows it: "pardon?")."""

    kind: Kind
    text: str = ""
    matches: tuple[Match, ...] = field(default_factory=tuple)
    small_talk: float = 0.0
    if_yes: str = ""
    if_no: str = ""
    then: Decision | None = None

    @property
    def spoken_as_written(self) -> bool:
        return self.kind in ("say", "unknown", "ask", "repeat")


# English, and the first word of a yes or a no in the languages the voices speak
# (docs/languages.md): Spanish, French, German, Mandarin.
_YES = {
    "yes", "yeah", "yep", "yup", "yea", "correct", "exactly", "sure",
    "sí", "si", "claro", "oui", "ouais", "ja", "genau", "是", "是的", "对", "对的", "嗯", "好",
}  # fmt: skip
_NO = {"no", "nope", "nah", "not", "wrong", "non", "nein", "不", "不是", "不对", "没有"}
# Said before the answer to a question back ("hmm, yes", "oh no"): not the answer.
_LEAD_INS = {
    "um", "umm", "uh", "uhm", "er", "erm", "hmm", "mm", "ah", "oh", "well", "so", "okay", "ok",
}  # fmt: skip


def answer_to_question(text: str) -> str:
    """ "yes", "no" or "" (neither, or a new question: "no, where are the toilets?"):
    the visitor's reply to a question back, by its first word."""
    low = text.lower().replace("’", "'")
    words = "".join(c if c.isalnum() or c == "'" else " " for c in low).split()
    while len(words) > 1 and words[0] in _LEAD_INS and words[:2] != ["uh", "huh"]:
        words = words[1:]  # "hmm, yes", "oh no", "well, yeah": the answer is the word after
    if not words or len(words) > 4:  # more than "yes, that's right, please": a new turn
        return ""
    if words[0] in _YES or words[:2] in (["uh", "huh"], ["that's", "right"], ["i", "do"]):
        return "yes"
    if words[0] in _NO or words[:2] == ["i", "don't"]:
        return "no"
    return ""


def follow_up(asked: Decision, text: str) -> Decision | None:
    """The decision for the visitor's reply to a question back; None: it is not a yes
    or a no, and is decided as a question of its own."""
    reply = answer_to_question(text)
    if reply == "yes":
        return Decision("say", asked.if_yes, asked.matches)
    if reply == "no":
        return asked.then or Decision("unknown", asked.if_no, asked.matches)
    return None


def turn_decision(
    grounding: Callable[[str], Decision], asked: Decision | None, text: str, last_said: str
) -> tuple[Decision | None, Decision | None]:
    """What to do with a turn's ``text``, and the question back still open after it.

    The answer to an open question back (``asked``) comes first, then the knowledge.
    "Pardon?" says ``last_said`` again and leaves the question open (the words after it
    are still its answer); with nothing said yet it is None: the model answers."""
    decision = (follow_up(asked, text) if asked else None) or grounding(text)
    if decision.kind == "repeat":
        return (dataclasses.replace(decision, text=last_said) if last_said else None), asked
    return decision, decision if decision.kind == "ask" else None


def clarifying_question(heading: str, template: str = ASK_TEXT) -> str:
    """How a weak match is asked back: its heading, in ``template`` ("Do you mean:
    where is the cafe?", "Do you mean: ticket prices?"); a topic heading reads as well
    as a question heading in this form."""
    heading = heading.strip().rstrip(".?？。")
    first = heading.split(" ", 1)[0]
    # An acronym stays ("GP appointments", "ATM"), and so does "I" ("I lost my ticket").
    if sum(c.isupper() for c in first) < 2 and first != "I" and not first.startswith("I'"):
        heading = f"{heading[:1].lower()}{heading[1:]}"
    return template.format(heading=heading)


class Grounding:
    """Decides, for the user's words, whether the knowledge answers them."""

    def __init__(self, index: KnowledgeIndex, config: KnowledgeConfig) -> None:
        config.validate()
        self.index = index
        self.config = config
        self._small_talk = index.embedder.embed(list(SMALL_TALK))
        # Questions about the assistant, each with its answer as written: the file's own
        # entry for them where it has one (an NPC's "Who are you?"), else the persona's.
        who = config.introduction or (f"I'm {config.name}." if config.name else "")
        about: tuple[tuple[tuple[str, ...], str], ...] = (
            (IDENTITY, who),
            (CAPABILITY, config.introduction),
        )
        self._about: list[tuple[FloatArray, str, int | None]] = []
        for lines, introduction in about:
            vectors = index.embedder.embed(list(lines))
            own = index.entries_asked_as(vectors, OWN_ENTRY)
            said = index.entries[own[0]].answer if own else introduction
            if said:
                self._about.append((vectors, said, own[0] if own else None))
        self._own_entries = {own for _, _, own in self._about if own is not None}
        self._repeat = index.embedder.embed(list(REPEAT))
        # The last few decisions by text: a speculative reply and the reply it becomes
        # (or another session asked the same) cost one lookup, not two.
        self._recent: RecentByText[Decision] = RecentByText(RECENT)

    def __call__(self, text: str) -> Decision:
        return self._recent.get(text, self.decide)

    def decide(self, text: str) -> Decision:
        config = self.config
        text = without_fillers(text)  # "um, where is the, uh, cafe?": the question
        if not text.strip():
            return Decision("chat")
        vector = self.index.embedder.embed([text])[0]
        k = max(config.context_entries, config.asks + 1 if config.clarify else 1)
        matches = tuple(self.index.search(text, k=k, vector=vector))
        small_talk = float(np.max(self._small_talk @ vector))
        best = matches[0] if matches else None

        def nearer(score: float) -> bool:
            """``score`` (the best cosine to a set of lines) as close as small talk must
            be, and closer than any entry."""
            return score >= config.small_talk_threshold and (best is None or score > best.meaning)

        if text.strip().lower() in _REPEAT_WORDS or nearer(float(np.max(self._repeat @ vector))):
            return Decision("repeat", "", matches, small_talk)
        about_you = not _SOMEONE_ELSE.search(text) or bool(_TO_YOU.search(text))
        for lines, said, own in self._about if about_you else ():
            near = float(np.max(lines @ vector))
            # the file's own entry was found as the question itself: as near to the lines
            # as small talk must be is enough ("who are you?" has no word to weigh)
            own_found = best is not None and best.index == own
            if nearer(near) or (own_found and near >= config.small_talk_threshold):
                return Decision("say", said, matches, small_talk)
        # A confident entry without the kind of fact asked for is asked back (below), and
        # so is the file's own "Who are you?" entry for a question about someone else
        # (Brom's, with confidence, for "who is he?").
        held_back = best is not None and (
            (config.fact_kinds and bool(missing_kind(text, best.entry.answer)))
            or (not about_you and best.index in self._own_entries)
        )
        # Small talk before a confident entry: nearer a small-talk line than to any entry's
        # phrasing, it is small talk however well an entry's other texts match ("can you
        # hear me?" had been told about the hearing loop, "see you" where the smithy is).
        if nearer(small_talk):
            return Decision("chat", "", matches, small_talk)
        if best is not None and best.confidence >= config.threshold and not held_back:
            if config.answer == "generate":
                return Decision("context", self._context(matches), matches, small_talk)
            return Decision("say", best.entry.answer, matches, small_talk)
        weak = best is not None and best.confidence >= config.context_threshold
        if config.answer == "auto" and weak:
            return Decision("context", self._context(matches), matches, small_talk)
        if config.answer == "verbatim" and config.clarify and weak:
            return self._asked_back(matches, small_talk)
        return Decision("unknown", config.unknown_reply, matches, small_talk)

    def _asked_back(self, matches: tuple[Match, ...], small_talk: float) -> Decision:
        """The question back about the best entry, and after each "no" the next one's
        while it is a weaker match on its own (``asks`` in all)."""
        config = self.config
        chain = [matches[0]]
        for rank in range(1, min(config.asks, len(matches))):
            here = matches[rank]
            after = matches[rank + 1].score if rank + 1 < len(matches) else 0.0
            if 2 * here.score - after < config.context_threshold:
                break
            chain.append(here)
        decision: Decision | None = None
        for match in reversed(chain):
            question = clarifying_question(match.entry.heading, config.ask_text)
            decision = Decision(
                "ask", question, (match, *(m for m in matches if m is not match)), small_talk,
                match.entry.answer, config.unknown_reply, decision,
            )  # fmt: skip
        assert decision is not None
        return decision

    def _context(self, matches: tuple[Match, ...]) -> str:
        floor = self.config.context_threshold
        facts = [m.entry.answer for m in matches if m.confidence >= floor]
        return " ".join(facts or [matches[0].entry.answer])


def context_prompt(system_prompt: str, facts: str) -> str:
    """The persona's prompt with the facts the model may use, and only those."""
    return (
        f"{system_prompt} Answer the next question using only these facts, in your own "
        f"words, without adding any other fact: {facts}"
    ).strip()


_LOADED: dict[tuple[object, ...], KnowledgeIndex] = {}
_LOADED_LOCK = threading.Lock()


def default_cache_dir() -> Path:
    return user_cache_dir() / "knowledge"


def load_index(path: str | Path, embedder: Embeds, cache_dir: str = "") -> KnowledgeIndex:
    """The index of a knowledge file or folder, read once per content and process
    (every browser session of a server shares it); errors name the file and line."""
    source = Path(path).expanduser()
    files = sorted(source.glob("*.md")) if source.is_dir() else [source]
    stamp = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in files if f.exists())
    key = (str(source.resolve()), stamp, id(embedder))
    with _LOADED_LOCK:
        index = _LOADED.get(key)
        if index is None:
            entries = read_knowledge(source)
            folder = Path(cache_dir) if cache_dir else default_cache_dir()
            index = _LOADED[key] = KnowledgeIndex(entries, embedder, cache_dir=folder)
        return index


_GROUNDINGS: dict[tuple[object, ...], Grounding] = {}


def shared_grounding(index: KnowledgeIndex, config: KnowledgeConfig) -> Grounding:
    """One :class:`Grounding` per index and settings (it holds no conversation state)."""
    key = (id(index), *dataclasses.astuple(config))
    with _LOADED_LOCK:
        grounding = _GROUNDINGS.get(key)
        if grounding is None:
            grounding = _GROUNDINGS[key] = Grounding(index, config)
        return grounding
