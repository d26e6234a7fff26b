"""An SDK tracer provider with the in-memory exporter and a meter provider with the in-memory
reader, handed to each ``GenAITelemetry`` explicitly (no global provider is touched)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plait.telemetry import GenAITelemetry


@dataclass
class Otel:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def telemetry(self, **options: object) -> GenAITelemetry:
        return GenAITelemetry(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            **options,  # type: ignore[arg-type]
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        found = self.named(prefix)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(tracer_provider, meter_provider, exporter, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()
