"""Which tool the user's words call, if any, and with what arguments.

Two steps, because the bundled 135M model is weak at the first and fine at the
second when it cannot go wrong in form (docs/tools.md has the numbers):

1. **shortlist by meaning**: the cosine between the words' sentence embedding and
   each tool's description and examples (the encoder that finds knowledge entries,
   voice.embed). Below ``threshold``, or closer to everyday small talk than to any
   tool, or talk that asks for nothing (voice.tools.intent), nothing is called and
   the model answers as usual. Tools within ``margin`` of the best one stay on the
   list (``max_candidates`` at most);
2. **fill from the words, else under a grammar**: the values and numbers the words
   say, or the value nearest what they mean, settle most calls with no model at all;
   what is left, the model writes, held by a GBNF grammar
   (voice.tools.grammar) to the shortlisted tools and their parameters' types and
   closed sets, so the call is always a known tool with valid arguments. Over HTTP
   the same tools go to the server as OpenAI ``tools`` (``tool_choice``: see
   ``ToolsConfig.tool_choice``) and its streamed call is checked the same way; a
   server that answers in words makes no call.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from voice.embed.recent import RecentByText
from voice.think.backend import CallRequest, FillsCalls, Message
from voice.tools.grammar import call_grammar, parse_call
from voice.tools.intent import not_asking
from voice.tools.schema import Param, Tool, ToolError

FloatArray = npt.NDArray[np.float32]
# Everyday lines that call nothing: an utterance closer to one of them than to every
# tool is small talk, whatever its absolute score.
CHAT = (
    "hello", "hi there", "good morning", "thanks", "thank you very much", "goodbye",
    "how are you", "what's your name", "who are you", "nice weather today",
    "tell me a joke", "what do you think", "I'm just looking around", "that's nice",
    "where are you from", "how long have you been here", "okay", "never mind",
)  # fmt: skip


class Embeds(Protocol):
    """What the shortlist needs of a sentence encoder (voice.embed.Embedder is one)."""

    def embed(self, texts: list[str]) -> FloatArray: ...


@dataclass
class ToolsConfig:
    """The ``[tools]`` settings."""

    # Cosine (words vs a tool's description/examples) a call needs: on the NPC probe the
    # calls scored 0.37-0.89, the small talk 0.13-0.22 (docs/tools.md). Measured with
    # `voice bench tools` (docs/tools.md).
    threshold: float = 0.3
    margin: float = 0.08  # tools this close to the best one are offered to the model too
    max_candidates: int = 3
    # A closed set's value nearest the words' meaning is taken when it leads the next
    # by this much (cosine); otherwise the model chooses. docs/tools.md has the sweep.
    value_margin: float = 0.05
    # A call whose arguments the words do not name (all defaults: "Is there a car
    # park?" -> events(day="today")) needs the words this near the tool.
    defaults_threshold: float = 0.45
    max_call_tokens: int = 48
    time_limit_s: float = 5.0  # a tool that runs longer is abandoned (the apology is said)
    filler_after_ms: int = 300  # a call still running this long: the filler is said
    filler_text: str = "One moment."
    apology_text: str = "Sorry, I couldn't do that."
    # What happens to a tool's result: "say": a string is said as written (anything
    # else goes to the model); "model": the model always tells the outcome. The bundled
    # 135M model told "sold two swords" as "No, no." and a given potion as "I can't
    # provide a potion" in examples/npc.py, so strings are said by default.
    results: str = "say"
    # The HTTP backend's OpenAI ``tool_choice`` once the shortlist found tools:
    # "required" (the model must call one: one tool is named, several are "required"),
    # as the embedded grammar does; "auto" lets the server's model answer in words
    # instead (then no call, the usual reply). docs/tools.md says why "required".
    tool_choice: str = "required"

    def validate(self) -> None:
        if self.tool_choice not in ("required", "auto"):
            raise ToolError(
                f"[tools] tool_choice {self.tool_choice!r} is not a choice.",
                'Use "required" (the default) or "auto".',
            )


@dataclass(frozen=True)
class Call:
    """A decided call: the tool, its checked arguments, and how it was chosen."""

    tool: Tool
    arguments: dict[str, Any]
    score: float
    candidates: tuple[str, ...] = ()
    raw: str = ""  # what the model wrote under the grammar
    choose_ms: float = 0.0


@dataclass(frozen=True)
class Shortlist:
    scores: dict[str, float] = field(default_factory=dict)  # best cosine per tool
    chat: float = 0.0  # best cosine to a small-talk line
    candidates: tuple[Tool, ...] = ()


_COUNTS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty"
)
NUMBERS = {w: i + 1 for i, w in enumerate(_COUNTS.split(" "))}
NUMBERS.update({"a": 1, "an": 1, "a couple": 2, "a pair": 2, "dozen": 12, "a dozen": 12})
_WORDS = re.compile(r"[a-z0-9]+")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def _mentions(text: str, value: str) -> bool:
    """Whether the words say ``value`` ("swords" says "sword", "toilet" "toilets")."""
    words = _WORDS.findall(text.lower())
    wanted = _WORDS.findall(value.lower())
    if not wanted:
        return False
    last = wanted[-1]
    forms = [wanted, [*wanted[:-1], last + "s"], [*wanted[:-1], last + "es"]]
    if len(last) > 3 and last.endswith("s"):  # "toilets" is said "the toilet"
        forms.append([*wanted[:-1], last[:-1]])
    if len(last) > 2 and last.endswith("e"):  # Whisper writes the American "ax"
        forms.append([*wanted[:-1], last[:-1]])
    spans = range(len(words) - len(wanted) + 1)
    return any(words[i : i + len(wanted)] in forms for i in spans)


def said_numbers(text: str) -> list[int]:
    """The whole numbers the words say, as digits or words ("two", "a dozen", "3")."""
    low = " ".join(_WORDS.findall(text.lower()))
    found = [int(d) for d in re.findall(r"\b\d{1,6}\b", low)]
    for phrase, value in sorted(NUMBERS.items(), key=lambda kv: -len(kv[0])):
        if re.search(rf"\b{phrase}\b", low):
            found.append(value)
            low = re.sub(rf"\b{phrase}\b", " ", low)
    return found


def narrowed(tool: Tool, text: str, around: str = "", defaults: bool = True) -> Tool:
    """``tool`` with its closed sets cut to the values the words name, and its whole
    numbers to the numbers they say; a parameter the words do not settle keeps its
    default when it has one ("what's on?": today). ``around``: the whole turn, when
    ``text`` is the sentence of it that asks; a value or a number that sentence does
    not say is looked for there ("My helmet is dented. Can you fix it?").

    The 135M model picks a closed set's value poorly ("a potion" became "apple"; "five
    helmets" a shield) but the words usually name it; what they do not settle (two
    values named, a free string) is left to the model."""
    params = []
    numbers = sorted(set(said_numbers(text))) or sorted(set(said_numbers(around)))
    for param in tool.params:
        if param.choices and param.type == "string":
            named = tuple(c for c in param.choices if _mentions(text, str(c))) or tuple(
                c for c in param.choices if _mentions(around, str(c))
            )
            if named:
                param = dataclasses.replace(param, choices=named)
            elif defaults and not param.required and param.default in param.choices:
                param = dataclasses.replace(param, choices=(param.default,))
        elif param.type == "integer" and not param.choices:
            if numbers:
                param = dataclasses.replace(param, choices=tuple(numbers))
            elif defaults and not param.required and isinstance(param.default, int):
                param = dataclasses.replace(param, choices=(param.default,))
        params.append(param)
    return dataclasses.replace(tool, params=tuple(params))


def named_first(tools: list[Tool], text: str) -> list[Tool]:
    """The candidates whose closed sets hold a value the words name, when some do:
    "could I have an apple" names give's apple, not an item sell has, so the model is
    not offered sell (it chose it, and an axe, in the first held-out run). Likewise a
    tool whose name the words say, when only one does."""
    naming = [t for t in tools if any(p.choices and _names_one(p, text) for p in t.params)]
    tools = naming or tools
    called = [t for t in tools if _says_name(text, t)]  # "sell me a shield": not repair
    return called if len(called) == 1 else tools


def _says_name(text: str, tool: Tool) -> bool:
    return _mentions(text, tool.name.replace("_", " "))


def _names_one(param: Param, text: str) -> bool:
    return param.type == "string" and any(_mentions(text, str(c)) for c in param.choices)


def settled(param: Param) -> bool:
    """Whether a (narrowed) parameter has one value left: nothing for a model to choose."""
    return len(param.choices) == 1


def _signature(param: Param) -> str:
    if param.choices:
        kind = " or ".join(str(c) for c in param.choices)
    else:
        kind = {"string": "text", "integer": "a whole number"}.get(param.type, param.type)
    return f"{param.name}: {kind}"


def call_prompt(text: str, tools: Sequence[Tool]) -> list[Message]:
    """What the model reads to fill a call: the tools and the user's words."""
    listing = "\n".join(
        f"- {t.name}({', '.join(_signature(p) for p in t.params)}): {t.description}" for t in tools
    )
    system = (
        "You turn what the user says into a function call, with the exact quantities "
        f"and names the user said.\nFunctions:\n{listing}"
    )
    return [Message("system", system), Message("user", text)]


