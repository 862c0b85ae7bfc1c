"""One OpenTelemetry trace per turn, sent over OTLP/HTTP, when an operator asks for it.

Off unless configured the standard way (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or ``OTEL_TRACES_EXPORTER=otlp``) or with
``voice serve --traces``; ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``
keep it off. When it is off nothing of OpenTelemetry is imported and no exporter
exists: this module's top imports only the standard library and the project.

A trace is a turn (``voice.turn``, from the onset of the user's speech to the end of
the reply) with a child span per phase (:data:`voice.serve.phases.SPAN_NAMES`):
``speech``, ``endpoint`` (the silence waited for), ``recognition`` (the pass that made
the final transcript), ``speculation`` (a reply prepared during a pause, when one was
used), ``llm.first_token``, ``tts.first_audio``, ``playback`` (first sample played to
the reply's end) and ``barge_in`` (speech over the reply to its audio stopping). The
spans are made when the turn is over, from :class:`~voice.serve.phases.TurnTimeline`,
with their own start and end times; the batch processor sends them from its own
thread, off the event loop. The conversation id goes on the turn span only with
``--trace-conversation-id`` (or ``VOICE_TRACE_CONVERSATION_ID=1``): it links a trace to
a transcript and to a person's conversation, which an operator may not want.

Which endpoint, headers, timeouts, service name and resource attributes: the
exporter and the SDK read the standard ``OTEL_*`` variables themselves.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from voice.errors import VoiceError
from voice.serve.phases import TurnTimeline

SCOPE = "voice.serve"
DEFAULT_SERVICE = "voice-serve"


@dataclass(frozen=True)
class TraceConfig:
    """``on``: ``--traces`` was given; ``conversation_id``: the operator allows the
    conversation id on spans."""

    on: bool = False
    conversation_id: bool = False


def wanted(config: TraceConfig, env: Mapping[str, str] | None = None) -> bool:
    """Whether traces are to be sent, from the flag and the standard variables."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    return config.on or bool(endpoint) or exporter == "otlp"


def make_tracer(
    config: TraceConfig, port: int = 0, env: Mapping[str, str] | None = None
) -> TurnTracer | None:
    """A tracer when traces are wanted (else None, having imported nothing); a clear
    error when they are wanted and cannot be sent."""
    env = os.environ if env is None else env
    if not wanted(config, env):
        return None
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    ) or "http/protobuf"
    if protocol.strip() != "http/protobuf":
        raise VoiceError(
            f"voice serve sends traces over OTLP/HTTP (http/protobuf), not {protocol!r}.",
            "Point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (4318) and unset "
            "OTEL_EXPORTER_OTLP_PROTOCOL.",
            code="config",
        )
    allowed = config.conversation_id or env.get("VOICE_TRACE_CONVERSATION_ID", "") == "1"
    return TurnTracer(allowed, port, env)


def check(config: TraceConfig, env: Mapping[str, str] | None = None) -> None:
    """Before the models load: a clear error now if traces are wanted and cannot be
    sent (OpenTelemetry missing, or a protocol other than OTLP/HTTP)."""
    env = os.environ if env is None else env
    if wanted(config, env):
        make_tracer(config, 0, env).shutdown()  # type: ignore[union-attr]


def traces_endpoint(env: Mapping[str, str]) -> str | None:
    """Where the spans go, as the OTLP/HTTP exporter would work it out (None: its default,
    http://localhost:4318/v1/traces)."""
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    return base.rstrip("/") + "/v1/traces" if base else None


class TurnTracer:
    """Turns each finished :class:`TurnTimeline` into a trace and hands it to the
    batch exporter."""

    def __init__(self, conversation_id: bool, port: int, env: Mapping[str, str]) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace import set_span_in_context
        except ImportError as exc:
            raise VoiceError(
                f"traces were asked for, but OpenTelemetry is not installed ({exc.name}).",
                "Install it with: pip install 'voice[otel]' (or unset the OTEL_* variables "
                "and drop --traces).",
                code="config",
            ) from exc
        attributes: dict[str, Any] = {}
        declared = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        if env.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = env["OTEL_SERVICE_NAME"]
        elif "service.name=" not in declared:
            attributes["service.name"] = DEFAULT_SERVICE
        if "service.instance.id=" not in declared:  # which worker: host and port
            attributes["service.instance.id"] = f"{socket.gethostname()}:{port}"
        self.provider = TracerProvider(resource=Resource.create(attributes))
        exporter = OTLPSpanExporter(endpoint=traces_endpoint(env))
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer(SCOPE)
        self._in_context = set_span_in_context
        self.conversation_id = conversation_id

    def record(self, turn: TurnTimeline, conversation_id: str = "") -> None:
        attributes: dict[str, Any] = {
            "voice.turn_id": turn.turn_id,
            "voice.reply_id": turn.reply_id,
            "voice.speculative": turn.speculative,
            "voice.interrupted": turn.interrupted,
        }
        figures = {
            "voice.voice_to_voice_ms": turn.voice_to_voice_ms,
            "voice.barge_in_ms": turn.barge_in_ms,
            "voice.final_after_endpoint_ms": turn.final_after_endpoint_ms,
            "voice.llm_first_token_ms": turn.llm_first_token_ms,
            "voice.tts_first_audio_ms": turn.tts_first_audio_ms,
        }
        attributes.update({k: round(v, 1) for k, v in figures.items() if v is not None})
        if self.conversation_id and conversation_id:
            attributes["voice.conversation_id"] = conversation_id
        root = self.tracer.start_span(
            "voice.turn", start_time=turn.wall_ns(turn.start_ms), attributes=attributes
        )
        context = self._in_context(root)
        for phase in turn.phases:
            span = self.tracer.start_span(
                phase.name, context=context, start_time=turn.wall_ns(phase.start_ms)
            )
            span.end(end_time=turn.wall_ns(phase.end_ms))
        root.end(end_time=turn.wall_ns(turn.end_ms))

    def shutdown(self) -> None:
        """Send what is queued (at most the exporter's timeout), then stop."""
        self.provider.shutdown()
