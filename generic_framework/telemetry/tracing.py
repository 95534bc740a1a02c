"""OpenTelemetry traces after the GenAI semantic conventions; optional, and off by default.

Tracing needs the ``otel`` extra (``pip install 'generic-framework[otel]'``) and a configured
tracer provider. Without either, :func:`active_tracer` gives ``None`` and the library creates no
span at all (one ``is None`` test per turn, model call and tool call).

- **Configuring**: the entry points (``generic-framework serve``) call :func:`setup_tracing`,
  which installs an SDK provider only when the standard ``OTEL_*`` variables ask for traces
  (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
  ``OTEL_TRACES_EXPORTER``; ``OTEL_SDK_DISABLED=true`` wins). A provider installed before (by
  ``opentelemetry-instrument``, or by an application embedding the library) is used as it is.
- **Spans** (:class:`Tracing`): ``invoke_agent {persona}`` per turn, ``chat {model}`` per model
  call and ``execute_tool {tool}`` per tool call, children of their turn, with the ``gen_ai.*``
  attributes (operation, system, request and response model, response id, finish reasons, usage
  tokens, tool name and call id) and the Z.AI request id as ``zai.request_id``.
- **Content**: prompts, completions, tool arguments and results are recorded only when
  ``capture_content`` is on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, the
  variable OpenTelemetry's GenAI instrumentations use). Conversation ids are recorded hashed.
- **Parents are explicit**: a turn's spans get the turn's span as parent, never through the
  ambient context, because a streamed turn is an async generator that may be resumed from
  another task (the service reads its first event in the endpoint, the rest in the response).
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from generic_framework import __version__
from generic_framework.redaction import redact

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "SYSTEM",
    "Tracing",
    "active_provider",
    "setup_tracing",
    "tracing_requested",
]

logger = logging.getLogger("generic_framework.telemetry")

SYSTEM = "z.ai"
"""``gen_ai.system`` and ``gen_ai.provider.name`` (Z.AI has no well-known value yet)."""

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` to record prompts and completions on spans."""

_TRACER_NAME = "generic_framework"
_CONTENT_LIMIT = 16_000  # characters of captured content per attribute


