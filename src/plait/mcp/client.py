"""plait's MCP client: with :mod:`plait.mcp.stdio`, the only code that imports the ``mcp`` SDK
(1.x).

One asyncio task, the *owner*, runs each session from start to end: it opens the transport, runs
``initialize``, serves every request (each in a child task of its own task group) and closes the
transport. Callers only put requests on a queue and wait for a future. That is why closing
clients in any order, cancelling a caller during connect, or a server dying mid-call never exits
an anyio cancel scope in another task (the SDK's "Attempted to exit cancel scope in a different
task" error, python-sdk#577).

A session is *dead* once its transport's read stream ends (the process exited, the HTTP session
was closed) or its owner failed; every waiting request then fails with :class:`McpServerGone`.
A dead client stays dead: :class:`~plait.mcp.server.McpServer` starts a new one on the next call.

An SDK major-version change stays in this module and :mod:`plait.mcp.content`: everything it
returns is plait's own data (:class:`RemoteTool`, :class:`CallOutcome` and the content
dataclasses, defined there and re-exported here).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from plait.mcp.content import (
    BinaryContent,
    CallOutcome,
    Content,
    LinkContent,
    RemoteTool,
    TextContent,
    outcome_of,
    remote_tool_of,
)
from plait.mcp.errors import McpConnectError, McpServerGone, McpToolListError
from plait.mcp.http import response_bound
from plait.mcp.stdio import DEFAULT_MAX_MESSAGE_BYTES, open_stdio

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "CLOSE_TIMEOUT",
    "HEARTBEAT_INTERVAL",
    "BinaryContent",
    "CallOutcome",
    "Content",
    "HttpTransport",
    "LinkContent",
    "McpClient",
    "RemoteTool",
    "StdioTransport",
    "TextContent",
]

CLOSE_TIMEOUT = 5.0
"""Seconds :meth:`McpClient.aclose` waits for the owner to close the session before cancelling it
(closing a stdio server waits up to 2 s for it to exit, then terminates its process group;
see :mod:`plait.mcp.stdio`)."""

HEARTBEAT_INTERVAL = 2.0
"""Seconds between pings to an HTTP server while a call to it is in flight. The SDK (1.x) does
not notice an HTTP server that went away mid-call; a failed ping ends the session, so the call
fails at once instead of waiting for its whole timeout. A slow ping is ignored (a busy server is
not a dead one)."""


@dataclass(frozen=True, slots=True)
class StdioTransport:
    """Start ``command`` (program and arguments) and speak MCP over its stdin/stdout.

    ``env`` is added to the SDK's safe default environment (``HOME``, ``PATH``, …), not to this
    process's whole environment; ``cwd`` defaults to the current directory. A message (one line)
    longer than ``max_message_bytes`` ends the session (see :mod:`plait.mcp.stdio`).
    """

    command: tuple[str, ...]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    log_file: str | None = None
    """Where the server's stderr goes (bounded, see :mod:`plait.mcp.stdio`); ``None``: this
    process's stderr."""


