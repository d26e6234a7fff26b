"""Retrying provider calls: exponential backoff that honours the server's ``retry-after``.

Provider adapters turn their SDK's own retries off and call :func:`call_with_retries`, so every
adapter retries the same way and a test can inject the sleep instead of waiting.

What happens to a failure, as the adapter's ``classify`` judged it:

* **retryable** (429, 408, 409, 5xx, 529, connection lost): sleep, then try again, at most
  ``max_retries`` times. The sleep is the server's ``retry-after-ms`` / ``retry-after`` when it
  sent one, else ``base_delay * 2**n`` with jitter; either way capped at ``max_delay``.
* **not retryable** (400, 401, 403, 404, 422, ...): raised at once as the typed plait error.
* **not a provider failure** (``classify`` returns ``None``, e.g. a bug): re-raised untouched.

A server's ``x-should-retry: true|false`` header overrides the status-based decision (both
OpenAI and Anthropic send it).

Who hears of a retry (before its sleep): the backoff's own ``on_retry``, then the listener in
:data:`retry_listener` (a context variable; the agent's turn sets one, so every retry of a model
call made during a turn becomes a ``ModelCallRetried`` event without any wiring).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from plait.errors import ProviderError
from plait.models.base import ModelResponse, ResponseComplete, StreamEvent
from plait.models.timeouts import CallDeadline

__all__ = [
    "Backoff",
    "ProviderFailure",
    "RetryNotice",
    "SleepFn",
    "StreamAssembler",
    "call_with_retries",
    "relay_stream",
    "retry_after_seconds",
    "retry_listener",
    "server_retry_hint",
]

T = TypeVar("T")
SleepFn = Callable[[float], Awaitable[None]]
"""How to wait between attempts; ``asyncio.sleep`` unless a test injects a recorder."""


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A retry about to happen: the failure, the wait before it, and its number (1-based) of
    at most ``max_retries``. What :attr:`Backoff.on_retry` receives (the CLI prints a line)."""

    error: ProviderError
    delay: float
    retry: int
    max_retries: int


retry_listener: ContextVar[Callable[[RetryNotice], None] | None] = ContextVar(
    "plait_retry_listener", default=None
)
"""Told of every retry :func:`call_with_retries` makes in this context, after the backoff's
``on_retry``. The agent sets it for each turn (the turn emits ``ModelCallRetried``); set it
yourself (``token = retry_listener.set(fn)`` … ``retry_listener.reset(token)``) to hear of the
retries of model calls you make outside a turn. It must not block; what it raises propagates."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long to wait before retry number ``n`` (0-based).

    ``retry_after`` from the server wins, capped at ``max_delay`` so one response cannot park an
    agent for an hour; otherwise ``base_delay * 2**n`` capped at ``max_delay``, minus up to
    ``jitter`` of itself at random so parallel agents do not retry in lockstep.
    """

    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.25
    sleep: SleepFn = asyncio.sleep
    on_retry: Callable[[RetryNotice], None] | None = None
    """Told of each retry before its sleep (must not block; an exception it raises propagates)."""

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        if retry_after is not None and not math.isnan(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        import random  # deferred: the turn imports this module, and few turns ever retry

        delay = min(self.base_delay * 2.0**retry, self.max_delay)
        return delay * (1.0 - self.jitter * random.random())


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """An SDK exception translated by an adapter: the plait error and the server's wait hint."""

    error: ProviderError
    retry_after: float | None = None


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    classify: Callable[[Exception], ProviderFailure | None],
    *,
    max_retries: int,
    backoff: Backoff,
    deadline: CallDeadline | None = None,
) -> T:
    """Await ``attempt()`` until it succeeds, retrying retryable failures.

    Raises the classified :class:`~plait.errors.ProviderError` (chained to the SDK exception) once
    a failure is not retryable or ``max_retries`` retries are spent; the message then says how
    many retries were made. With a ``deadline``, every attempt is bounded by it (raising
    :class:`~plait.errors.ModelTimeoutError` when it passes), and a retry whose backoff sleep
    would end past it is not made: the last failure is raised, saying so.
    """
    retries = 0
    while True:
        try:
            if deadline is None:
                return await attempt()
            deadline.attempts += 1
            return await deadline.within(attempt())
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            error = failure.error
            delay = backoff.delay(retries, failure.retry_after)
            out_of_time = deadline is not None and delay >= deadline.remaining()
            if not error.retryable or retries >= max_retries or out_of_time:
                if out_of_time and error.retryable and retries < max_retries:
                    assert deadline is not None
                    total = deadline.timeouts.total
                    error = _with_note(
                        error, f"(no retry: it would end past the {total:g} s deadline)"
                    )
                elif retries:
                    tries = "retry" if retries == 1 else "retries"
                    note = f"(gave up after {retries} {tries}; try later or raise max_retries)"
                    error = _with_note(error, note)
                raise error from exc
            _tell(backoff, RetryNotice(error, delay, retries + 1, max_retries))
            await backoff.sleep(delay)
            retries += 1


def _tell(backoff: Backoff, notice: RetryNotice) -> None:
    if backoff.on_retry is not None:
        backoff.on_retry(notice)
    listener = retry_listener.get()
    if listener is not None:
        listener(notice)


def _with_note(error: ProviderError, note: str) -> ProviderError:
    return type(error)(
        f"{error} {note}", provider=error.provider, status=error.status, retryable=error.retryable
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, else ``retry-after`` in seconds or as an
    HTTP date; ``None`` when absent or unparsable (``nan`` and ``inf`` included: a sleep of
    ``nan`` seconds never ends). An HTTP date without a zone (the asctime form) is in GMT."""
    millis = _finite(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return seconds
    # Deferred: email.utils pulls in urllib, ipaddress and calendar (~5 ms) for every turn.
    import datetime
    import email.utils

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(when.timestamp() - time.time(), 0.0)


def _finite(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def server_retry_hint(headers: Mapping[str, str]) -> bool | None:
    """The server's ``x-should-retry`` verdict, or ``None`` when it gave none."""
    value = headers.get("x-should-retry")
    if value == "true":
        return True
    if value == "false":
        return False
    return None


class StreamAssembler(Protocol):
    """Turns one SDK stream item into plait events and, at the end, the whole response."""

    def feed(self, item: Any) -> list[StreamEvent]: ...

    def response(self) -> ModelResponse: ...


class ClosableStream(Protocol):
    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


async def relay_stream(
    stream: ClosableStream,
    assembler: StreamAssembler,
    classify: Callable[[Exception], ProviderFailure | None],
    sdk_error: type[Exception] | tuple[type[Exception], ...],
    deadline: CallDeadline | None = None,
) -> AsyncIterator[StreamEvent]:
    """Relay an opened SDK stream as plait events, then the assembled response.

    With a ``deadline``, the wait for each item is bounded by it
    (:class:`~plait.errors.ModelTimeoutError` once it passes).

    A failure mid-stream (an instance of ``sdk_error``: the SDK's errors and the HTTP transport
    errors it lets through) is translated (``classify``) and raised without retrying, since the
    caller already received events; the SDK stream is closed whatever happens.
    """
    items = aiter(stream)
    try:
        while True:
            try:
                item = await (anext(items) if deadline is None else deadline.within(anext(items)))
            except StopAsyncIteration:
                break
            for event in assembler.feed(item):
                yield event
    except sdk_error as exc:
        failure = classify(exc)
        raise (failure.error if failure else exc) from exc
    finally:
        await stream.close()
    yield ResponseComplete(assembler.response())
