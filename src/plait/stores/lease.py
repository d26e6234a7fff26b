"""Turn leases: one turn at a time per thread, across coroutines, processes and machines.

A turn enters ``store.lease(thread_id)`` before it loads the thread, so a second turn on a busy
thread waits (at most ``lease_wait`` seconds) or, with ``lease_wait=0``, fails at once with
:class:`~plait.errors.ThreadBusyError` — before any model call, so no tokens are spent and no
tool runs twice. The lease is optional in the :class:`~plait.stores.base.ThreadStore` contract:
:func:`thread_lease` gives a no-op for a store without ``lease``.

============================  ================================================================
store                         what its lease is
============================  ================================================================
``MemoryThreadStore``         a FIFO of waiting turns per busy thread (one process)
``SQLiteThreadStore``         a row with an expiry in the same file (every process on the
                              machine shares it; the wall clock is the one clock they share)
``PostgresThreadStore``       a row with an expiry on the server's clock
============================  ================================================================

Both table leases last ``lease_ttl`` (default 30 s) and are renewed every ``lease_ttl / 3`` while
the turn runs; a worker that dies (even ``kill -9``) stops renewing, and its threads free up when
the lease expires. At the end of a turn, stopping the renewals and releasing take at most
:data:`LEASE_RELEASE_S` (5 s) in all, even behind another process's write lock, and even when
the turn is cancelled meanwhile (a stream left with ``break`` after its last event); a release
that does not finish by then is dropped and the lease expires instead. A lease is a row, not a
session lock, so it works through a transaction-mode pooler and survives a dropped connection.

Leases save wasted work; correctness never depends on them. Every write still names the version
it expects, so a turn that lost its lease (a stalled worker) gets ``ThreadConflictError`` rather
than overwriting the turn that took over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from plait.errors import ConfigurationError, ThreadBusyError
from plait.messages import new_id

__all__ = [
    "DEFAULT_LEASE_TTL_S",
    "DEFAULT_LEASE_WAIT_S",
    "LEASE_RELEASE_S",
    "held_lease",
    "lease_within",
    "thread_lease",
]

DEFAULT_LEASE_WAIT_S = 30.0
DEFAULT_LEASE_TTL_S = 30.0
_MAX_POLL_S = 0.5
LEASE_RELEASE_S = 5.0
"""Seconds a turn's end may spend stopping the lease's renewals and releasing it, in all; past
it the release is given up and the lease expires after ``lease_ttl``."""


def thread_lease(store: object, thread_id: str) -> AbstractAsyncContextManager[object]:
    """``store.lease(thread_id)`` if the store has one, else a no-op context manager."""
    lease: Callable[[str], AbstractAsyncContextManager[object]] | None = getattr(
        store, "lease", None
    )
    return nullcontext() if lease is None else lease(thread_id)


@asynccontextmanager
async def lease_within(
    store: object, thread_id: str, deadline: float, total: float
) -> AsyncIterator[None]:
    """:func:`thread_lease`, its acquisition bounded by ``deadline`` (event-loop time; the
    store's own ``lease_wait`` still applies when it ends sooner); the body is not bounded.

    The agent uses it for a turn whose wait began ``total`` seconds before ``deadline`` by
    settling an abandoned turn, so both waits share one deadline. Past it (also when it has
    already passed and the lease is not free at once) raises
    :class:`~plait.errors.ThreadBusyError` with ``settling=True``.
    """
    async with contextlib.AsyncExitStack() as held:
        scope = asyncio.timeout_at(deadline)
        try:
            async with scope:
                await held.enter_async_context(thread_lease(store, thread_id))
        except TimeoutError:
            if not scope.expired():
                raise
            raise ThreadBusyError(thread_id, total, settling=True) from None
        yield


def check_lease_options(wait: float, ttl: float) -> None:
    """Refuse a negative ``lease_wait`` or a ``lease_ttl`` under 0.3 s."""
    if wait < 0:
        raise ConfigurationError(f"lease_wait must be 0 (fail fast) or more, got {wait}.")
    if ttl < 0.3:
        raise ConfigurationError(
            f"lease_ttl must be at least 0.3 s (it is renewed every ttl/3), got {ttl}."
        )


@asynccontextmanager
async def held_lease(
    thread_id: str,
    *,
    acquire: Callable[[str, str], Awaitable[bool]],
    renew: Callable[[str, str], Awaitable[bool]],
    release: Callable[[str, str, float], Awaitable[None]],
    wait: float,
    ttl: float,
) -> AsyncIterator[str]:
    """Hold an expiring lease on ``thread_id`` for the body; yields the owner token.

    ``acquire(thread_id, owner)`` takes the lease if it is free or expired; it is polled with
    backoff (up to 0.5 s apart) until ``wait`` seconds have passed, then
    :class:`ThreadBusyError` is raised. While the body runs, ``renew`` extends it every
    ``ttl / 3`` seconds (a failed renewal is retried at the next tick; a lease another owner took
    over is not renewed again). On exit the renewals stop and ``release(thread_id, owner,
    within)`` frees it, both within one :data:`LEASE_RELEASE_S` (5 s) deadline: ``release`` is
    cancelled at it, and a store whose release cannot be cancelled promptly (a write in a worker
    thread) must itself finish within the ``within`` seconds it is given, as the SQLite store
    does. If the release fails or runs out of time the lease simply expires. A cancellation
    that lands while the lease ends (stopping the renewals, releasing) does not cut the release
    short: it is raised once the release is done, still within that deadline. A cancellation
    that lands while ``acquire`` runs also releases, since a store whose writes settle may have
    taken the lease by then.
    """
    owner = new_id()
    started = time.monotonic()
    delay = 0.01
    while not await _take(thread_id, owner, acquire, release):
        remaining = wait - (time.monotonic() - started)
        if remaining <= 0:
            raise ThreadBusyError(thread_id, wait)
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, _MAX_POLL_S)
    stopped = asyncio.Event()
    heartbeat = asyncio.create_task(_keep_renewed(thread_id, owner, renew, ttl / 3, stopped))
    try:
        yield owner
    finally:
        stopped.set()
        heartbeat.cancel()
        # In a task of its own, waited for through cancellations: a turn cancelled while its end
        # waits here (a stream left with ``break`` right after its last event) still frees the
        # lease instead of leaving it to expire.
        await _uninterrupted(_let_go(thread_id, owner, heartbeat, release))


async def _take(
    thread_id: str,
    owner: str,
    acquire: Callable[[str, str], Awaitable[bool]],
    release: Callable[[str, str, float], Awaitable[None]],
) -> bool:
    """``acquire``; if cancelled meanwhile, free what it may have taken (bounded, best effort)
    before the cancellation goes on: a store's writes settle, so the row can be in."""
    try:
        return await acquire(thread_id, owner)
    except asyncio.CancelledError:
        await _uninterrupted(_bounded_release(thread_id, owner, release, LEASE_RELEASE_S))
        raise


async def _let_go(
    thread_id: str,
    owner: str,
    heartbeat: asyncio.Task[None],
    release: Callable[[str, str, float], Awaitable[None]],
) -> None:
    """Wait for the (cancelled) renewal loop to stop, then release, all within
    :data:`LEASE_RELEASE_S`."""
    loop = asyncio.get_running_loop()
    stop_by = loop.time() + LEASE_RELEASE_S
    # Bounded: a driver that turns the cancellation into its own error must not hold the turn
    # here (the renewal loop also stops itself, see _keep_renewed).
    await asyncio.wait([heartbeat], timeout=LEASE_RELEASE_S)
    remaining = stop_by - loop.time()
    if remaining > 0:
        await _bounded_release(thread_id, owner, release, remaining)


async def _bounded_release(
    thread_id: str,
    owner: str,
    release: Callable[[str, str, float], Awaitable[None]],
    within: float,
) -> None:
    """``release``, cancelled after ``within`` seconds; a failure is dropped (the lease then
    expires)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(within):
            await release(thread_id, owner, within)


async def _uninterrupted(ending: Coroutine[object, object, None]) -> None:
    """Run ``ending`` (itself bounded by :data:`LEASE_RELEASE_S`) to its end even if the caller
    is cancelled meanwhile, however often; then re-raise the cancellation, if there was one.

    The outer wait has a deadline too (a second past the release's own), after which
    ``ending`` goes on unwatched and the caller moves on.
    """
    task = asyncio.ensure_future(ending)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LEASE_RELEASE_S + 1.0
    cancelled = False
    while not task.done() and loop.time() < deadline:
        try:
            await asyncio.wait([task], timeout=deadline - loop.time())
        except asyncio.CancelledError:
            cancelled = True
    if task.done():
        _retrieve(task)
    else:
        task.add_done_callback(_retrieve)
    if cancelled:
        raise asyncio.CancelledError


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # marked as seen: _bounded_release already dropped any failure


async def _keep_renewed(
    thread_id: str,
    owner: str,
    renew: Callable[[str, str], Awaitable[bool]],
    every: float,
    stopped: asyncio.Event,
) -> None:
    """Renew every ``every`` seconds until ``renew`` says the lease is gone or ``stopped`` is set.

    ``stopped`` is checked after every await, not only on cancellation: a store that retries a
    renewal whose connection broke (a server restart) can absorb the cancellation and return
    normally, and a loop that went on would hold the lease for ever once the release failed.
    """
    while not stopped.is_set():
        await asyncio.sleep(every)
        if stopped.is_set():
            return
        try:
            if not await renew(thread_id, owner):
                return
        except Exception:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return  # cancelled mid-renewal and the driver reported it as an error
            continue


class LocalLeases:
    """In-process leases: a FIFO of waiters per busy thread, each waiting at most ``wait`` s.

    A free thread is taken without yielding to the event loop and without allocating a lock
    (about 1 µs: every turn on a memory store pays it). On release the lease passes straight to
    the longest waiter, so no turn can overtake one that was already waiting.
    """

    def __init__(self, wait: float = DEFAULT_LEASE_WAIT_S) -> None:
        check_lease_options(wait, DEFAULT_LEASE_TTL_S)
        self.wait = wait
        self._busy: dict[str, deque[asyncio.Future[None]]] = {}

    def lease(self, thread_id: str) -> _LocalLease:
        return _LocalLease(self, thread_id)

    async def acquire(self, thread_id: str) -> None:
        waiters = self._busy.get(thread_id)
        if waiters is None:
            self._busy[thread_id] = deque()
            return
        if self.wait == 0:
            raise ThreadBusyError(thread_id, 0)
        handed = asyncio.get_running_loop().create_future()
        waiters.append(handed)
        try:
            await asyncio.wait_for(asyncio.shield(handed), self.wait)
        except BaseException as exc:
            if handed.done() and not handed.cancelled():
                self.release(thread_id)  # handed over as we gave up: pass it on
            else:
                handed.cancel()
            if isinstance(exc, TimeoutError):
                raise ThreadBusyError(thread_id, self.wait) from None
            raise

    def release(self, thread_id: str) -> None:
        waiters = self._busy[thread_id]
        while waiters:
            handed = waiters.popleft()
            if not handed.done():
                handed.set_result(None)
                return
        del self._busy[thread_id]


class _LocalLease:
    __slots__ = ("leases", "thread_id")

    def __init__(self, leases: LocalLeases, thread_id: str) -> None:
        self.leases = leases
        self.thread_id = thread_id

    async def __aenter__(self) -> None:
        await self.leases.acquire(self.thread_id)

    async def __aexit__(self, *exc_info: object) -> None:
        self.leases.release(self.thread_id)
