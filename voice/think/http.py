"""An OpenAI-compatible streaming client (llama.cpp's server, vLLM, Ollama, ...).

How a deployment outgrows one machine: the model runs elsewhere, the session
stays the same. Only the standard library is used. Cancellation closes the
connection; servers that watch for disconnects (llama.cpp's, vLLM) then stop
generating, so no "zombie" reply burns the server's CPU for nobody.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from voice.errors import VoiceError
from voice.think.backend import CallRequest, LlmConfig, Message
from voice.think.tool_stream import MalformedStreamError, ToolCallStream

log = logging.getLogger(__name__)


class LlmUnavailableError(VoiceError):
    code = "llm_unavailable"


class OpenAiHttpBackend:
    def __init__(self, config: LlmConfig) -> None:
        self.config = config
        parts = urlsplit(config.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise VoiceError(
                f"llm.url {config.url!r} is not an http(s) URL.",
                "Use e.g. http://127.0.0.1:8080/v1 (llama.cpp server) or http://localhost:11434/v1 "
                "(Ollama).",
                code="config",
            )
        try:
            port = parts.port
        except ValueError:  # "http://host:99999/v1", "http://host:abc/v1"
            raise VoiceError(
                f"llm.url {config.url!r} has no valid port (1-65535).",
                "Use e.g. http://127.0.0.1:8080/v1 (llama.cpp server).",
                code="config",
            ) from None
        if not config.timeout_s > 0:
            raise VoiceError(
                f"llm.timeout_s must be more than 0 s, not {config.timeout_s}.",
                "It bounds each request to the LLM server; the default is 30.",
                code="config",
            )
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = port or (443 if self._https else 80)
        self._path = parts.path.rstrip("/") + "/chat/completions"
        # "ok" once the server accepts a request; "retrying" between attempts;
        # "unreachable" after the last failed attempt, or a stream cut mid-reply
        # (shown in voice serve's /healthz).
        self.state = "unknown"

    @property
    def context_tokens(self) -> int:
        return self.config.context_tokens

    def count_tokens(self, messages: list[Message]) -> int:
        """No tokenizer on this side: about four characters a token, rounded up."""
        return sum(len(m.content) // 4 + 5 for m in messages) + 3

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self.config.timeout_s)

    def _open(self, body: bytes) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """POST with retries and exponential backoff; only failures before any token retry."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        delay, last_error = 0.25, ""
        for attempt in range(self.config.retries + 1):
            conn = self._connect()
            try:
                conn.request("POST", self._path, body=body, headers=headers)
                response = conn.getresponse()
                if response.status == 200:
                    self.state = "ok"
                    return conn, response
                detail = response.read(500).decode(errors="replace")
                conn.close()
                if response.status < 500:
                    raise VoiceError(
                        f"the LLM server refused the request ({response.status}): {detail}",
                        "Check llm.model and llm.api_key.",
                        code="llm_rejected",
                    )
                last_error = (
                    f"HTTP {response.status}: {detail[:200]}"
                    if detail
                    else f"HTTP {response.status}"
                )
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                last_error = f"{type(exc).__name__}: {exc}"
            if attempt < self.config.retries:
                self.state = "retrying"
                log.warning("LLM server attempt %d failed (%s); retrying", attempt + 1, last_error)
                time.sleep(delay)
                delay *= 2
        self.state = "unreachable"
        raise LlmUnavailableError(
            f"the LLM server at {self.config.url} is unreachable ({last_error}).",
            "Start it (e.g. `python -m llama_cpp.server --model MODEL.gguf --port 8080`) or use "
            "llm.backend = 'embedded'.",
        )

    def stream(
        self,
        messages: list[Message],
        cancel: threading.Event | None = None,
        max_tokens: int | None = None,
    ) -> Iterator[str]:
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": [m.to_dict() for m in messages],
            "stream": True,
            "max_tokens": max_tokens or self.config.max_reply_tokens,
            "temperature": self.config.temperature,
        }
        seed = getattr(messages, "seed", None)  # a Prompt's: per conversation and turn
        if seed is not None:
            request["seed"] = seed
        # Only what differs from the usual defaults: a strict server (OpenAI's) rejects
        # the llama.cpp extensions, and sending nothing keeps it working there.
        config = self.config
        for name, value, usual in (
            ("presence_penalty", config.presence_penalty, 0.0),
            ("frequency_penalty", config.frequency_penalty, 0.0),
            ("repeat_penalty", config.repeat_penalty, 1.0),
            ("min_p", config.min_p, 0.05),
        ):
            if value != usual:
                request[name] = value
        body = json.dumps(request).encode()
        conn, response = self._open(body)
        try:
            for payload in self._payloads(response, cancel):
                try:
                    choice = json.loads(payload)["choices"][0]
                    delta = choice["delta"].get("content")
                except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                    log.warning("ignoring a malformed stream event: %.80s", payload)
                    continue
                if delta:
                    yield delta
                if choice.get("finish_reason"):
                    break  # complete, even from a server that sends no [DONE] after it
            self.state = "ok"
        finally:
            conn.close()  # on cancel this is what tells the server to stop

    def _payloads(
        self, response: http.client.HTTPResponse, cancel: threading.Event | None = None
    ) -> Iterator[str]:
        """The ``data:`` payloads of a server-sent event stream, up to ``[DONE]`` (or
        ``cancel``); a stream cut before either is an LlmUnavailableError."""
        while not (cancel is not None and cancel.is_set()):
            try:
                line = response.readline()
            except (OSError, http.client.HTTPException) as exc:  # a timeout is an OSError
                line, cut = b"", f"{type(exc).__name__}: {exc}"
            else:
                cut = "the connection closed"
            if not line:  # a stream ends with [DONE]; this one was cut short
                if cancel is not None and cancel.is_set():
                    return  # by us
                self.state = "unreachable"
                raise LlmUnavailableError(
                    f"the LLM server at {self.config.url} stopped mid-reply ({cut}).",
                    "Check the server's log; the next turn retries.",
                )
            text = line.decode(errors="replace").strip()
            if not text.startswith("data:"):
                continue
            payload = text[5:].strip()
            if payload == "[DONE]":
                return
            yield payload

    def fill_call(self, messages: list[Message], request: CallRequest) -> str | None:
        """A tool call (voice.think.backend.FillsCalls) through the server's OpenAI
        ``tools``: streamed, its ``tool_calls`` deltas put together (ToolCallStream).

        Returns the first call as ``{"name", "arguments"}`` JSON text, unchecked (the
        caller checks it against its tools), or None when the server answered in
        words: servers that ignore ``tool_choice`` do. Greedy, as the embedded call
        is. Errors: LlmUnavailableError (unreachable, cut, timed out),
        MalformedStreamError (a chunk not of the format), VoiceError (the server
        refused the request or failed mid-stream, or the call was cut at
        ``max_tokens``)."""
        body = json.dumps(
            {
                "model": self.config.model,
                "messages": [m.to_dict() for m in messages],
                "stream": True,
                "max_tokens": request.max_tokens,
                "temperature": 0.0,
                "tools": request.tools,
                "tool_choice": request.tool_choice,
                "parallel_tool_calls": False,
            }
        ).encode()
        conn, response = self._open(body)
        calls = ToolCallStream()
        try:
            for payload in self._payloads(response):
                try:
                    chunk = json.loads(payload)
                except ValueError:
                    raise MalformedStreamError(
                        f"the LLM server sent a stream chunk that is not JSON: {payload[:120]}",
                        "Check that llm.url is an OpenAI-compatible server.",
                    ) from None
                calls.add(chunk)
                if calls.finish_reason:
                    break  # complete, even from a server that sends no [DONE] after it
            self.state = "ok"
        finally:
            conn.close()
        call = calls.call()
        if call is None:
            log.info("the LLM server answered in words, not a tool call: %.80s", calls.text)
            return None
        if calls.finish_reason == "length":
            raise VoiceError(
                f"the server's call to {call.name}() was cut at {request.max_tokens} tokens.",
                "Raise [tools] max_call_tokens.",
                code="tool_call_cut",
            )
        return call.as_text()
