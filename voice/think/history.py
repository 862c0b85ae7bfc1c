"""Conversation history that always fits the model's context window.

The system prompt (the persona) is always kept; then as many of the most
recent turns as fit the budget (context minus room for the reply). A single
user input too long to fit even alone is an error the caller can report,
never a crash or a silently truncated question.
"""

from __future__ import annotations

from collections.abc import Callable

from voice.errors import VoiceError
from voice.think.backend import LlmBackend, LlmConfig, Message

MAX_KEPT_MESSAGES = 200  # far more than any context window holds
MAX_SAID_CHARS = 600  # unprompted lines in a row (an NPC's barks) keep only the latest


class InputTooLongError(VoiceError):
    code = "input_too_long"


class History:
    def __init__(
        self,
        system_prompt: str,
        context_tokens: int,
        reply_tokens: int,
        count_tokens: Callable[[list[Message]], int],
    ) -> None:
        self.system = Message("system", system_prompt)
        self.turns: list[Message] = []
        self.budget = context_tokens - reply_tokens
        self._count = count_tokens
        self._costs: dict[Message, int] = {}  # per message: prompts are built often
        # Of the last assistant message, how many leading characters are an LLM's answer
        # (kept whole); the rest is what the application had it say (bounded).
        self._answer_chars = 0

    @classmethod
    def for_backend(cls, backend: LlmBackend, config: LlmConfig) -> History:
        """A history sized to the backend's context, with the configured persona."""
        return cls(
            config.system_prompt, backend.context_tokens, config.max_reply_tokens,
            backend.count_tokens,
        )  # fmt: skip

    def prompt_for(self, user_text: str) -> list[Message]:
        """System prompt + the most recent turns that fit + this user input."""
        user = Message("user", user_text)
        base = self._count([self.system, user])
        if base > self.budget:
            raise InputTooLongError(
                f"that input is too long for the model ({base} tokens, room for {self.budget}).",
                "Say it in shorter parts, or raise llm.context_tokens (a model with more context).",
            )
        kept: list[Message] = []
        used = base
        for message in reversed(self.turns):
            cost = self._cost(message)
            if used + cost > self.budget:
                break
            kept.insert(0, message)
            used += cost
        # Never start the kept history with an assistant turn whose question was dropped
        # (something the assistant said first, a greeting, had no question: it stays).
        opening = self.turns[0] if self.turns and self.turns[0].role == "assistant" else None
        while kept and kept[0].role == "assistant" and kept[0] is not opening:
            kept.pop(0)
        return [self.system, *kept, user]

    def _cost(self, message: Message) -> int:
        cost = self._costs.get(message)
        if cost is None:
            cost = self._costs[message] = self._count([message])
        return cost

    def so_far(self) -> list[Message]:
        """The system prompt and the turns a next prompt would keep (for pre-filling)."""
        return self.prompt_for("")[:-1]

    def add_turn(self, user_text: str, assistant_text: str) -> None:
        self.turns.append(Message("user", user_text))
        self.turns.append(Message("assistant", assistant_text))
        self._answer_chars = len(assistant_text)
        self._trim()

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
