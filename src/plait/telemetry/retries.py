"""A provider retry as a ``plait.provider_retry`` span event on the current (``chat``) span.

Provider adapters retry inside the model call (:mod:`plait.models.retrying`), below every
middleware. Inside an agent turn nothing needs wiring: the turn reports each retry as a
``ModelCallRetried`` event, which :class:`~plait.telemetry.GenAITelemetry` records. For model calls
made outside a turn, pass :func:`record_retry` as the backoff's retry callback
(``Backoff(on_retry=record_retry)``) or set it as :data:`plait.models.retrying.retry_listener`.
"""

from __future__ import annotations

from typing import Any, Protocol

from opentelemetry import trace

from plait.models.retrying import retry_listener

__all__ = ["RetryFacts", "record_retry", "retry_attributes"]


class RetryFacts(Protocol):
    """What a retry notice carries (``plait.models.retrying.RetryNotice`` has these)."""

    @property
    def error(self) -> BaseException: ...

    @property
    def delay(self) -> float: ...

    @property
    def retry(self) -> int: ...

    @property
    def max_retries(self) -> int: ...


def retry_attributes(notice: RetryFacts) -> dict[str, Any]:
    """``plait.retry``, ``plait.max_retries``, ``plait.delay`` (seconds), ``error.type``, and
    ``plait.status`` when the error has an HTTP status."""
    attributes: dict[str, Any] = {
        "plait.retry": notice.retry,
        "plait.max_retries": notice.max_retries,
        "plait.delay": notice.delay,
        "error.type": type(notice.error).__qualname__,
    }
    status = getattr(notice.error, "status", None)
    if isinstance(status, int):
        attributes["plait.status"] = status
    return attributes


def record_retry(notice: RetryFacts) -> None:
    """Add ``plait.provider_retry`` (see :func:`retry_attributes`) to the current span. Nothing
    happens when no span records, nor, as a backoff's ``on_retry``, inside an agent turn (the
    turn reports the retry itself, so wiring both never records a retry twice)."""
    listener = retry_listener.get()
    if listener is not None and listener is not record_retry:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event("plait.provider_retry", retry_attributes(notice))
