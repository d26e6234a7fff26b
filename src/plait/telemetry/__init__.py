"""OpenTelemetry GenAI spans and metrics (a battery; needs the ``plait[otel]`` extra).

:class:`GenAITelemetry` is orchestrator middleware: ``invoke_agent``, ``chat`` and
``execute_tool`` spans, middleware actions as span events, and the
``gen_ai.client.token.usage`` / ``gen_ai.client.operation.duration`` histograms. It depends on
``opentelemetry-api`` only; the SDK and exporters are the application's. See README.md here.
"""

from __future__ import annotations

from plait.errors import ConfigurationError

try:
    import opentelemetry.trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ConfigurationError(
        "plait.telemetry needs the OpenTelemetry API: pip install 'plait[otel]' "
        "(and the OpenTelemetry SDK with an exporter to send spans anywhere)."
    ) from exc

from plait.telemetry.middleware import GenAITelemetry
from plait.telemetry.model import ModelTelemetry
from plait.telemetry.retries import record_retry
from plait.telemetry.semconv import CAPTURE_CONTENT_ENV, SEMCONV_VERSION

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "SEMCONV_VERSION",
    "GenAITelemetry",
    "ModelTelemetry",
    "record_retry",
]
