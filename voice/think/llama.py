"""The embedded backend: llama-cpp-python on a local GGUF file.

The chat template comes from the GGUF's own metadata (llama-cpp-python reads
``tokenizer.chat_template``). llama.cpp keeps the KV cache of the last prompt
and reuses its longest common prefix, so a new turn only pre-fills what is new
(system prompt and earlier turns are already there): warm time to first token
is a fraction of cold. Decode and pre-fill thread counts are separate settings.

Not thread-safe: one worker owns the model, and one stream runs at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any, cast

from voice.errors import VoiceError
from voice.models import resolve_llm_model
from voice.think.backend import LlmConfig, Message

log = logging.getLogger(__name__)


class LlamaBackend:
    def __init__(self, config: LlmConfig) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise VoiceError(
                "the embedded language model needs llama-cpp-python.",
                "Install it with `pip install llama-cpp-python` (it compiles llama.cpp, ~10 min), "
                "or use llm.backend = 'http' with a running server.",
                code="missing_dependency",
            ) from exc
        self.config = config
        path = resolve_llm_model(config.model)
        try:
            self.llm = Llama(
                model_path=str(path),
                n_ctx=config.context_tokens,
                n_threads=config.threads,
                n_threads_batch=config.threads_batch,
                verbose=False,
            )
        except Exception as exc:  # llama.cpp reports a bad file as ValueError or RuntimeError
            raise VoiceError(
                f"could not load the language model {path}: {exc}",
                "Check that it is a complete GGUF file (see models/README.md).",
                code="model_load_failed",
            ) from exc
        self._lock = threading.Lock()

    def reset_cache(self) -> None:
        """Forget the cached prompt, so the next request pre-fills from scratch (benchmarks)."""
        with self._lock:
            self.llm.reset()  # type: ignore[no-untyped-call]

    @property
    def context_tokens(self) -> int:
        return int(self.llm.n_ctx())

    def count_tokens(self, messages: list[Message]) -> int:
        """Tokens of the messages plus a few per message for the template's markers."""
        total = 0
        for message in messages:
            total += len(self.llm.tokenize(message.content.encode(), add_bos=False, special=False))
            total += 5
        return total + 3

    def stream(
        self,
        messages: list[Message],
        cancel: threading.Event | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]:
        """Text deltas; setting ``cancel`` stops generation before the next token."""
        with self._lock:
            chunks = cast(
                Iterator[Any],
                self.llm.create_chat_completion(
                    [m.to_dict() for m in messages],  # type: ignore[misc]
                    stream=True,
                    max_tokens=max_tokens or self.config.max_reply_tokens,
                    temperature=self.config.temperature,
                ),
            )
            try:
                for chunk in chunks:
                    if cancel is not None and cancel.is_set():
                        break
                    delta = chunk["choices"][0]["delta"].get("content")
                    if delta:
                        yield delta
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()  # stops llama.cpp's generation loop right here
