"""A bound on what one Streamable HTTP server may send in one message.

The SDK (1.x) reads a JSON response whole and buffers a server-sent event until its blank line,
with no bound. :func:`bounded_transport` wraps the ``httpx`` transport plait gives the SDK: a JSON
response longer than ``limit`` bytes, or one event of an ``text/event-stream`` response longer
than that, fails with :class:`~plait.mcp.stdio.McpMessageTooLarge` (``on_too_large`` is told
first), which ends the session as a dead server does. A long-lived event stream is fine: only
the bytes since the last event boundary count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from plait.mcp.stdio import McpMessageTooLarge

if TYPE_CHECKING:
    import httpx

__all__ = ["bounded_transport"]

_BOUNDARIES = (b"\n\n", b"\r\n\r\n", b"\r\r")


def bounded_transport(
    limit: int, on_too_large: Callable[[McpMessageTooLarge], None]
) -> httpx.AsyncBaseTransport:
    """An ``httpx`` transport (the default one, wrapped) that enforces ``limit`` (see the
    module docstring)."""
    import httpx

    class Bounded(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            events = response.headers.get("content-type", "").startswith("text/event-stream")
            stream = response.stream
            assert isinstance(stream, httpx.AsyncByteStream)
            return httpx.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=BoundedStream(stream, events),
                extensions=response.extensions,
                request=request,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

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

    return Bounded()