def _api() -> Any:
    """The ``opentelemetry.trace`` module, or ``None`` without the ``otel`` extra."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


def active_provider(provider: TracerProvider | None = None) -> TracerProvider | None:
    """The provider to record with: ``provider``, else the installed global provider.

    ``None`` (tracing off) when the ``otel`` extra is missing, or no provider is given and none
    was installed (OpenTelemetry's default proxy records nothing anyway). Whoever installed a
    global provider imported OpenTelemetry first, so without one it is not even imported (it
    takes tens of milliseconds).
    """
    if provider is None and "opentelemetry.trace" not in sys.modules:
        return None
    trace = _api()
    if trace is None:
        return None
    if provider is None:
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None
    return provider


def tracing_requested(environ: Mapping[str, str]) -> bool:
    """True when the standard ``OTEL_*`` variables ask for traces to be exported."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = environ.get("OTEL_TRACES_EXPORTER")
    if exporter is not None and exporter.strip():
        return exporter.strip().lower() != "none"
    return any(
        environ.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def setup_tracing(environ: Mapping[str, str]) -> bool:
    """Install an SDK tracer provider if the ``OTEL_*`` variables ask for one (entry points).

    Exporters follow ``OTEL_TRACES_EXPORTER`` (``otlp`` when unset, ``console``), OTLP over
    HTTP unless ``OTEL_EXPORTER_OTLP_PROTOCOL`` says ``grpc``; endpoint, headers, sampler,
    batching and resource come from their standard variables, read by the SDK itself.
    ``service.name`` defaults to ``generic-framework``.

    Returns:
        True when spans will be exported (a provider was installed now or before).
    """
    if not tracing_requested(environ):
        return False
    trace = _api()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_* variables ask for traces, but the otel extra is not installed: "
            "pip install 'generic-framework[otel]'; tracing is off"
        )
        return False
    if isinstance(trace.get_tracer_provider(), SDKTracerProvider):
        return True
    named = "OTEL_SERVICE_NAME" in environ or "service.name" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    provider = SDKTracerProvider(
        resource=Resource.create({} if named else {"service.name": "generic-framework"})
    )
    exporters = [_exporter(name.strip().lower(), environ) for name in _exporter_names(environ)]
    for exporter in exporters:
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


def _exporter_names(environ: Mapping[str, str]) -> list[str]:
    names = [n for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    return names or ["otlp"]


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        logger.warning("OTEL_TRACES_EXPORTER=%s is not supported here (otlp, console)", name)
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
    )
    if protocol.strip().lower() == "grpc":
        try:  # not part of the otel extra: imported by name, for those who installed it
            grpc = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        except ImportError:
            logger.warning("OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc")
            return None
        return grpc.OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


class Tracing:
    """Makes the spans of turns, model calls and tool calls (see the module's docstring).

    Args:
        provider: where spans go (:func:`active_provider`).
        capture_content: record prompts, completions, tool arguments and results.
    """

    def __init__(self, provider: TracerProvider, *, capture_content: bool = False) -> None:
        trace = _api()
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer(_TRACER_NAME, __version__)
        self.capture_content = capture_content
        self._kind_client = trace.SpanKind.CLIENT
        self._kind_internal = trace.SpanKind.INTERNAL
        self._in: Callable[[Span], Any] = trace.set_span_in_context

    def turn(
        self, persona: str, model: str, conversation: str | None, turn_id: str, *, stream: bool
    ) -> Span:
        """Start the span of a turn (ambient context as parent: an HTTP server span, say)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.system": SYSTEM,
            "gen_ai.provider.name": SYSTEM,
            "gen_ai.agent.name": persona,
            "gen_ai.request.model": model,
            "gen_ai.request.stream": stream,
            "generic_framework.turn.id": turn_id,
        }
        if conversation is not None:
            attributes["gen_ai.conversation.id"] = conversation
        return self.tracer.start_span(
            f"invoke_agent {persona}", kind=self._kind_internal, attributes=attributes
        )

    def model_call(
        self, parent: Span, model: str, *, stream: bool, tools: int, messages: Sequence[Any]
    ) -> Span:
        """Start the span of one model call; ``messages`` are recorded only when capturing."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": SYSTEM,
            "gen_ai.provider.name": SYSTEM,
            "gen_ai.request.model": model,
            "gen_ai.request.stream": stream,
            "generic_framework.tools_offered": tools,
        }
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _content(messages)
        return self.tracer.start_span(
            f"chat {model}", context=self._in(parent), kind=self._kind_client, attributes=attributes
        )

    def model_done(self, span: Span, attributes: Mapping[str, Any], output: Any = None) -> None:
        """End a model call's span with the response's attributes (and its message)."""
        span.set_attributes(dict(attributes))
        if self.capture_content and output is not None:
            span.set_attribute("gen_ai.output.messages", _content([output]))
        span.end()

    def tool_call(
        self,
        parent: Span,
        attributes: Mapping[str, Any],
        *,
        seconds: float,
        error: str | None,
        arguments: str = "",
        result: str = "",
        start_ns: int | None = None,
    ) -> None:
        """Record a finished tool call as a span that lasted ``seconds``: from ``start_ns``
        (``time.time_ns()``) when given, else ending now."""
        length = int(seconds * 1e9)
        start = time.time_ns() - length if start_ns is None else start_ns
        end = start + length
        span = self.tracer.start_span(
            f"execute_tool {attributes['gen_ai.tool.name']}",
            context=self._in(parent),
            kind=self._kind_internal,
            attributes={"gen_ai.operation.name": "execute_tool", **attributes},
            start_time=start,
        )
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", redact(arguments, _CONTENT_LIMIT))
            span.set_attribute("gen_ai.tool.call.result", redact(result, _CONTENT_LIMIT))
        if error is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(self._status(error))
        span.end(end_time=end)

    def failed(self, span: Span, exc: BaseException) -> None:
        """End ``span`` as failed with ``exc`` (its type as ``error.type``, text redacted)."""
        span.set_attribute("error.type", type(exc).__name__)
        request_id = getattr(exc, "request_id", None)
        if request_id:
            span.set_attribute("zai.request_id", request_id)
        span.set_status(self._status(f"{type(exc).__name__}: {exc}"))
        span.end()

    def turn_done(self, span: Span, attributes: Mapping[str, Any]) -> None:
        """End a turn's span with its outcome attributes."""
        span.set_attributes(dict(attributes))
        span.end()

    def flush(self, timeout_ms: int = 5000) -> None:
        """Export the spans still buffered (a batch processor sends them every few seconds).

        Called when the runtime closes: uvicorn ends the process by re-raising SIGTERM, which
        skips the SDK's own flush at exit.
        """
        force_flush = getattr(self.provider, "force_flush", None)
        if force_flush is not None:
            force_flush(timeout_ms)

    def _status(self, description: str) -> Any:
        trace = _api()
        return trace.Status(trace.StatusCode.ERROR, redact(description, 300))


def _content(messages: Sequence[Any]) -> str:
    """Messages (pydantic models or dicts) as one redacted JSON attribute."""
    dumped = [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in messages]
    return redact(json.dumps(dumped, ensure_ascii=False, default=str), _CONTENT_LIMIT)
