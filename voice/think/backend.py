"""The one small interface every language model backend implements.

A backend streams text deltas for a list of chat messages and stops within
one token when its ``cancel`` event is set: a cancelled reply must free the
CPU (embedded) or the server (HTTP) at once, never keep generating for nobody.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

DEFAULT_SYSTEM_PROMPT = (
    "You are a friendly voice assistant. Your replies are spoken aloud, so answer in one "
    "or two short, plain sentences. Never use lists, markdown, emoji or links."
)


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


def prefill(backend: LlmBackend, messages: list[Message]) -> None:
    """Warm the backend's cache with the conversation so far, if it has one (idle time)."""
    warm = getattr(backend, "prefill", None)
    if warm is not None:
        warm(messages)


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
