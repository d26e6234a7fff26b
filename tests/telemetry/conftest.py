"""The in-memory OpenTelemetry fixture for the telemetry tests."""

from otel_memory import otel

__all__ = ["otel"]