RECENT = 32  # focus results kept by text
EMBEDDED_MAX = 4096  # fixed texts' vectors remembered per encoder (~6 MB)
_EMBEDDED: weakref.WeakKeyDictionary[Any, dict[str, FloatArray]] = weakref.WeakKeyDictionary()
_EMBEDDED_LOCK = threading.Lock()


def _embedded(embedder: Embeds, texts: list[str]) -> list[FloatArray]:
    """The vectors of a chooser's fixed texts (descriptions, examples, the small-talk
    lines, closed sets' values), remembered per encoder: a server builds a chooser for
    every page that declares tools, and ``@bot.tool`` one per registration, and each
    would embed the same texts again."""
    try:
        with _EMBEDDED_LOCK:
            known = _EMBEDDED.setdefault(embedder, {})
    except TypeError:  # an encoder that cannot be weakly referenced: not remembered
        known = {}
    with _EMBEDDED_LOCK:
        out = {t: known[t] for t in texts if t in known}
    missing = list(dict.fromkeys(t for t in texts if t not in out))
    if missing:
        out.update(zip(missing, embedder.embed(missing), strict=True))
        with _EMBEDDED_LOCK:
            known.update((t, out[t]) for t in missing)
            while len(known) > EMBEDDED_MAX:  # pages may declare anything: keep it bounded
                known.pop(next(iter(known)))
    return [out[t] for t in texts]