@dataclass(frozen=True, slots=True)
class HttpTransport:
    """Speak MCP over Streamable HTTP at ``url``, sending ``headers`` with every request. A
    response (or one event of a stream) longer than ``max_message_bytes`` ends the session (see
    :mod:`plait.mcp.http`)."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES


Transport: TypeAlias = StdioTransport | HttpTransport


@dataclass(slots=True)
class _Request:
    op: Callable[[ClientSession], Awaitable[Any]]
    future: asyncio.Future[Any]


class McpClient:
    """One MCP session, owned by one task (see the module docstring).

    ``on_tools_changed`` is called (synchronously, in the owner) when the server sends
    ``notifications/tools/list_changed``. ``init_timeout`` bounds the transport start plus
    ``initialize``.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        server: str,
        init_timeout: float,
        on_tools_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.transport = transport
        self.server = server
        self.init_timeout = init_timeout
        self._on_tools_changed = on_tools_changed
        self._requests: asyncio.Queue[_Request | None] = asyncio.Queue()
        self._ready: asyncio.Future[None] | None = None
        self._owner: asyncio.Task[None] | None = None
        self._dead = False
        self._reason = "it was closed"
        self._in_flight = 0

    @property
    def alive(self) -> bool:
        """Whether the session is up or still starting (not closed, failed or disconnected)."""
        return not self._dead

    @property
    def ended(self) -> str | None:
        """Why the session is dead (closed, failed to start, disconnected), or ``None`` while it
        is up or still starting."""
        return self._reason if self._dead else None

    @property
    def closed(self) -> bool:
        """Whether the owner task has finished (the transport is closed)."""
        return self._owner is None or self._owner.done()

    async def connect(self) -> None:
        """Start the session if needed and wait until it is initialized.

        Raises :class:`McpConnectError` if it fails or takes over ``init_timeout`` seconds (the
        owner is then cancelled and closes what it had opened). Cancelling the caller leaves
        the owner connecting, so a later call (or :meth:`aclose`) picks it up.
        """
        if self._dead:
            raise McpServerGone(self.server, self._reason)
        if self._owner is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._owner = asyncio.create_task(self._own(), name=f"mcp:{self.server}")
        assert self._ready is not None
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.init_timeout)
        except TimeoutError:
            self._stop("it did not finish starting in time")
            self._owner.cancel()  # delivered inside the owner, which exits its own scopes
            raise McpConnectError(
                self.server,
                f"it did not finish starting within {self.init_timeout:g} s; raise the server's "
                "init_timeout if it is slow to start",
            ) from None

    async def list_tools(self, max_tools: int) -> list[RemoteTool]:
        """Every tool the server lists (following pagination), at most ``max_tools`` plus one
        (so the caller can tell the list was cut). A malformed answer (not a list of tools, a
        tool without a name, a cursor that repeats) raises :class:`McpToolListError`."""

        async def op(session: ClientSession) -> list[RemoteTool]:
            from pydantic import ValidationError

            found: list[RemoteTool] = []
            cursor: str | None = None
            seen: set[str] = set()
            while len(found) <= max_tools:
                try:
                    page = await session.list_tools(cursor=cursor)
                except ValidationError as exc:  # the SDK checks the answer against its types
                    raise McpToolListError(self.server, _malformed(_first_problem(exc))) from None
                found += [remote_tool_of(t) for t in page.tools]
                cursor = page.nextCursor
                if not cursor:
                    break
                if cursor in seen:
                    raise McpToolListError(self.server, _malformed("its pages repeat a cursor"))
                seen.add(cursor)
            return found[: max_tools + 1]

        result: list[RemoteTool] = await self._request(op, self.init_timeout)
        return result

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any],
        timeout: float,  # noqa: ASYNC109
    ) -> CallOutcome:
        """Call ``name`` with ``args``; :class:`TimeoutError` after ``timeout`` seconds (the
        request is then abandoned, the session stays up), :class:`McpServerGone` if the session
        ends meanwhile. A result the SDK refuses (structured content missing or not matching the
        tool's output schema) raises :class:`RuntimeError` with the SDK's words."""

        async def op(session: ClientSession) -> CallOutcome:
            return outcome_of(await session.call_tool(name, dict(args)))

        outcome: CallOutcome = await self._request(op, timeout)
        return outcome

    async def aclose(self, timeout: float = CLOSE_TIMEOUT) -> None:  # noqa: ASYNC109
        """Close the session (from any task; idempotent). Requests still waiting fail with
        :class:`McpServerGone`. The owner gets ``timeout`` seconds to close the transport, then
        it is cancelled (at once while the session is still starting)."""
        self._stop()
        owner = self._owner
        if owner is None or owner.done():
            return
        if self._ready is not None and not self._ready.done():
            owner.cancel()  # still starting: nothing to close gracefully
        done, _ = await asyncio.wait({owner}, timeout=timeout)
        if not done:
            owner.cancel()
            await asyncio.wait({owner}, timeout=timeout)

    def _stop(self, reason: str = "it was closed") -> None:
        if not self._dead:
            self._dead = True
            self._reason = reason
        self._requests.put_nowait(None)

    async def _request(
        self,
        op: Callable[[ClientSession], Awaitable[Any]],
        timeout: float,  # noqa: ASYNC109
    ) -> Any:
        await self.connect()
        if self._dead:  # died since connect() returned; its owner may have drained the queue
            raise McpServerGone(self.server, self._reason)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._requests.put_nowait(_Request(op, future))
        # Timing out or being cancelled cancels the future, which cancels the child task serving
        # it inside the owner (see _serve).
        return await asyncio.wait_for(future, timeout)

    async def _own(self) -> None:
        """The owner task: open, initialize, serve requests until stopped or disconnected."""
        import anyio

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open(stack)
                session = await self._session(stack, read, write)
                async with anyio.create_task_group() as group:
                    assert self._ready is not None
                    if not self._ready.done():
                        self._ready.set_result(None)
                    if isinstance(self.transport, HttpTransport):
                        group.start_soon(self._heartbeat, session)
                    while (request := await self._requests.get()) is not None:
                        group.start_soon(self._serve, session, request)
                    group.cancel_scope.cancel()
        except Exception as exc:
            self._fail(f"{type(exc).__name__}: {_first_error(exc)}")
        except BaseException:
            self._fail("it was cancelled")
            raise
        finally:
            self._fail(self._reason if self._dead else "the session ended")

    def _fail(self, reason: str) -> None:
        if not self._dead:
            self._dead = True
            self._reason = reason
        ready = self._ready
        if ready is not None and not ready.done():
            log = getattr(self.transport, "log_file", None)
            ready.set_exception(McpConnectError(self.server, self._reason, log_file=log))
            ready.exception()  # retrieved here; connect() raises it to its caller
        while not self._requests.empty():
            request = self._requests.get_nowait()
            if request is not None and not request.future.done():
                request.future.set_exception(McpServerGone(self.server, self._reason))

    async def _open(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        transport = self.transport
        if isinstance(transport, StdioTransport):
            read, write = await stack.enter_async_context(
                open_stdio(
                    transport.command,
                    transport.env,
                    transport.cwd,
                    transport.max_message_bytes,
                    on_too_large=lambda exc: self._stop(str(exc)),
                    log_file=transport.log_file,
                )
            )
            return read, write
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=dict(transport.headers),
                timeout=httpx.Timeout(30, read=300),
                event_hooks={
                    "response": [
                        response_bound(transport.max_message_bytes, lambda e: self._stop(str(e)))
                    ]
                },
            )
        )
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(transport.url, http_client=http)
        )
        return read, write

    async def _session(
        self, stack: contextlib.AsyncExitStack, read: Any, write: Any
    ) -> ClientSession:
        from mcp import ClientSession

        # The session reads through a watcher: when the transport's read stream ends, the
        # session is marked dead at once, so no later request waits on a closed connection.
        # (SDK 1.x only enters the stream and iterates it, which is all the watcher provides.)
        watched: Any = _WatchedStream(read, self._disconnected)
        session = await stack.enter_async_context(
            ClientSession(watched, write, message_handler=self._on_message)
        )
        await session.initialize()
        return session

    def _disconnected(self) -> None:
        self._stop("the server closed the connection (it may have exited)")

    async def _heartbeat(self, session: ClientSession) -> None:
        import anyio

        while True:
            await anyio.sleep(HEARTBEAT_INTERVAL)
            if self._in_flight:
                # A transport failure ends the session (the transport's task group fails);
                # anything else, a slow answer included, is no sign of a dead server.
                with anyio.move_on_after(HEARTBEAT_INTERVAL), contextlib.suppress(Exception):
                    await session.send_ping()

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._on_tools_changed()

    async def _serve(self, session: ClientSession, request: _Request) -> None:
        import anyio

        future = request.future
        if future.done():
            return
        self._in_flight += 1
        with anyio.CancelScope() as scope:
            future.add_done_callback(lambda _: scope.cancel())
            try:
                result = await request.op(session)
            except Exception as exc:
                if not future.done():
                    future.set_exception(_gone_or(exc, self.server))
            else:
                if not future.done():
                    future.set_result(result)
            finally:
                self._in_flight -= 1
                if not future.done():  # the owner is tearing the session down
                    if not self._dead:
                        self._dead = True
                        self._reason = "the connection to the server failed"
                    future.set_exception(McpServerGone(self.server, self._reason))


