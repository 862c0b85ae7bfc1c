"""The embedded backend: llama-cpp-python on a local GGUF file.

The chat template comes from the GGUF's own metadata (llama-cpp-python reads
``tokenizer.chat_template``). llama.cpp keeps the KV cache of the last prompt
and reuses its longest common prefix, so a new turn only pre-fills what is new
(system prompt and earlier turns are already there): warm time to first token
is a fraction of cold. Decode and pre-fill thread counts are separate settings.

All model work runs on one worker thread owned by the backend, so streams from
several callers queue instead of colliding.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np

from voice.cpus import thread_budget
from voice.errors import VoiceError
from voice.llamacpp import avoid_amx
from voice.models import resolve_llm_model
from voice.think.backend import CallRequest, LlmConfig, Message, TokenSteps
from voice.think.requantize import converted_model

log = logging.getLogger(__name__)


_model_thread: ThreadPoolExecutor | None = None
_model_thread_lock = threading.Lock()


def model_thread() -> ThreadPoolExecutor:
    """The one thread that runs every llama.cpp context in this process.

    llama.cpp's OpenMP thread team belongs to the thread that calls it, and an
    idle team keeps spinning for a while. Two contexts on two threads (two
    conversations on one server) had two teams fighting over two cores: each
    token took 63-75 ms instead of 19. On one thread they share one team.
    """
    global _model_thread
    with _model_thread_lock:
        if _model_thread is None:
            _model_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm")
        return _model_thread


class LlamaBackend:
    serial = True  # every call runs on the one model thread: a hung call blocks the rest

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
        avoid_amx()  # its kernels crash llama.cpp on some machines (see voice.llamacpp)
        path = converted_model(resolve_llm_model(config.model), config.convert_to)
        try:
            self.llm = Llama(
                model_path=str(path),
                n_ctx=config.context_tokens,
                n_threads=thread_budget(config.threads),  # never more than the CPUs it has
                n_threads_batch=thread_budget(config.threads_batch),
                verbose=False,
            )
        except Exception as exc:  # llama.cpp reports a bad file as ValueError or RuntimeError
            raise VoiceError(
                f"could not load the language model {path}: {exc}",
                "Check that it is a complete GGUF file (see models/README.md).",
                code="model_load_failed",
            ) from exc
        # The one thread that ever runs a model (see stream()); requests queue on it.
        self._worker = model_thread()
        self._formatter: Any = None
        self._eot_token: int | None = None
        self._bias = self._stage_direction_bias() if config.no_stage_directions else None

    def _stage_direction_bias(self) -> dict[int, float]:
        """Ban the tokens that open a stage direction: "(smiles warmly)" and "*laughs*"
        cost ~5-20 tokens of decoding before the first word that can be spoken."""
        banned: set[int] = set()
        for text in ("(", " (", "*", " *", "**", " **", "[", " ["):
            ids = self.llm.tokenize(text.encode(), add_bos=False, special=False)
            if len(ids) == 1:
                banned.add(ids[0])
        return {token: -100.0 for token in banned}

    def _chat_formatter(self) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self._formatter is None:
            llm = self.llm
            self._formatter = Jinja2ChatFormatter(
                template=str(llm.metadata.get("tokenizer.chat_template", "")),
                eos_token=llm.detokenize([llm.token_eos()], special=True).decode(),
                bos_token=llm.detokenize([llm.token_bos()], special=True).decode(),
            )
        return self._formatter

    def _render_until_user(self, messages: list[Message]) -> str:
        """The prompt text of ``messages`` followed by the start of a user turn: exactly
        what the next request's prompt begins with, whatever the user then says."""
        marker = "\x00"
        turns = [m.to_dict() for m in messages] + [{"role": "user", "content": marker}]
        prompt = str(self._chat_formatter()(messages=turns).prompt)
        return prompt[: prompt.index(marker)] if marker in prompt else ""

    def prefill(self, messages: list[Message], user_prefix: str = "") -> int:
        """Pre-fill the KV cache with the conversation so far (and the first words of the
        user turn being spoken, ``user_prefix``), while nobody is waiting.

        Sampled replies are often tokenized differently from how their text
        re-tokenizes, so the next prompt would diverge from the cache inside the
        last reply and pre-fill it again while the user waits. Calling this once
        the reply is done (the user is speaking or typing) moves that work out of
        the next turn's time to first token. Returns the tokens evaluated.
        """
        if not self.llm.metadata.get("tokenizer.chat_template"):
            return 0
        text = self._render_until_user(messages) + user_prefix.strip()
        return int(self._worker.submit(self._evaluate_text, text).result())

    def _evaluate_text(self, text: str) -> int:
        return self._evaluate(self.llm.tokenize(text.encode(), add_bos=True, special=True))

    def _evaluate(self, tokens: list[int]) -> int:
        cached = self.llm.input_ids[: self.llm.n_tokens].tolist()
        # Keep at least one token to evaluate, so the next request has fresh logits.
        common = min(
            int(self.llm.longest_token_prefix(cached, tokens)), len(tokens) - 1
        )  # keep one token for the next request
        self.llm.n_tokens = max(0, common)
        self.llm.eval(tokens[self.llm.n_tokens :])
        return len(tokens) - common

    def open_steps(self, messages: list[Message], max_tokens: int | None = None) -> TokenSteps:
        """A generation its caller advances one step (about one token) at a time.

        Nothing runs ahead between steps, so a scheduler that owns the CPU (the
        conversation's engine lane) decides exactly when the model may compute,
        and a step's wall time is its true cost. The work still runs on the
        backend's worker thread.
        """
        return _LlamaSteps(self, messages, max_tokens or self.config.max_reply_tokens)

    def end_of_turn_probability(self, messages: list[Message], user_text: str) -> float:
        """How likely the model thinks the user's turn ends right after ``user_text``.

        The probability of the chat template's end-of-user-turn token after the
        text, read from the logits of one pre-fill. The same pre-fill is the start
        of the reply's prompt, so a reply that follows costs nothing extra.
        """
        return float(self._worker.submit(self._eot_probability, messages, user_text).result())

    def _eot_probability(self, messages: list[Message], user_text: str) -> float:
        if not self.llm.metadata.get("tokenizer.chat_template"):
            return 0.5
        if self._eot_token is None:
            marker = "\x00"
            turns = [{"role": "user", "content": marker}]
            prompt = str(self._chat_formatter()(messages=turns).prompt)
            after = prompt[prompt.index(marker) + 1 :] if marker in prompt else ""
            ids = self.llm.tokenize(after.encode(), add_bos=False, special=True)
            self._eot_token = ids[0] if ids else self.llm.token_eos()
        self._evaluate_text(self._render_until_user(messages) + user_text.strip())
        raw = self.llm._ctx.get_logits()  # type: ignore[no-untyped-call]
        logits = np.ctypeslib.as_array(raw, shape=(self.llm.n_vocab(),))
        shifted = np.exp(logits - logits.max())
        return float(shifted[self._eot_token] / shifted.sum())

    def constrained(self, messages: list[Message], grammar: str, max_tokens: int) -> str:
        """The model's whole reply to ``messages``, greedy and held to the GBNF
        ``grammar`` (a tool call, voice.tools.grammar): it can write nothing else."""
        return str(self._worker.submit(self._constrained, messages, grammar, max_tokens).result())

    def fill_call(self, messages: list[Message], request: CallRequest) -> str:
        """A tool call (voice.think.backend.FillsCalls): held to the request's grammar,
        so it is always one (never None, whatever ``tool_choice`` says)."""
        return self.constrained(messages, request.grammar, request.max_tokens)

    def _constrained(self, messages: list[Message], grammar: str, max_tokens: int) -> str:
        from llama_cpp import LlamaGrammar  # type: ignore[attr-defined]

        rules = LlamaGrammar.from_string(grammar, verbose=False)
        prompt = str(self._chat_formatter()(messages=[m.to_dict() for m in messages]).prompt)
        out = self.llm.create_completion(
            prompt, max_tokens=max_tokens, temperature=0.0, grammar=rules, stream=False
        )
        return str(cast(dict[str, Any], out)["choices"][0]["text"])

    def reset_cache(self) -> None:
        """Forget the cached prompt, so the next request pre-fills from scratch (benchmarks)."""
        self._worker.submit(self.llm.reset).result()

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
        """Text deltas; setting ``cancel`` stops generation before the next token.

        Generation runs on the backend's own worker thread whatever thread asks:
        llama.cpp's OpenMP thread team belongs to the calling thread, and building
        a new team for every reply cost ~50 ms of time to first token.
        """
        stop = threading.Event()  # ours: the caller's ``cancel`` is not ours to set
        deltas: queue.Queue[str | BaseException | None] = queue.Queue()
        future = self._worker.submit(
            self._generate, messages, cancel or stop, stop, max_tokens, deltas
        )
        try:
            while True:
                item = deltas.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()  # a consumer that stops early stops the generation too
            future.result()

    def _deltas(
        self, messages: list[Message], max_tokens: int | None
    ) -> Generator[str, None, None]:
        """Text deltas of one chat completion, computed lazily by whoever advances it;
        closing it stops llama.cpp's generation loop at once."""
        chunks = cast(
            Iterator[Any],
            self.llm.create_chat_completion(
                [m.to_dict() for m in messages],  # type: ignore[misc]
                stream=True,
                max_tokens=max_tokens or self.config.max_reply_tokens,
                logit_bias=self._bias,
                seed=getattr(messages, "seed", None),  # a Prompt's: per conversation and turn
                **sampling(self.config),
            ),
        )
        try:
            for chunk in chunks:
                delta = chunk["choices"][0]["delta"].get("content")
                if delta:
                    yield str(delta)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def _generate(
        self,
        messages: list[Message],
        cancel: threading.Event,
        stop: threading.Event,
        max_tokens: int | None,
        deltas: queue.Queue[str | BaseException | None],
    ) -> None:
        try:
            generation = self._deltas(messages, max_tokens)
            try:
                for delta in generation:
                    if cancel.is_set() or stop.is_set():
                        break
                    deltas.put(delta)
            finally:
                generation.close()  # stops llama.cpp's generation loop right here
        except Exception as exc:  # reported to the consumer, never lost in the worker
            deltas.put(exc)
        finally:
            deltas.put(None)


