"""The one small interface every language model backend implements.

A backend streams text deltas for a list of chat messages and stops within
one token when its ``cancel`` event is set: a cancelled reply must free the
CPU (embedded) or the server (HTTP) at once, never keep generating for nobody.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, cast

DEFAULT_SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Your replies are spoken aloud, so answer in one "
    "or two short, plain sentences. Never use lists, markdown, emoji or links."
)

# A few short exchanges of the kind wanted: a tiny model copies the length and tone
# of examples better than it follows an instruction (measured: docs/replies.md).
PROMPT_EXAMPLES = (
    "Example replies:\n"
    "User: What is the capital of Italy?\nAssistant: Rome.\n"
    "User: How do I boil an egg?\nAssistant: Put it in boiling water for eight minutes, "
    "then cool it in cold water.\n"
    "User: My name is Ana.\nAssistant: Nice to meet you, Ana!"
)


def system_prompt_of(config: LlmConfig) -> str:
    """The system prompt a conversation starts with (the persona, and any examples)."""
    if config.prompt_examples:
        return f"{config.system_prompt}\n\n{PROMPT_EXAMPLES}"
    return config.system_prompt


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user" or "assistant"
    content: str

    def to_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass
class LlmConfig:
    backend: str = "embedded"  # "embedded" (llama-cpp-python) or "http" (OpenAI-compatible)
    model: str = "default"  # GGUF path for embedded; model name sent to an HTTP server
    url: str = "http://127.0.0.1:8080/v1"
    api_key: str = ""
    threads: int = 1  # decode threads: leaves a core for speech synthesis meanwhile
    threads_batch: int = 2  # prompt pre-fill threads: nothing else runs before the first token
    context_tokens: int = 2048
    max_reply_tokens: int = 120
    convert_to: str = "q8_0"  # embedded: load-time GGUF conversion for faster pre-fill; "" = off
    temperature: float = 0.7
    # Sampling (embedded; sent to an HTTP server too). llama.cpp's own defaults but for
    # the frequency penalty: of the penalties and min_p, measured one by one with
    # `voice bench replies`, it cut loops (13 -> 3 of 45) without costing answers
    # (docs/replies.md).
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.6
    seed: int = -1  # the conversation's sampling seed; -1: a fresh one per conversation
    # Brevity and loops, enforced on what is spoken (voice.reply.guard); 0 turns one off.
    reply_sentences: int = 2  # a spoken reply ends after this many sentences
    reply_max_chars: int = 120  # ... or at the last sentence end before this many (as spoken)
    # ... and never past what the voice says in this long (a hard cap on characters, at
    # the voice's slowest measured pace: docs/replies.md)
    reply_max_audio_s: float = 7.5
    loop_ngram: int = 6  # ... or when it repeats a run of this many words
    # ... or a sentence, clause or opening of the last this many replies (a listener
    # hears "You're safe now." in five replies running as one reply said five times)
    repeat_window: int = 5
    # Said when the guard let none of a reply through (it only repeated an earlier one):
    # silence is no answer. "" keeps it silent.
    fallback_reply: str = "Sorry, I'm not sure."
    # ... but first sample the reply again, without the history, this many times
    reply_resamples: int = 1
    prompt_examples: bool = False  # short example exchanges after the system prompt
    history_tokens: int = 256  # past turns in the prompt: the last two or three (0: all that fit)
    no_stage_directions: bool = True  # embedded: ban "(", "*", "[" (see LlamaBackend)
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    timeout_s: float = 30.0
    retries: int = 2


class LlmBackend(Protocol):
    @property
    def context_tokens(self) -> int: ...

    def count_tokens(self, messages: list[Message]) -> int: ...

    def stream(
        self,
        messages: list[Message],
        cancel: threading.Event | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]: ...

    def fill_call(self, messages: list[Message], request: CallRequest) -> str | None:
        """A tool call: see FillsCalls (the part of a backend the tools need)."""
        ...


@dataclass(frozen=True)
class CallRequest:
    """One tool call for a model to write, in both forms a backend may need: the
    embedded one holds its sampler to ``grammar`` (GBNF, voice.tools.grammar), an
    HTTP server is sent ``tools`` (OpenAI entries) with ``tool_choice``. The tools
    are the same, already shortlisted (voice.tools.choose)."""

    grammar: str
    tools: list[dict[str, Any]]
    tool_choice: str | dict[str, Any] = "required"
    max_tokens: int = 48


class FillsCalls(Protocol):
    """A backend that can write a tool call (both backends are one).

    ``fill_call`` returns the call as ``{"name": ..., "arguments": ...}`` JSON text
    (voice.tools.grammar.parse_call checks it against the tools), or None when the
    model answered in words instead (an HTTP server may: the reply is then made as
    if no tool matched)."""

    def fill_call(self, messages: list[Message], request: CallRequest) -> str | None: ...


class TokenSteps(Protocol):
    """A generation advanced by its caller, one step (about a token) at a time."""

    def step(self) -> str | None: ...

    def close(self) -> None: ...


class _IteratorSteps:
    """Steps over any backend's stream (for the HTTP backend the compute is remote)."""

    def __init__(self, backend: LlmBackend, messages: list[Message], max_tokens: int | None):
        self._cancel = threading.Event()
        self._stream = backend.stream(messages, self._cancel, max_tokens)

    def step(self) -> str | None:
        return next(self._stream, None)

    def cancel(self) -> None:
        """Stop at the next delta, from any thread (even while a step is blocked)."""
        self._cancel.set()

    def close(self) -> None:
        self._cancel.set()
        close = getattr(self._stream, "close", None)
        if close is not None:
            # ValueError: a step is still blocked in it (abandoned after a timeout);
            # the cancel above ends it when it unblocks.
            with contextlib.suppress(ValueError):
                close()


def open_steps(
    backend: LlmBackend, messages: list[Message], max_tokens: int | None = None
) -> TokenSteps:
    """A step-wise generation: the backend's own (lock-step) one if it has it."""
    opener = getattr(backend, "open_steps", None)
    if opener is not None:
        return cast(TokenSteps, opener(messages, max_tokens))
    return _IteratorSteps(backend, messages, max_tokens)


def end_of_turn_probability(
    backend: LlmBackend, messages: list[Message], user_text: str
) -> float | None:
    """The model's own belief that the user has finished, or None if it cannot say."""
    probe = getattr(backend, "end_of_turn_probability", None)
    return None if probe is None else float(probe(messages, user_text))


def prefill(backend: LlmBackend, messages: list[Message], user_prefix: str = "") -> None:
    """Warm the backend's cache with the conversation so far (and the words the user has
    said so far), if it has a cache (idle time)."""
    warm = getattr(backend, "prefill", None)
    if warm is not None:
        warm(messages, user_prefix)


def make_backend(config: LlmConfig) -> LlmBackend:
    if config.backend == "embedded":
        from voice.think.llama import LlamaBackend

        return LlamaBackend(config)
    if config.backend == "http":
        from voice.think.http import OpenAiHttpBackend

        return OpenAiHttpBackend(config)
    from voice.errors import ConfigError

    raise ConfigError(
        f"unknown llm.backend {config.backend!r}.", "Use 'embedded' (the default) or 'http'."
    )
