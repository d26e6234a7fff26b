"""A span per request, parent of the turn's spans.

When ``opentelemetry-api`` is installed, :class:`RequestSpan` opens a ``SERVER`` span named
``"{method} {path}"`` around each HTTP request, current while the handler runs, so the task that
drives the turn (started by the handler, it copies the context) makes the turn's GenAI spans
(:mod:`plait.telemetry`) its children. An incoming W3C ``traceparent`` header is its parent.
``tracer_provider`` (default: the global one) makes the spans.
Without OpenTelemetry, or before an SDK's provider is set (the API's no-op and proxy providers
record nothing), it passes requests through.
"""

from __future__ import annotations

from typing import Any

from plait.serve.access import ASGIApp, Receive, Scope, Send

__all__ = ["RequestSpan"]


class RequestSpan:
    """ASGI middleware: one OpenTelemetry span per HTTP request (see the module)."""

    def __init__(self, app: ASGIApp, tracer_provider: Any = None) -> None:
        self.app = app
        self._provider = tracer_provider
        try:
            from opentelemetry import propagate, trace
        except ImportError:
            self._trace: Any = None
        else:
            self._trace = trace
            self._propagate = propagate
            # The API's own providers before an SDK is set up: their spans record nothing, so
            # a request skips the span (and the header copy) altogether.
            self._quiet = (trace.NoOpTracerProvider, trace.ProxyTracerProvider)
        self._tracers: dict[int, tuple[Any, Any]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._trace is None:
            await self.app(scope, receive, send)
            return
        provider = self._provider or self._trace.get_tracer_provider()
        if isinstance(provider, self._quiet):  # no SDK set up: no span would be recorded
            await self.app(scope, receive, send)
            return
        tracer = self._tracers.get(id(provider))
        if tracer is None or tracer[0] is not provider:
            tracer = self._tracers[id(provider)] = (provider, provider.get_tracer("plait.serve"))
        carrier = {
            bytes(k).decode("latin-1"): bytes(v).decode("latin-1")
            for k, v in scope.get("headers", ())
        }
        parent = self._propagate.extract(carrier)
        name = f"{scope.get('method')} {scope.get('path')}"
        with tracer[1].start_as_current_span(
            name,
            context=parent,
            kind=self._trace.SpanKind.SERVER,
            attributes={
                "http.request.method": str(scope.get("method")),
                "url.path": str(scope.get("path")),
            },
        ):
            await self.app(scope, receive, send)
