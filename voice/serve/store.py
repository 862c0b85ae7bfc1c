"""Conversations that outlive a connection, and a worker: their state in a store.

A conversation has an id (``ready`` gives it; a client sends it back in ``hello``
when it reconnects). What matters to the user is kept under that id after every
reply: the history as heard, the persona (the system prompt it started with) and
the settings the user chose (push-to-talk). A client that reconnects, to this
worker or another one behind the same load balancer, goes on where it was.

- :class:`MemoryStore`: this process only (the default; a reconnect to the same
  worker resumes, a worker that dies loses its conversations).
- :class:`RedisStore`: shared by every worker (``--store redis://HOST:PORT/0``).

Both forget a conversation ``ttl_s`` after its last save. The server uses them
through :class:`Conversations`, off the event loop and with a short timeout, and
always keeps a copy in memory: a store that is slow or gone costs neither a reply
nor the conversation (it goes on from memory, and the client is told, once, that
it would not survive this worker).

The id is a bearer secret (it gives the history): 128 random bits, never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from voice.errors import VoiceError

STORE_TTL_S = 3600.0  # a conversation left alone for an hour is over
STORE_TIMEOUT_S = 1.0  # one store operation, end to end; the socket's own is shorter
MEMORY_MAX_CONVERSATIONS = 10_000  # a memory store forgets the oldest beyond this
STATE_VERSION = 1
KEY_PREFIX = "voice:conversation:"
_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")


class StoreUnavailable(VoiceError):
    code = "store_unavailable"


def new_conversation_id() -> str:
    return secrets.token_urlsafe(16)


def valid_conversation_id(value: str) -> bool:
    """An id this server could have made (anything else is not looked up)."""
    return bool(_ID.fullmatch(value))


@dataclass
class ConversationState:
    """What a conversation needs to go on elsewhere, as plain JSON-able data."""

    history: dict[str, Any]  # History.snapshot(): turns as heard, persona, seed
    settings: dict[str, Any] = field(default_factory=dict)  # chosen by the user
    saved_at: float = 0.0  # wall clock: of two copies, the later one wins

    def to_json(self) -> str:
        return json.dumps(
            {"version": STATE_VERSION, "history": self.history, "settings": self.settings,
             "saved_at": self.saved_at}
        )  # fmt: skip

    @classmethod
    def from_json(cls, raw: str | bytes) -> ConversationState:
        """Parse a stored state, or raise :class:`ValueError` (a corrupt or foreign value)."""
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError("not a conversation state of this version")
        history, settings = data.get("history"), data.get("settings", {})
        saved_at = data.get("saved_at", 0.0)
        if not isinstance(history, dict) or not isinstance(settings, dict):
            raise ValueError("history and settings must be objects")
        if isinstance(saved_at, bool) or not isinstance(saved_at, int | float):
            raise ValueError("saved_at must be a number")
        return cls(history, settings, float(saved_at))


class ConversationStore(Protocol):
    """Blocking calls (the server runs them on its store threads)."""

    ttl_s: float

    def load(self, conversation_id: str) -> ConversationState | None:
        """The state saved under the id, or None (never saved, or expired)."""
        ...

    def save(self, conversation_id: str, state: ConversationState) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    """In this process: expires ``ttl_s`` after the last save, keeps at most ``limit``."""

    def __init__(
        self, ttl_s: float = STORE_TTL_S, limit: int = MEMORY_MAX_CONVERSATIONS, clock: Any = None
    ) -> None:
        self.ttl_s = ttl_s
        self.limit = limit
        self._clock = clock or time.monotonic
        self._items: OrderedDict[str, tuple[float, ConversationState]] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, conversation_id: str) -> ConversationState | None:
        with self._lock:
            self._expire()
            item = self._items.get(conversation_id)
            return None if item is None else item[1]

    def save(self, conversation_id: str, state: ConversationState) -> None:
        with self._lock:
            self._items.pop(conversation_id, None)
            self._items[conversation_id] = (self._clock() + self.ttl_s, state)
            self._expire()
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def _expire(self) -> None:
        now = self._clock()
        while self._items:  # ordered by last save, so by expiry
            key, (expires, _) = next(iter(self._items.items()))
            if expires > now:
                break
            del self._items[key]

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._items)

    def close(self) -> None:
        pass


class RedisStore:
    """Shared by every worker: one key per conversation, expiring ``ttl_s`` after its
    last save (Redis does the expiry). Every failure is a :class:`StoreUnavailable`."""

    def __init__(
        self, url: str, ttl_s: float = STORE_TTL_S, timeout_s: float = STORE_TIMEOUT_S / 2
    ) -> None:
        try:
            import redis
        except ImportError as exc:  # pragma: no cover - a dependency
            raise VoiceError(
                "--store redis:// needs the redis package.", "pip install redis", code="config"
            ) from exc
        self.ttl_s = ttl_s
        self.url = url
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                health_check_interval=30,
            )
        except ValueError as exc:
            raise VoiceError(
                f"cannot use the store {_safe_url(url)!r}: {exc}.",
                "Give --store memory, or redis://HOST:PORT/DB (rediss:// for TLS).",
                code="config",
            ) from exc

    def _key(self, conversation_id: str) -> str:
        return KEY_PREFIX + conversation_id

    def load(self, conversation_id: str) -> ConversationState | None:
        raw = self._call(lambda: self._redis.get(self._key(conversation_id)))
        if raw is None:
            return None
        try:
            return ConversationState.from_json(raw)
        except (ValueError, UnicodeDecodeError):
            return None  # not ours, or corrupt: a new conversation

    def save(self, conversation_id: str, state: ConversationState) -> None:
        ttl_ms = max(1, int(self.ttl_s * 1000))
        self._call(lambda: self._redis.set(self._key(conversation_id), state.to_json(), px=ttl_ms))

    def ping(self) -> None:
        self._call(self._redis.ping)

    def _call(self, operation: Any) -> Any:
        import redis

        try:
            return operation()
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(
                f"the conversation store ({_safe_url(self.url)}) is unavailable: {exc}.",
                "Conversations go on in this server's memory meanwhile.",
            ) from exc

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._redis.close()


def _safe_url(url: str) -> str:
    """The URL without a password (it may carry one: redis://:secret@host)."""
    return re.sub(r"//[^@/]*@", "//***@", url)


def make_store(url: str, ttl_s: float = STORE_TTL_S) -> ConversationStore:
    """``memory`` (or empty), or ``redis://...`` / ``rediss://...`` / ``unix://...``."""
    if not ttl_s > 0:
        raise VoiceError(
            f"the store's TTL must be a positive number of seconds, not {ttl_s}.",
            "Pass e.g. --store-ttl-s 3600.",
            code="config",
        )
    if url in ("", "memory"):
        return MemoryStore(ttl_s)
    if url.split("://", 1)[0] in ("redis", "rediss", "unix"):
        return RedisStore(url, ttl_s)
    raise VoiceError(
        f"unknown conversation store {_safe_url(url)!r}.",
        "Give --store memory (the default), or redis://HOST:PORT/DB for several workers.",
        code="config",
    )


class Conversations:
    """The server's use of a store: off the event loop (its own threads, so a stalled
    store never holds up the threads that open sessions), bounded in time, and backed
    by a copy in this process's memory that every save also writes."""

    def __init__(self, store: ConversationStore, timeout_s: float = STORE_TIMEOUT_S) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.shared = not isinstance(store, MemoryStore)
        self.memory = MemoryStore(store.ttl_s) if self.shared else store
        self._threads = ThreadPoolExecutor(4, thread_name_prefix="conversation-store")

    @property
    def ttl_s(self) -> float:
        return self.store.ttl_s

    async def _run(self, call: Any) -> Any:
        if not self.shared:
            return call()  # a dict in this process: no thread hop, nothing to wait out
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(self._threads, call)
        except RuntimeError as exc:  # closed: the server is stopping
            raise StoreUnavailable("the conversation store is closed.") from exc
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            raise StoreUnavailable(
                f"the conversation store did not answer within {self.timeout_s:g} s.",
                "Conversations go on in this server's memory meanwhile.",
            ) from None

    async def load(
        self, conversation_id: str
    ) -> tuple[ConversationState | None, StoreUnavailable | None]:
        """The latest saved state (the shared store's or this process's copy), and the
        store's failure if it had one (then only the local copy was looked at)."""
        local = self.memory.load(conversation_id)
        if not self.shared:
            return local, None
        try:
            shared = await self._run(lambda: self.store.load(conversation_id))
        except StoreUnavailable as exc:
            return local, exc
        if local is None or (shared is not None and shared.saved_at >= local.saved_at):
            return shared, None
        return local, None

    async def save(self, conversation_id: str, state: ConversationState) -> StoreUnavailable | None:
        """Save (the local copy at once); the shared store's failure is returned."""
        self.memory.save(conversation_id, state)
        if not self.shared:
            return None
        try:
            await self._run(lambda: self.store.save(conversation_id, state))
        except StoreUnavailable as exc:
            return exc
        return None

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        self.store.close()
