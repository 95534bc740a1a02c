"""Telemetry: Prometheus metrics, optional OpenTelemetry traces and structured logs.

The bottom layer of the package: it imports nothing of the rest of ``generic_framework`` but
the redaction helper, so the wire, store and core layers can report to it.

A :class:`Telemetry` belongs to one :class:`~generic_framework.runtime.Runtime`
(docs/design/0310): its metrics registry is the runtime's own, and its tracing is ``None``
unless OpenTelemetry is installed and configured.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from generic_framework.telemetry.metrics import Metrics
from generic_framework.telemetry.tracing import Tracing, active_provider

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

__all__ = ["Metrics", "Telemetry", "Tracing"]


@dataclass(frozen=True, slots=True)
class Telemetry:
    """What a runtime records to.

    Attributes:
        metrics: the Prometheus metrics (always on; their registry is this runtime's).
        tracing: the span maker, or ``None`` when tracing is off.
    """

    metrics: Metrics
    tracing: Tracing | None = None

    @classmethod
    def create(
        cls,
        *,
        capture_content: bool = False,
        tracer_provider: TracerProvider | None = None,
        process_metrics: bool = True,
    ) -> Telemetry:
        """New metrics, and tracing when a provider is given or one was installed globally.

        Args:
            capture_content: record prompts and completions on spans
                (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
            tracer_provider: an OpenTelemetry provider to use instead of the global one (tests
                pass one with an in-memory exporter).
            process_metrics: also export the process, platform and GC metrics.
        """
        provider = active_provider(tracer_provider)
        tracing = Tracing(provider, capture_content=capture_content) if provider else None
        return cls(Metrics(process=process_metrics), tracing)

    async def flush(self) -> None:
        """Export buffered spans now (off the event loop; a no-op without tracing)."""
        if self.tracing is not None:
            await asyncio.to_thread(self.tracing.flush)
