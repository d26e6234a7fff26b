"""``SQLiteFile``: the one connection every SQLite component of plait runs on (the thread
store, the blob backend, the trace store), with its ownership check
(:mod:`plait.backends.sqlite_owner`), its bounds, group commit and short writes committed on
the event loop (see :meth:`SQLiteFile.write`).

Moved out of :mod:`plait.backends.sqlite` (which re-exports it) so that module holds the blob
backend only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from plait.backends.sqlite_owner import APPLICATION_ID, check_ownership, statements, tables_of
from plait.errors import PlaitError

__all__ = ["SETTLE_TIMEOUT", "SQLITE_MAX_VALUE_BYTES", "SQLiteFile"]

T = TypeVar("T")

_BUSY_TIMEOUT_S = 30.0

SETTLE_TIMEOUT = 30.0
"""Seconds a cancelled writer waits for its in-flight SQLite write before giving up on it."""

INLINE_SYNC_S = 0.001
"""A durable ``inline`` write runs on the event loop only while synced commits take at most
this long (a moving average, :data:`_SYNC_WEIGHT` the newest's weight): a sync of 0.2 to 0.3 ms
costs less than a worker-thread round trip; a slow disk's would stall every request."""

_SYNC_WEIGHT = 0.25


SQLITE_MAX_VALUE_BYTES = 1_000_000_000
"""The default bound on one stored value (a message row, a blob): SQLite's own
``SQLITE_LIMIT_LENGTH``."""


class SQLiteFile:
    """One SQLite database file in WAL mode, used from worker threads one call at a time.

    Why one connection behind a lock rather than a connection per worker thread: SQLite admits
    one writer at a time anyway, so a second connection in the same process buys only parallel
    reads, while connections bound to pool threads have no clear owner to close them. Other
    processes (or other instances on the same file) get their own connection; WAL lets them read
    while one writes, and ``BEGIN IMMEDIATE`` plus a 30 s busy timeout queues their writers.

    The file (and its parent directory) is created on first use, not in the constructor, so no
    disk I/O happens on the event loop. ``":memory:"`` gives a private in-memory database.

    A file that is not plait's is never modified: before anything is written (the journal mode
    included), the first call checks that the file is empty, carries plait's
    ``application_id``, or (a file from before the stamp, by any plait component) holds only
    plait's tables of that time with their columns; anything else raises ``error`` naming the
    tables found. A file that is plait's gets the stamp, WAL mode and any missing tables (a
    thread store and a blob backend may share one file, so a blob-only file opened by a thread
    store is plait's too).

    One value (a message row, a blob) is at most ``max_value_bytes`` bytes (default
    :data:`SQLITE_MAX_VALUE_BYTES`, SQLite's own limit); a larger one raises ``error`` saying
    so, with nothing written. Every other ``sqlite3`` error becomes ``error(message)`` too: a
    damaged file, a lock held past the timeout, a read-only directory.

    ``synchronous`` is the connection's ``PRAGMA synchronous``: ``"FULL"`` (default) syncs the
    WAL on every commit; ``"NORMAL"`` syncs only at checkpoints, so a commit survives a crash of
    the process but the last ones may be lost on power failure (for data that can be lost, such
    as traces: it saves a disk sync per transaction).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: str,
        error: type[PlaitError],
        max_value_bytes: int = SQLITE_MAX_VALUE_BYTES,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
    ) -> None:
        if not 1 <= max_value_bytes <= SQLITE_MAX_VALUE_BYTES:
            raise error(
                f"max_value_bytes must be between 1 and {SQLITE_MAX_VALUE_BYTES:,} "
                f"(SQLite's limit), got {max_value_bytes}."
            )
        self.path = str(path)
        self.max_value_bytes = max_value_bytes
        self._schema = schema
        self._tables = tables_of(schema)
        self._error = error
        self._synchronous = synchronous
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._queue_lock = threading.Lock()
        self._queue: list[_Write] = []
        self._drain_scheduled = False
        self._sync_s = math.nan
        """Moving average of a synced commit's seconds (NaN until the first): see ``write``."""

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a worker thread inside a read transaction (one consistent snapshot)."""
        return await asyncio.to_thread(self._run, fn, "BEGIN")

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        within: float | None = None,
        durable: bool = True,
        inline: bool = False,
    ) -> T:
        """Run ``fn`` in a worker thread inside a write transaction, committed if ``fn`` returns
        and rolled back if it raises (the exception then propagates unchanged).

        Writes that queue while another is running are committed together (group commit):
        one ``BEGIN IMMEDIATE`` … ``COMMIT``, so one disk sync, for the batch, each ``fn`` in a
        savepoint of its own, in the order the writes were made. An ``fn`` that raises rolls
        back its savepoint only; the others commit. A failed commit fails every write of the
        batch, with nothing of it written.

        ``inline=True`` says ``fn`` is short (a few rows, no large value). It then runs on the
        calling thread, the event loop, when that costs no wait: the connection is open and
        idle, no write is queued (writes keep their order), ``BEGIN IMMEDIATE`` gets the write
        lock at once, and, for a durable write, recent commits synced to disk within
        :data:`INLINE_SYNC_S` (a slower disk would stall the loop; its writes stay in the worker
        thread, where a batch shares one sync). Otherwise it is queued as any write. A
        worker-thread round trip costs 0.1 to 0.3 ms of CPU on a virtual machine, about as much as
        a turn's own writes.

        ``durable=False`` is for data whose last commits may be lost on a power failure (a
        turn's lease row: a lost one only expires): its commit is not synced to disk (a batch
        of only such writes is not), and survives a crash of the process as every commit does.

        ``within`` (seconds) bounds how long the write waits for the connection (another call
        of this file running) and for the write lock another connection holds; past it the
        write raises ``error`` with nothing written. By default both waits are bounded by the
        30 s busy timeout. A thread cannot be stopped, so when the caller is cancelled
        meanwhile the write still runs to its end (queued or running), and the cancellation is
        raised only once it has (or after ``SETTLE_TIMEOUT`` seconds): a cancelled caller never
        returns with its write in flight, so the next writer sees it.
        """
        if inline:
            done = self._inline(fn, durable)
            if done is not _QUEUE:
                return done  # type: ignore[return-value]
        loop = asyncio.get_running_loop()
        deadline = None if within is None else time.monotonic() + max(within, 0.0)
        op = _Write(
            fn, deadline, within, concurrent.futures.Future(), contextvars.copy_context(), durable
        )
        with self._queue_lock:
            self._queue.append(op)
            schedule, self._drain_scheduled = not self._drain_scheduled, True
        if schedule:
            try:
                loop.run_in_executor(None, self._drain)
            except BaseException:  # the loop's executor is shut down: nothing will drain
                with self._queue_lock:
                    self._queue.remove(op)
                    self._drain_scheduled = False
                raise
        work: asyncio.Future[T] = asyncio.wrap_future(op.future)
        try:
            if within is None:
                return await asyncio.shield(work)
            try:
                return await asyncio.wait_for(asyncio.shield(work), max(within, 0.0))
            except TimeoutError:
                if op.future.cancel():  # still queued: nothing written
                    raise self._busy(within) from None
                return await asyncio.shield(work)  # running: its batch's busy timeout bounds it
        except asyncio.CancelledError:
            await _settle(work, SETTLE_TIMEOUT)
            raise

    def _inline(self, fn: Callable[[sqlite3.Connection], T], durable: bool) -> T | object:
        """Run ``fn`` as a write on the calling thread if nothing has to wait for it (see
        :meth:`write`); its result, or :data:`_QUEUE` when it must be queued instead."""
        conn = self._conn
        synced = durable and self._synchronous != "NORMAL"
        if conn is None or (synced and not self._sync_s <= INLINE_SYNC_S):
            return _QUEUE
        with self._queue_lock:
            if self._queue or self._drain_scheduled or not self._lock.acquire(blocking=False):
                return _QUEUE
        try:
            if self._conn is not conn:  # closed meanwhile
                return _QUEUE
            unsynced = not durable and self._synchronous != "NORMAL"
            if unsynced:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                if not self._begin_now(conn):
                    return _QUEUE
                try:
                    result = fn(conn)
                    self._commit(conn, synced)
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.rollback()
                    if isinstance(exc, sqlite3.Error):
                        raise self._failure(exc) from exc
                    raise
            finally:
                if unsynced:
                    conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            return result
        finally:
            self._lock.release()

    def _begin_now(self, conn: sqlite3.Connection) -> bool:
        """``BEGIN IMMEDIATE`` without waiting; ``False`` (nothing begun) if another
        connection holds the write lock."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise self._failure(exc) from exc
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        return True

    def _commit(self, conn: sqlite3.Connection, synced: bool) -> None:
        """Commit; a commit that syncs to disk updates the moving average of how long that
        takes (:meth:`_inline` reads it)."""
        if not synced:
            conn.commit()
            return
        began = time.perf_counter()
        conn.commit()
        took = time.perf_counter() - began
        last = self._sync_s
        self._sync_s = took if last != last else last + _SYNC_WEIGHT * (took - last)

    def close(self) -> None:
        """Close the connection; the next call opens it again."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(
        self, fn: Callable[[sqlite3.Connection], T], begin: str, within: float | None = None
    ) -> T:
        if within is None:
            self._lock.acquire()
        else:
            # One deadline for both waits: the connection lock, then SQLite's busy handler.
            end = time.monotonic() + within
            if not self._lock.acquire(timeout=max(within, 0.0)):
                raise self._busy(within)
        try:
            conn = self._connect()
            if within is None:
                return self._transaction(conn, fn, begin)
            left_ms = max(int((end - time.monotonic()) * 1000), 0)
            conn.execute(f"PRAGMA busy_timeout = {left_ms}")
            try:
                return self._transaction(conn, fn, begin)
            finally:
                conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc
        except OSError as exc:
            raise self._cannot_create(exc) from exc
        finally:
            self._lock.release()

    @staticmethod
    def _transaction(
        conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], begin: str
    ) -> T:
        conn.execute(begin)
        try:
            result = fn(conn)
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        return result

    def _busy(self, within: float) -> PlaitError:
        return self._error(
            f"SQLite database {self.path!r} was busy with another call for "
            f"{within:g} s; nothing was written. Retry when it is done."
        )

    def _drain(self) -> None:
        """Run every queued write in one transaction (the writes queued meanwhile wait for the
        next drain); never raises: each write's outcome goes to its future, once the connection
        is free again (so a caller woken by it finds the connection idle, see ``_inline``)."""
        settled: list[tuple[_Write, bool, Any]] = []
        with self._lock:
            with self._queue_lock:
                queued, self._queue = self._queue, []
                self._drain_scheduled = False
            ops = [op for op in queued if op.future.set_running_or_notify_cancel()]
            if not ops:
                return
            try:
                conn = self._connect()
            except sqlite3.Error as exc:
                _fail(ops, self._failure(exc))
                return
            except OSError as exc:
                _fail(ops, self._cannot_create(exc))
                return
            except BaseException as exc:
                _fail(ops, exc)
                return
            while ops:
                ops = self._batch(conn, ops, settled)
        for op, ok, value in settled:
            if ok:
                op.future.set_result(value)
            else:
                op.future.set_exception(value)

    def _batch(
        self,
        conn: sqlite3.Connection,
        ops: list[_Write],
        settled: list[tuple[_Write, bool, Any]],
    ) -> list[_Write]:
        """Run ``ops`` in one transaction and add their outcomes to ``settled`` (a failure to
        run or commit at all fails their futures at once); returns the ops to run again when
        one of them made SQLite roll the whole transaction back (the others' work went with
        it)."""
        now = time.monotonic()
        late = [op for op in ops if op.deadline is not None and op.deadline <= now]
        for op in late:
            op.future.set_exception(self._busy(op.within or 0.0))
        ops = [op for op in ops if op not in late]
        if not ops:
            return []
        bounds = [op.deadline for op in ops if op.deadline is not None]
        unsynced = self._synchronous != "NORMAL" and not any(op.durable for op in ops)
        try:
            if unsynced:
                conn.execute("PRAGMA synchronous = NORMAL")
            if bounds:
                conn.execute(f"PRAGMA busy_timeout = {max(int((min(bounds) - now) * 1000), 0)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                if bounds:
                    conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        except sqlite3.Error as exc:
            _fail(ops, self._failure(exc))
            return []
        outcomes: list[tuple[_Write, bool, Any]] = []
        for i, op in enumerate(ops):
            try:
                conn.execute("SAVEPOINT plait_write")
                result = op.context.run(op.fn, conn)
            except BaseException as exc:
                error = self._failure(exc) if isinstance(exc, sqlite3.Error) else exc
                if not conn.in_transaction:  # SQLite rolled back the whole batch
                    op.future.set_exception(error)
                    return [o for o, _, _ in outcomes] + ops[i + 1 :]
                conn.execute("ROLLBACK TO plait_write")
                conn.execute("RELEASE plait_write")
                outcomes.append((op, False, error))
            else:
                conn.execute("RELEASE plait_write")
                outcomes.append((op, True, result))
        try:
            self._commit(conn, not unsynced and self._synchronous != "NORMAL")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.rollback()
            _fail(ops, self._failure(exc))
            return []
        finally:
            if unsynced:
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        settled.extend(outcomes)
        return []

    def _cannot_create(self, exc: OSError) -> PlaitError:
        return self._error(
            f"Cannot create the SQLite database {self.path!r}: {exc}. "
            "Choose a path in a writable directory."
        )

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.max_value_bytes)
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        # A read first, in one snapshot (another process may be creating the file: its stamp
        # and its tables must be seen together), so a foreign file is never write-locked.
        conn.execute("BEGIN")
        try:
            check_ownership(conn, self.path, self._tables, self._error)
        finally:
            conn.rollback()
        # Two processes preparing a new file at once can get "locked" immediately: SQLite skips
        # the busy handler when waiting could deadlock. Retry until the timeout.
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    check_ownership(conn, self.path, self._tables, self._error)
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    for statement in statements(self._schema):
                        conn.execute(statement)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.rollback()
                    raise
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute(f"PRAGMA synchronous={self._synchronous}")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _failure(self, exc: sqlite3.Error) -> PlaitError:
        cause = str(exc)
        if getattr(exc, "sqlite_errorname", "") == "SQLITE_TOOBIG" or "too big" in cause:
            return self._error(
                f"SQLite database {self.path!r} refused a value larger than its limit of "
                f"{self.max_value_bytes:,} bytes ({cause}); nothing was written. Store large "
                "data through a backend (ResultEvictionMiddleware evicts large tool results) "
                f"or raise max_value_bytes (at most {SQLITE_MAX_VALUE_BYTES:,})."
            )
        if "locked" in cause or "busy" in cause:
            advice = (
                f"another process held the write lock for more than {_BUSY_TIMEOUT_S:.0f} s; "
                "retry when it is done"
            )
        elif isinstance(exc, sqlite3.OperationalError) and "malformed" not in cause:
            advice = "check that the file and its directory exist, are writable and have space"
        else:
            advice = (
                "the file is damaged or is not a plait SQLite database; move it aside and "
                "start from a new path, or restore a backup"
            )
        return self._error(f"SQLite database {self.path!r} failed ({cause}): {advice}.")


_QUEUE = object()
"""What :meth:`SQLiteFile._inline` returns when the write must be queued instead."""


@dataclass(slots=True, eq=False)
class _Write:
    """A queued write: its function, its deadline (monotonic) and what it bounds, its outcome
    and the caller's context (``fn`` runs in it)."""

    fn: Callable[[sqlite3.Connection], Any]
    deadline: float | None
    within: float | None
    future: concurrent.futures.Future[Any]
    context: contextvars.Context
    durable: bool = True


def _fail(ops: list[_Write], error: BaseException) -> None:
    for op in ops:
        op.future.set_exception(error)


async def _settle(work: asyncio.Future[T], within: float) -> None:
    """Wait up to ``within`` seconds for ``work`` to finish, however often the waiting task is
    cancelled meanwhile; mark its outcome retrieved (the caller raises its cancellation)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not work.done() and loop.time() < deadline:
        try:
            await asyncio.wait({work}, timeout=deadline - loop.time())
        except asyncio.CancelledError:
            continue
    if work.done() and not work.cancelled():
        work.exception()
