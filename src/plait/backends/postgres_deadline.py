"""Deadlines on Postgres calls: a frozen server costs a call its deadline, never more.

A server that stops answering (a frozen host, a network partition, ``SIGSTOP``) never sends an
error either, so server-side timeouts cannot fire and a query in flight waits for ever. Every
call of :class:`~plait.backends.postgres_db.PostgresDatabase` therefore runs under
:func:`bounded`: one client-side deadline for all of it (the wait for a connection, the pool's
check of it, the statements, a retry). At the deadline, or when the caller is cancelled, the call
is *abandoned*, never left to wait on the server:

1. each connection the call holds (registered through :data:`CURRENT_CALL`, also while the
   pool checks one) is sent a cancel request, waited for at most :data:`CANCEL_TIMEOUT_S`
   (a live server stops the statement; a frozen one does not answer, and is not waited for).
   Not behind a pooler (``cancel=False``): PgBouncer 1.18 crashes on a cancel request for a
   client that disconnects meanwhile ("bad client state"); it closes the server connection of a
   client that left mid-statement instead;
2. its socket is shut down: psycopg's pending read fails at once, the connection is broken and
   the pool discards it (a server that comes back rolls an open transaction back);
3. a call holding no connection (queued for one) is cancelled, which needs no server;
4. the call is given :data:`UNWIND_TIMEOUT_S` to unwind; one that does not is left to finish in
   the background (an application's pool with its own ``check``) and the caller goes on.

psycopg's own reaction to a cancelled query (a cancel request, then up to 5 s for the server, then
5 s more) is what this avoids: the call's task is never cancelled while it waits on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = [
    "CANCEL_TIMEOUT_S",
    "CURRENT_CALL",
    "UNWIND_TIMEOUT_S",
    "Call",
    "bounded",
    "connection_lost",
    "server_deadline",
]

T = TypeVar("T")

CANCEL_TIMEOUT_S = 0.5
"""Seconds an abandoned call waits for its cancel requests to reach the server (a live server
answers in about a millisecond)."""
UNWIND_TIMEOUT_S = 0.5
"""Seconds an abandoned call, its connections shut, may take to unwind before the caller goes on
without it."""

# Calls left to finish in the background (kept referenced until they do).
_UNWINDING: set[asyncio.Future[Any]] = set()


class Call:
    """The connections one call holds, so that abandoning it closes them instead of waiting."""

    __slots__ = ("abandoned", "cancel", "held")

    def __init__(self, *, cancel: bool = True) -> None:
        self.held: set[AsyncConnection[Any]] = set()
        self.abandoned = False
        self.cancel = cancel

    def hold(self, conn: AsyncConnection[Any]) -> None:
        """Register ``conn``; one registered after the call was abandoned is shut at once."""
        self.held.add(conn)
        if self.abandoned:
            sever(conn)

    def drop(self, conn: AsyncConnection[Any]) -> None:
        self.held.discard(conn)

    async def abandon(self) -> None:
        """Cancel the held connections' statements (bounded) and shut their sockets."""
        self.abandoned = True
        conns = list(self.held)
        if not conns:
            return
        if not self.cancel:
            for conn in conns:
                sever(conn)
            return
        cancels = [asyncio.ensure_future(_cancel(conn)) for conn in conns]
        _, late = await asyncio.wait(cancels, timeout=CANCEL_TIMEOUT_S)
        for task in late:  # psycopg bounds each itself; keep them until they end
            _keep(task)
        for conn in conns:
            sever(conn)


CURRENT_CALL: ContextVar[Call | None] = ContextVar("plait_postgres_call", default=None)
"""The call running in this task: connections register here as they are taken from the pool."""


async def bounded(
    work: Callable[[], Awaitable[T]],
    seconds: float,
    expired: Callable[[], BaseException],
    *,
    settle: float = 0.0,
    cancel: bool = True,
) -> T:
    """``await work()`` within ``seconds``; past them the call is abandoned (see the module
    docstring) and ``expired()`` is raised. A cancelled caller abandons the call too and gets its
    ``CancelledError`` within about a second, after letting the call finish for at most
    ``settle`` seconds first (within its deadline: a write that settles), so a write either
    committed or rolled back before the caller learns of the cancellation, unless the server
    stopped answering. ``cancel=False`` sends no cancel requests (behind a pooler)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds if math.isfinite(seconds) else math.inf
    call = Call(cancel=cancel)
    child = asyncio.ensure_future(_within(call, work))
    try:
        await asyncio.wait([child], timeout=None if math.isinf(deadline) else seconds)
    except asyncio.CancelledError:
        try:
            if settle > 0 and not child.done():
                limit = min(settle, deadline - loop.time())
                if limit > 0:
                    await asyncio.wait([child], timeout=limit)
        finally:
            await _abandon(call, child)
        raise
    if child.done():
        return child.result()
    await _abandon(call, child)
    raise expired()


async def _within(call: Call, work: Callable[[], Awaitable[T]]) -> T:
    CURRENT_CALL.set(call)  # the child task runs in its own copy of the context
    return await work()


async def _abandon(call: Call, child: asyncio.Future[Any]) -> None:
    if child.done():
        _retrieve(child)
        return
    await call.abandon()
    if not call.held:
        child.cancel()  # queued for a connection, or between statements: no server to wait for
    await asyncio.wait([child], timeout=UNWIND_TIMEOUT_S)
    if child.done():
        _retrieve(child)
    else:
        child.cancel()
        _keep(child)


def sever(conn: AsyncConnection[Any]) -> None:
    """Shut ``conn``'s socket down without a word to the server: a pending read fails at once
    and the connection counts as broken (the pool discards it). Closing the file descriptor
    itself would pull it from under the event loop, so a duplicate is shut and closed."""
    with contextlib.suppress(Exception):
        fd = conn.pgconn.socket
        dup = socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM)
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


async def _cancel(conn: AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await conn.cancel_safe(timeout=CANCEL_TIMEOUT_S)


def _keep(task: asyncio.Future[Any]) -> None:
    _UNWINDING.add(task)
    task.add_done_callback(_UNWINDING.discard)
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # the caller has moved on: the outcome is moot


def server_deadline(exc: BaseException) -> str | None:
    """The server-side timeout that ended a statement, if one did."""
    import psycopg

    if isinstance(exc, psycopg.errors.QueryCanceled) and "statement timeout" in str(exc):
        return "statement_timeout"
    if isinstance(exc, psycopg.errors.LockNotAvailable) and "lock timeout" in str(exc):
        return "lock_timeout"
    if isinstance(exc, psycopg.errors.IdleInTransactionSessionTimeout):
        return "idle_in_transaction_session_timeout"
    return None


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to the server was lost (a retry may then succeed)."""
    import psycopg

    if isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown):
        return True
    if isinstance(exc, psycopg.InterfaceError):
        return True
    text = str(exc).lower()
    return any(
        marker in text
        for marker in ("connection", "server closed", "terminating", "ssl", "eof", "broken pipe")
    )
