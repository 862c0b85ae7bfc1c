"""``voice serve`` from settings: load the models once, then serve the web client.

Here, not in :mod:`voice.serve`, because it reads :class:`Settings`: the server
itself takes an engine hub and its own :class:`ServeConfig`, so the embedding API
(:meth:`voice.assistant.Assistant.serve`) runs the same server on its own hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from voice.app.build import load_engines, load_grounding, make_hub, tool_chooser
from voice.config import Settings
from voice.errors import VoiceError
from voice.serve.access import exposure_warning
from voice.serve.server import ServeConfig, serve_until_signalled
from voice.serve.store import Conversations, RedisStore, StoreUnavailable, make_store
from voice.serve.tracing import check as check_tracing


def run_server(settings: Settings, config: ServeConfig) -> int:
    """Load the models once, then serve (blocking) until Ctrl-C, or until drained after
    SIGTERM (a second SIGTERM stops at once)."""
    config.ssl_context()  # a bad certificate fails now, not after loading the models
    store = make_store(config.store, config.store_ttl_s)  # a bad --store, too
    check_tracing(config.traces)  # traces asked for and OpenTelemetry missing, too
    if isinstance(store, RedisStore):
        try:
            store.ping()
        except StoreUnavailable as exc:  # it may come back: serve from memory meanwhile
            print(f"voice serve: warning: {exc}", file=sys.stderr, flush=True)
    warning = exposure_warning(config.host, config.access.token, bool(config.certfile))
    if warning:
        print(warning, file=sys.stderr, flush=True)
    started = time.perf_counter()
    engines = load_engines(settings)
    load_grounding(settings.knowledge)  # the knowledge's errors at start, not at a connection
    hub = make_hub(settings, engines, config.max_sessions)
    hub.preload_contexts(config.max_sessions)
    if config.tool_chooser is None:  # pages may declare tools (web/PROTOCOL.md)
        config.tool_chooser = tool_chooser(settings)
    shown = "127.0.0.1" if config.host in ("0.0.0.0", "") else config.host
    scheme = "https" if config.certfile else "http"
    query = "?token=TOKEN" if config.access.token else ""
    print(
        f"voice serve: models loaded in {time.perf_counter() - started:.1f} s; "
        f"open {scheme}://{shown}:{config.port}/{query} (Ctrl-C stops; SIGTERM drains)",
        flush=True,
    )
    with hub, contextlib.suppress(KeyboardInterrupt):
        try:
            asyncio.run(serve_until_signalled(hub, config, Conversations(store)))
        except OSError as exc:  # the port is taken, or the address is not ours
            raise VoiceError(
                f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}.",
                "Pick another port with --port, or stop the program that holds it.",
                code="address_in_use",
            ) from exc
    return 0
