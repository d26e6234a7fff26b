"""SQLiteFile's group commit: writes queued behind a running one commit together, each in a
savepoint of its own, in order; one that raises loses only its own work; a write whose
``within`` passes while it waits is refused with nothing written."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.backends import BackendError
from plait.backends.sqlite_file import SQLiteFile

SCHEMA = "CREATE TABLE IF NOT EXISTS rows (n INTEGER)"


def insert(n: int) -> Callable[[sqlite3.Connection], int]:
    def fn(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO rows (n) VALUES (?)", (n,))
        return n

    return fn


async def queued(db: SQLiteFile, count: int) -> None:
    """Wait (bounded) until ``count`` writes wait in the queue."""
    for _ in range(2_000):
        with db._queue_lock:
            if len(db._queue) >= count:
                return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{count} writes never queued")


async def blocked_write(db: SQLiteFile) -> tuple[asyncio.Task[int], threading.Event]:
    """A write that holds the connection until the returned event is set."""
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> int:
        started.set()
        assert release.wait(30)
        conn.execute("INSERT INTO rows (n) VALUES (0)")
        return 0

    task = asyncio.create_task(db.write(hold))
    assert await asyncio.to_thread(started.wait, 30)
    return task, release


async def test_queued_writes_commit_in_one_transaction_in_order(tmp_path: Path) -> None:
    db = SQLiteFile(tmp_path / "b.db", schema=SCHEMA, error=BackendError)
    await db.write(insert(-1))  # opens the connection
    statements: list[str] = []
    assert db._conn is not None
    db._conn.set_trace_callback(statements.append)
    first, release = await blocked_write(db)
    rest = [asyncio.create_task(db.write(insert(n))) for n in (1, 2, 3)]
    await queued(db, 3)
    release.set()
    assert await first == 0
    assert await asyncio.gather(*rest) == [1, 2, 3]
    assert [s for s in statements if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"] * 2
    ordered = await db.read(
        lambda c: [r[0] for r in c.execute("SELECT n FROM rows ORDER BY rowid")]
    )
    assert ordered == [-1, 0, 1, 2, 3]
    db.close()


async def test_a_write_that_raises_in_a_batch_loses_only_its_own_work(tmp_path: Path) -> None:
    db = SQLiteFile(tmp_path / "b.db", schema=SCHEMA, error=BackendError)

    def half_done(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO rows (n) VALUES (99)")
        raise KeyError("failed after the insert")

    first, release = await blocked_write(db)
    rest = [
        asyncio.create_task(db.write(insert(1))),
        asyncio.create_task(db.write(half_done)),
        asyncio.create_task(db.write(insert(3))),
    ]
    await queued(db, 3)
    release.set()
    await first
    outcomes = await asyncio.gather(*rest, return_exceptions=True)
    assert outcomes[0] == 1 and outcomes[2] == 3
    assert isinstance(outcomes[1], KeyError)  # unchanged, as a write alone raises it
    rows = await db.read(lambda c: sorted(r[0] for r in c.execute("SELECT n FROM rows")))
    assert rows == [0, 1, 3]
    db.close()


async def test_a_sqlite_error_in_a_batch_is_the_files_error_for_that_write_only(
    tmp_path: Path,
) -> None:
    db = SQLiteFile(tmp_path / "b.db", schema=SCHEMA, error=BackendError)
    first, release = await blocked_write(db)
    bad = asyncio.create_task(db.write(lambda c: c.execute("INSERT INTO missing VALUES (1)")))
    good = asyncio.create_task(db.write(insert(7)))
    await queued(db, 2)
    release.set()
    await first
    with pytest.raises(BackendError, match="no such table"):
        await bad
    assert await good == 7
    db.close()


async def test_a_write_whose_deadline_passes_in_the_queue_writes_nothing(tmp_path: Path) -> None:
    db = SQLiteFile(tmp_path / "b.db", schema=SCHEMA, error=BackendError)
    first, release = await blocked_write(db)
    with pytest.raises(BackendError, match=r"busy with another call for 0\.05 s; nothing was"):
        await db.write(insert(5), within=0.05)
    release.set()
    await first
    rows = await db.read(lambda c: [r[0] for r in c.execute("SELECT n FROM rows")])
    assert rows == [0]
    db.close()


async def test_a_cancelled_queued_write_still_lands_before_the_cancellation(
    tmp_path: Path,
) -> None:
    db = SQLiteFile(tmp_path / "b.db", schema=SCHEMA, error=BackendError)
    first, release = await blocked_write(db)
    task = asyncio.create_task(db.write(insert(4)))
    await queued(db, 1)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows = await db.read(lambda c: sorted(r[0] for r in c.execute("SELECT n FROM rows")))
    assert rows == [0, 4]  # the caller knows it landed: the next writer sees it
    await first
    db.close()