class _WatchedStream:
    """The transport's read stream, calling ``on_end`` once when it ends (for any reason)."""

    def __init__(self, stream: Any, on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    async def __aenter__(self) -> _WatchedStream:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self._stream.__aexit__(*exc_info)
        finally:
            self._on_end()

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._stream.__anext__()
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                self._on_end()
            raise

    async def receive(self) -> Any:
        return await self.__anext__()

    async def aclose(self) -> None:
        await self._stream.aclose()


def _first_error(exc: BaseException) -> str:
    """The first leaf of an exception group (anyio wraps transport failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)


def _malformed(problem: str) -> str:
    return (
        f"answered tools/list with a malformed result ({problem}); it does not follow the MCP "
        "protocol: fix or update the server, or remove it from the configuration."
    )


def _first_problem(exc: Any) -> str:
    """A pydantic ``ValidationError``'s first problem, as ``where: what`` (never the value,
    which the server chose and may be huge), and how many more there are."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "it does not match the protocol's types"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the result"
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where}: {str(first.get('msg', 'invalid'))[:200]}{more}"


def _gone_or(exc: Exception, server: str) -> Exception:
    from mcp.shared.exceptions import McpError
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, McpError) and exc.error.code == CONNECTION_CLOSED:
        return McpServerGone(server, "the server closed the connection (it may have exited)")
    return exc
