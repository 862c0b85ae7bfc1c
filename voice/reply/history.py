"""Conversation history that always fits the model's context window.

The system prompt (the persona) is always kept; then as many of the most
recent turns as fit the budget (context minus room for the reply, or the
smaller ``history_tokens``: a tiny model answers the last question better
when it is not buried under a long past). A single user input too long to fit
even alone is an error the caller can report, never a crash or a silently
truncated question.

Each prompt carries what the reply path needs to know about this conversation
(:class:`Prompt`): a sampling seed, fixed per conversation and turn, and the
reply's limits, among them the sentences of the recent replies, which a new
reply may not say again.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable
from typing import Any

from voice.errors import VoiceError
from voice.reply.guard import ReplyLimits
from voice.reply.repeats import same_question
from voice.think.backend import LlmBackend, LlmConfig, Message, system_prompt_of

MAX_KEPT_MESSAGES = 200  # far more than any context window holds
MAX_SAID_CHARS = 600  # unprompted lines in a row (an NPC's barks) keep only the latest


class Prompt(list[Message]):
    """The messages of one request, with the conversation's settings for its reply.

    A list, so every layer that passes messages on (the session, its jobs, the
    engine lane) carries these along unchanged; a backend or the reply path reads
    them where it can and a plain list still works (no seed, no limits).
    """

    def __init__(
        self,
        messages: Iterable[Message],
        seed: int | None = None,
        limits: ReplyLimits | None = None,
    ) -> None:
        super().__init__(messages)
        self.seed = seed
        self.limits = limits or ReplyLimits()

    def resampled(self, attempt: int) -> Prompt:
        """The request sampled again after the guard let none of its reply through: the
        system prompt and the user's words alone (the small model copies its last reply
        from the history), under another seed that is still fixed, so a run repeats."""
        head = [m for m in self[:1] if m.role == "system"]
        seed = None if self.seed is None else (self.seed + 7919 * attempt) % 2**31
        return Prompt([*head, self[-1]], seed, self.limits)


# The bundled voice's slowest pace over replies of 3.5 s or more, in spoken characters
# (voice.reply.guard.spoken_chars) a second at speaking rate 1.0: 14.7-22.3 over 28
# replies of `voice bench replies`. Characters cap the audio of a reply at this pace.
SPOKEN_CHARS_PER_S = 15.0


def new_seed() -> int:
    """A conversation's own seed: two conversations never sample alike by accident."""
    return random.SystemRandom().randrange(2**31)


class InputTooLongError(VoiceError):
    code = "input_too_long"


