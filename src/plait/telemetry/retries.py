"""``record_retry``: a provider retry as a span event on the current (``chat``) span.

Provider adapters retry inside the model call (:mod:`plait.models.retrying`), below every
middleware. Pass ``record_retry`` as the backoff's retry callback (``Backoff(on_retry=...)``;
chain it with your own if you have one) and each retry becomes a ``plait.provider_retry`` event
on the span current during the call: the agent call's ``chat`` span.
"""

from __future__ import annotations

from typing import Any, Protocol

from opentelemetry import trace

__all__ = ["RetryFacts", "record_retry"]


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


def record_retry(notice: RetryFacts) -> None:
    """Add ``plait.provider_retry`` (``plait.retry``, ``plait.max_retries``, ``plait.delay``
    in seconds, ``error.type``, ``plait.status`` when the error has an HTTP status) to the
    current span; nothing happens when no span records."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {
        "plait.retry": notice.retry,
        "plait.max_retries": notice.max_retries,
        "plait.delay": notice.delay,
        "error.type": type(notice.error).__qualname__,
    }
    status = getattr(notice.error, "status", None)
    if isinstance(status, int):
        attributes["plait.status"] = status
    span.add_event("plait.provider_retry", attributes)
