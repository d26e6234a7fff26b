"""A bound on what one Streamable HTTP server may send in one message.

The SDK (1.x) reads a JSON response whole and buffers a server-sent event until its blank line,
with no bound. :func:`response_bound` is an ``httpx`` response hook for the client plait gives
the SDK: it wraps each response's byte stream so that a JSON response longer than ``limit``
bytes, or one event of a ``text/event-stream`` response longer than that, fails with
:class:`~plait.mcp.stdio.McpMessageTooLarge` (``on_too_large`` is told first), which ends the
session as a dead server does. A long-lived event stream is fine: only the bytes since the last
event boundary count. Being a hook, it applies whatever transport httpx picks (a proxy from the
environment included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from plait.mcp.stdio import McpMessageTooLarge

if TYPE_CHECKING:
    import httpx

__all__ = ["response_bound"]

_BOUNDARIES = (b"\n\n", b"\r\n\r\n", b"\r\r")


def response_bound(
    limit: int, on_too_large: Callable[[McpMessageTooLarge], None]
) -> Callable[[httpx.Response], Awaitable[None]]:
    """The ``event_hooks={"response": [...]}`` hook that enforces ``limit`` (see the module
    docstring)."""
    import httpx

    class BoundedStream(httpx.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream, events: bool) -> None:
            self._inner = inner
            self._events = events

        async def __aiter__(self) -> AsyncIterator[bytes]:
            carry = b""  # the last bytes seen: a boundary may be split across two chunks
            size = 0  # bytes of the current event (events) or of the whole response
            async for chunk in self._inner:
                if self._events:
                    tail = carry + chunk
                    ends = [tail.rfind(b) + len(b) for b in _BOUNDARIES if b in tail]
                    size = len(tail) - max(ends) if ends else size + len(chunk)
                    carry = tail[-3:]
                else:
                    size += len(chunk)
                if size > limit:
                    error = McpMessageTooLarge(limit)
                    on_too_large(error)
                    raise error
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    async def hook(response: httpx.Response) -> None:
        stream = response.stream
        if isinstance(stream, httpx.AsyncByteStream):
            events = response.headers.get("content-type", "").startswith("text/event-stream")
            response.stream = BoundedStream(stream, events)

    return hook