class History:
    def __init__(
        self,
        system_prompt: str,
        context_tokens: int,
        reply_tokens: int,
        count_tokens: Callable[[list[Message]], int],
        limits: ReplyLimits | None = None,
        history_tokens: int = 0,
        seed: int | None = None,
        repeat_window: int = 0,
    ) -> None:
        self.system = Message("system", system_prompt)
        self.turns: list[Message] = []
        self.budget = context_tokens - reply_tokens
        self.history_tokens = history_tokens  # 0: whatever the context holds
        self.limits = limits or ReplyLimits()
        self.seed = new_seed() if seed is None else seed
        self.repeat_window = repeat_window  # replies whose sentences a reply may not repeat
        self._count = count_tokens
        self._costs: dict[Message, int] = {}  # per message: prompts are built often
        # Of the last assistant message, how many leading characters are an LLM's answer
        # (kept whole); the rest is what the application had it say (bounded).
        self._answer_chars = 0

    @classmethod
    def for_backend(
        cls, backend: LlmBackend, config: LlmConfig, speaking_rate: float = 1.0
    ) -> History:
        """A history sized to the backend's context, with the configured persona;
        ``speaking_rate``: the voice's (its replies' audio is capped in characters)."""
        limits = ReplyLimits(
            max_sentences=config.reply_sentences,
            max_chars=config.reply_max_chars,
            hard_chars=int(config.reply_max_audio_s * SPOKEN_CHARS_PER_S * speaking_rate),
            ngram=config.loop_ngram,
            fallback=config.fallback_reply,
            resamples=config.reply_resamples,
        )
        return cls(
            system_prompt_of(config), backend.context_tokens, config.max_reply_tokens,
            backend.count_tokens, limits, config.history_tokens,
            None if config.seed < 0 else config.seed, config.repeat_window,
        )  # fmt: skip

    def prompt_for(self, user_text: str) -> Prompt:
        """System prompt + the most recent turns that fit + this user input."""
        user = Message("user", user_text)
        base = self._count([self.system, user])
        if base > self.budget:
            raise InputTooLongError(
                f"that input is too long for the model ({base} tokens, room for {self.budget}).",
                "Say it in shorter parts, or raise llm.context_tokens (a model with more context).",
            )
        budget = self.budget
        if self.history_tokens > 0:
            budget = min(budget, base + self.history_tokens)
        kept: list[Message] = []
        used = base
        for message in reversed(self.turns):
            cost = self._cost(message)
            if used + cost > budget:
                break
            kept.insert(0, message)
            used += cost
        # Never start the kept history with an assistant turn whose question was dropped
        # (something the assistant said first, a greeting, had no question: it stays).
        opening = self.turns[0] if self.turns and self.turns[0].role == "assistant" else None
        while kept and kept[0].role == "assistant" and kept[0] is not opening:
            kept.pop(0)
        return Prompt([self.system, *kept, user], self._turn_seed(), self._reply_limits(user_text))

    def _turn_seed(self) -> int:
        """Fixed per conversation and turn: a speculative reply and the reply it becomes
        sample alike, and a benchmark run repeats exactly."""
        return (self.seed * 1_000_003 + len(self.turns)) % 2**31

    def _reply_limits(self, user_text: str) -> ReplyLimits:
        """The reply's limits, with the recent replies it may not repeat: all but the
        answers to this same question asked before (an answer given again because the
        user asked again is no repeat)."""
        if self.repeat_window <= 0:
            return self.limits
        replies: list[str] = []
        asked: str | None = None
        for message in self.turns:
            if message.role == "user":
                asked = message.content
            elif asked is None or not user_text or not same_question(asked, user_text):
                replies.append(message.content)
        return dataclasses.replace(self.limits, recent=tuple(replies[-self.repeat_window :]))

    def _cost(self, message: Message) -> int:
        cost = self._costs.get(message)
        if cost is None:
            cost = self._costs[message] = self._count([message])
        return cost

    def so_far(self) -> list[Message]:
        """The system prompt and the turns a next prompt would keep (for pre-filling)."""
        return self.prompt_for("")[:-1]

    def last_said(self) -> str:
        """The assistant's last words as the user heard them ("" before any): what
        "pardon?" asks for again."""
        said = [m.content for m in self.turns if m.role == "assistant"]
        return said[-1] if said else ""

    def add_turn(self, user_text: str, assistant_text: str) -> None:
        """A question and what was said in answer. A reply of which nothing was said
        (the model only repeated itself) is not kept: it would seed the next one."""
        if not assistant_text.strip():
            return
        self.turns.append(Message("user", user_text))
        self.turns.append(Message("assistant", assistant_text))
        self._answer_chars = len(assistant_text)
        self._trim()

    def take_back_turn(self, user_text: str, assistant_text: str) -> bool:
        """Forget the last turn if it is this question and answer (the user went on with
        it, and the whole of it is answered again): False, and nothing changes, if not."""
        last = self.turns[-2:]
        if last != [Message("user", user_text), Message("assistant", assistant_text)]:
            return False
        for message in last:
            self._costs.pop(message, None)
        del self.turns[-2:]
        before = self.turns[-1] if self.turns else None
        self._answer_chars = len(before.content) if before and before.role == "assistant" else 0
        return True

    def add_said(self, assistant_text: str) -> None:
        """Something the assistant said unprompted (a greeting): the next turn's context.
        After another assistant message the lines join (roles must alternate): an LLM
        answer it joins is kept whole, the said lines keep their latest few hundred
        characters."""
        answer = ""
        if self.turns and self.turns[-1].role == "assistant":
            last = self.turns.pop()
            self._costs.pop(last, None)
            answer = last.content[: self._answer_chars]
            assistant_text = f"{last.content[self._answer_chars :]} {assistant_text}".strip()
        said = assistant_text[-MAX_SAID_CHARS:]
        self._answer_chars = len(answer)
        self.turns.append(Message("assistant", f"{answer} {said}".strip() if answer else said))
        self._trim()

    def clear(self) -> None:
        """Forget the conversation (a kiosk's next visitor); the persona stays."""
        self.turns.clear()
        self._costs.clear()
        self._answer_chars = 0

    def snapshot(self) -> dict[str, Any]:
        """The conversation as plain data (the persona's prompt, the turns as heard, the
        seed), for a store: another server restores it with :meth:`restore`."""
        return {
            "system": self.system.content,
            "turns": [[m.role, m.content] for m in self.turns],
            "answer_chars": self._answer_chars,
            "seed": self.seed,
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Go on from a :meth:`snapshot` (the persona it started with included); raises
        :class:`ValueError` for data that is not one, and then changes nothing."""
        system, turns = data.get("system"), data.get("turns")
        answer_chars, seed = data.get("answer_chars", 0), data.get("seed", self.seed)
        if not isinstance(system, str) or not isinstance(turns, list):
            raise ValueError("a history snapshot needs 'system' text and a 'turns' list")
        messages = []
        for turn in turns:
            if (
                not isinstance(turn, list)
                or len(turn) != 2
                or turn[0] not in ("user", "assistant")
                or not isinstance(turn[1], str)
            ):
                raise ValueError(f"not a turn: {turn!r}")
            messages.append(Message(turn[0], turn[1]))
        for number in (answer_chars, seed):
            if isinstance(number, bool) or not isinstance(number, int) or number < 0:
                raise ValueError(f"not a count: {number!r}")
        self.system = Message("system", system)
        self.turns = messages
        self._costs.clear()
        self._answer_chars = answer_chars
        self.seed = seed
        self._trim()

    def _trim(self) -> None:
        """Prompts only ever use the turns that fit the context; keep no more than a few
        times that, so a conversation left running for hours holds bounded memory."""
        if len(self.turns) > MAX_KEPT_MESSAGES:
            cut = len(self.turns) - MAX_KEPT_MESSAGES
            while cut < len(self.turns) and self.turns[cut].role == "assistant":
                cut += 1  # never keep an answer without its question at the front
            for message in self.turns[:cut]:
                self._costs.pop(message, None)
            del self.turns[:cut]

    def truncate_last_reply(self, heard_text: str) -> None:
        """After a barge-in, keep only what the user actually heard of the last reply."""
        if self.turns and self.turns[-1].role == "assistant":
            self._costs.pop(self.turns[-1], None)
            self.turns[-1] = Message("assistant", heard_text)
            self._answer_chars = min(self._answer_chars, len(heard_text))