def tool_choice(tools: Sequence[Tool], mode: str = "required") -> str | dict[str, Any]:
    """The OpenAI ``tool_choice`` for a call to one of ``tools`` (the shortlist).

    "required" names the tool when there is one: the same demand, in the form that
    more servers honour (llama-cpp-python's server ignores "required" but holds a
    named function's arguments to its schema)."""
    if mode == "required" and len(tools) == 1:
        return {"type": "function", "function": {"name": tools[0].name}}
    return mode


class Chooser:
    """Decides the call (or none) for one utterance; shared by a conversation's turns."""

    def __init__(
        self, tools: Sequence[Tool], embedder: Embeds, config: ToolsConfig | None = None
    ) -> None:
        self.tools = list(tools)
        self.embedder = embedder
        self.config = config or ToolsConfig()
        self.config.validate()  # a bad setting fails at start-up, not at the first call
        texts = [(i, s) for i, t in enumerate(self.tools) for s in (t.description, *t.examples)]
        self._owner = np.array([i for i, _ in texts], dtype=np.int64)
        # Each closed set's values too: the words may mean a value they do not say
        # ("the loo", "somewhere to leave my coat", "saturday or sunday").
        sets = [
            (t.name, p.name, [str(c) for c in p.choices])
            for t in self.tools for p in t.params
            if p.type == "string" and len(p.choices) > 1
        ]  # fmt: skip
        fixed = [*(s for _, s in texts), *CHAT, *(v for _, _, values in sets for v in values)]
        vectors = iter(_embedded(embedder, fixed))
        self._vectors = np.stack([next(vectors) for _ in texts]) if texts else None
        self._chat = np.stack([next(vectors) for _ in CHAT])
        self._values: dict[tuple[str, str], dict[str, FloatArray]] = {
            (tool, param): {v: next(vectors) for v in values} for tool, param, values in sets
        }
        self._recent: RecentByText[tuple[str, Shortlist, FloatArray | None]] = RecentByText(RECENT)

    def shortlist(self, text: str, vector: FloatArray | None = None) -> Shortlist:
        if not self.tools or self._vectors is None or not text.strip():
            return Shortlist()
        if vector is None:
            vector = self.embedder.embed([text])[0]
        best = np.full(len(self.tools), -1.0, dtype=np.float32)
        np.maximum.at(best, self._owner, self._vectors @ vector)
        chat = float(np.max(self._chat @ vector))
        scores = {t.name: float(best[i]) for i, t in enumerate(self.tools)}
        top = float(best.max())
        config = self.config
        if top < config.threshold or chat > top or not_asking(text):
            return Shortlist(scores, chat)
        order = np.argsort(-best)[: config.max_candidates]
        candidates = tuple(self.tools[i] for i in order if best[i] >= top - config.margin)
        said = tuple(
            t for i, t in enumerate(self.tools)
            if t not in candidates and best[i] >= config.threshold and _says_name(text, t)
        )  # fmt: skip
        return Shortlist(scores, chat, candidates + said)

    def focus(self, text: str) -> tuple[str, Shortlist]:
        """The sentence of ``text`` that calls a tool, and its shortlist (the whole text
        and its shortlist when none does). A turn may greet before it asks ("Hello
        there. Sell me five helmets.", or two utterances the turn-taking joined): the
        greeting's small talk must not hide the request, nor lend it its numbers."""
        focused, short, _ = self._focused(text)
        return focused, short

    def _focused(self, text: str) -> tuple[str, Shortlist, FloatArray | None]:
        """``focus``, with the chosen sentence's embedding; the last few by text (the
        session asks when a reply starts, the engine's ToolChoice job again, and a
        speculative reply and the reply it becomes share the words)."""
        return self._recent.get(text, self._focus_now)

    def _focus_now(self, text: str) -> tuple[str, Shortlist, FloatArray | None]:
        if not self.tools or self._vectors is None or not text.strip():
            return text, Shortlist(), None
        parts = [p for p in _SENTENCES.split(text.strip()) if p.strip()]
        texts = [text] if len(parts) < 2 else [text, *parts]
        vectors = self.embedder.embed(texts)
        found = [(t, self.shortlist(t, v), v) for t, v in zip(texts, vectors, strict=True)]
        calling = [f for f in found if f[1].candidates]
        if not calling:
            return found[0]
        return max(calling, key=lambda f: max(f[1].scores.values()) - f[1].chat)

    def by_meaning(self, tool: Tool, vector: FloatArray) -> Tool:
        """``tool`` with each closed set the words left open cut to the value nearest
        their meaning, where one is clearly nearest (by ``value_margin``); the 135M
        model, left to choose, named the dinosaur hall for "the loo", "leave my coat"
        and "buy a coffee" alike."""
        params = []
        for param in tool.params:
            values = self._values.get((tool.name, param.name))
            if values and len(param.choices) > 1:
                ranked = sorted(
                    ((float(values[str(c)] @ vector), c) for c in param.choices), reverse=True
                )
                if ranked[0][0] - ranked[1][0] >= self.config.value_margin:
                    param = dataclasses.replace(param, choices=(ranked[0][1],))
            params.append(param)
        return dataclasses.replace(tool, params=tuple(params))

    def _only_defaults(self, tool: Tool, text: str, around: str, vector: FloatArray) -> bool:
        """Whether the words name none of ``tool``'s arguments (by word or by meaning),
        so that only its defaults would settle the call."""
        bare = narrowed(tool, text, around, defaults=False)
        if not bare.params or any(settled(p) for p in bare.params):
            return False
        bare = self.by_meaning(bare, vector)
        return not any(settled(p) for p in bare.params)

    def choose(self, text: str, backend: FillsCalls) -> Call | None:
        """The call ``text`` (a turn) asks for, or None. The model is asked only what
        the words leave open: which of several tools, a value neither said nor meant."""
        start = time.perf_counter()
        turn = text
        text, short, vector = self._focused(turn)
        if not short.candidates or vector is None:
            return None
        names = tuple(t.name for t in short.candidates)
        around = turn if text != turn else ""
        offered = named_first([narrowed(t, text, around) for t in short.candidates], text)
        offered = [self.by_meaning(t, vector) for t in offered]
        original = {t.name: t for t in short.candidates}
        weak = len(offered) == 1 and short.scores[offered[0].name] < self.config.defaults_threshold
        if weak and self._only_defaults(original[offered[0].name], text, around, vector):
            return None  # the words name none of its arguments, and are only near it
        if len(offered) == 1 and all(settled(p) for p in offered[0].params):
            # One tool, and the words name every argument (or leave its default): the
            # grammar would leave the model one way to write the call, so it is not
            # asked (its grammar-held pass took 550-800 ms here: docs/tools.md).
            tool = original[offered[0].name]
            raw = ""
            arguments: dict[str, Any] = {p.name: p.choices[0] for p in offered[0].params}
            arguments = tool.check_arguments(arguments)
        else:
            request = CallRequest(
                grammar=call_grammar(offered),
                tools=[t.openai() for t in offered],
                tool_choice=tool_choice(offered, self.config.tool_choice),
                max_tokens=self.config.max_call_tokens,
            )
            prompt = call_prompt(text, [original[t.name] for t in offered])
            filled = backend.fill_call(prompt, request)
            if filled is None:
                return None  # the model answered in words (an HTTP server may): no call
            raw = filled
            called, arguments = parse_call(raw, offered)
            tool = original[called.name]
            arguments = tool.check_arguments(arguments)
        elapsed = (time.perf_counter() - start) * 1000
        return Call(tool, arguments, short.scores[tool.name], names, raw, elapsed)