def sampling(config: LlmConfig) -> dict[str, Any]:
    """The sampler settings of a request, by llama.cpp's (and OpenAI's) names."""
    return {
        "temperature": config.temperature,
        "top_k": config.top_k,
        "top_p": config.top_p,
        "min_p": config.min_p,
        "repeat_penalty": config.repeat_penalty,
        "presence_penalty": config.presence_penalty,
        "frequency_penalty": config.frequency_penalty,
    }


class _LlamaSteps:
    """One lazily advanced chat completion; every step runs on the backend's worker."""

    def __init__(self, backend: LlamaBackend, messages: list[Message], max_tokens: int) -> None:
        self._backend = backend
        # A generator runs nothing until advanced, so creating it here is free.
        self._deltas: Generator[str, None, None] | None = backend._deltas(messages, max_tokens)

    def step(self) -> str | None:
        """The next text delta, or None when the reply is complete."""
        deltas = self._deltas
        if deltas is None:
            return None
        delta = self._backend._worker.submit(next, deltas, None).result()
        if delta is None:
            self._deltas = None
        return delta

    def close(self) -> None:
        """Stop here: llama.cpp's generation loop ends at once and frees the model."""
        deltas, self._deltas = self._deltas, None
        if deltas is not None:
            self._backend._worker.submit(deltas.close).result()
