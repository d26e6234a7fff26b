"""SQLiteFile's ``inline`` writes: a short write commits on the event loop itself when nothing
has to wait for it (no worker-thread round trip), and is queued as any write otherwise: the
connection not yet open, another write running or queued, another connection holding the write
lock, or (durable writes) disk syncs slower than ``INLINE_SYNC_S``. ``durable=False`` commits
without a disk sync, alone or in a batch of such writes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_backends_sqlite_batch import blocked_write  # type: ignore[import-not-found]  # a sibling module

from plait.backends import BackendError, sqlite_file
from plait.backends.sqlite_file import SQLiteFile

SCHEMA = "CREATE TABLE IF NOT EXISTS rows (n INTEGER)"


def insert(n: int, threads: list[int]) -> Callable[[sqlite3.Connection], int]:
    """A write of row ``n`` that notes the thread it ran on."""

    def fn(conn: sqlite3.Connection) -> int:
        threads.append(threading.get_ident())
        conn.execute("INSERT INTO rows (n) VALUES (?)", (n,))
        return n

    return fn


def rows(path: Path) -> list[int]:
    with sqlite3.connect(path) as conn:
        found = [int(n) for (n,) in conn.execute("SELECT n FROM rows ORDER BY rowid")]
    conn.close()
    return found


async def opened(path: Path) -> SQLiteFile:
    db = SQLiteFile(path, schema=SCHEMA, error=BackendError)
    await db.write(lambda conn: None, durable=False)  # opens the connection; syncs nothing
    return db


async def test_a_short_write_commits_on_the_event_loop_once_the_file_is_open(
    tmp_path: Path,
) -> None:
    db = SQLiteFile(tmp_path / "i.db", schema=SCHEMA, error=BackendError)
    ran: list[int] = []
    loop_thread = threading.get_ident()
    assert await db.write(insert(1, ran), inline=True, durable=False) == 1  # opens the file
    assert await db.write(insert(2, ran), inline=True, durable=False) == 2
    assert ran[0] != loop_thread  # opening a file is disk I/O: never on the loop
    assert ran[1] == loop_thread
    assert rows(tmp_path / "i.db") == [1, 2]  # committed: another connection sees it
    db.close()


async def test_an_unsynced_write_restores_the_files_synchronous_setting(tmp_path: Path) -> None:
    db = await opened(tmp_path / "i.db")
    assert db._conn is not None
    statements: list[str] = []
    db._conn.set_trace_callback(statements.append)
    await db.write(insert(1, []), inline=True, durable=False)
    db._conn.set_trace_callback(None)
    assert statements.index("PRAGMA synchronous = NORMAL") < statements.index("BEGIN IMMEDIATE")
    assert statements[-1] == "PRAGMA synchronous = FULL"
    assert db._conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    db.close()


async def test_a_durable_write_runs_inline_only_while_syncs_are_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = await opened(tmp_path / "i.db")
    loop_thread = threading.get_ident()
    ran: list[int] = []
    # No synced commit measured yet: queued, and its sync measured.
    await db.write(insert(1, ran), inline=True)
    assert ran[-1] != loop_thread
    assert db._sync_s == db._sync_s  # measured (not NaN)
    monkeypatch.setattr(sqlite_file, "INLINE_SYNC_S", 10.0)
    await db.write(insert(2, ran), inline=True)
    assert ran[-1] == loop_thread
    monkeypatch.setattr(sqlite_file, "INLINE_SYNC_S", 0.0)  # as if the disk were slow
    await db.write(insert(3, ran), inline=True)
    assert ran[-1] != loop_thread
    # An unsynced write does not wait for the disk: inline whatever the syncs take.
    await db.write(insert(4, ran), inline=True, durable=False)
    assert ran[-1] == loop_thread
    assert rows(tmp_path / "i.db") == [1, 2, 3, 4]
    db.close()


async def test_a_slow_sync_moves_durable_writes_off_the_loop(tmp_path: Path) -> None:
    db = await opened(tmp_path / "i.db")
    db._sync_s = sqlite_file.INLINE_SYNC_S / 2
    ran: list[int] = []
    loop_thread = threading.get_ident()
    await db.write(insert(1, ran), inline=True)
    assert ran[-1] == loop_thread
    db._sync_s = sqlite_file.INLINE_SYNC_S * 20  # the average after a sync of a slow disk
    await db.write(insert(2, ran), inline=True)
    assert ran[-1] != loop_thread
    db.close()


async def test_an_inline_write_queues_behind_a_running_one_and_keeps_the_order(
    tmp_path: Path,
) -> None:
    db = await opened(tmp_path / "i.db")
    ran: list[int] = []
    first, release = await blocked_write(db)
    second = asyncio.create_task(db.write(insert(1, ran), inline=True, durable=False))
    await asyncio.sleep(0.05)
    assert not second.done()  # the connection is busy: queued, the loop not blocked
    release.set()
    assert (await first, await second) == (0, 1)
    assert ran[0] != threading.get_ident()
    assert rows(tmp_path / "i.db") == [0, 1]
    db.close()


async def test_a_write_lock_held_elsewhere_queues_the_write_without_blocking_the_loop(
    tmp_path: Path,
) -> None:
    """Another connection (another process) holds the write lock: the inline attempt gets
    SQLITE_BUSY at once and the write waits in the worker thread, while the loop runs on."""
    path = tmp_path / "i.db"
    db = await opened(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    ran: list[int] = []
    write = asyncio.create_task(db.write(insert(1, ran), inline=True, durable=False))
    ticks = 0
    for _ in range(10):
        await asyncio.sleep(0.01)
        ticks += 1
    assert ticks == 10 and not write.done()
    other.execute("COMMIT")
    other.close()
    assert await write == 1
    assert ran[0] != threading.get_ident()
    assert rows(path) == [1]
    db.close()


async def test_an_inline_write_that_raises_rolls_back_and_raises_unchanged(
    tmp_path: Path,
) -> None:
    db = await opened(tmp_path / "i.db")

    def half_then_fail(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO rows (n) VALUES (7)")
        raise LookupError("no such thing")

    with pytest.raises(LookupError, match="no such thing"):
        await db.write(half_then_fail, inline=True, durable=False)

    def bad_sql(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(BackendError, match="no such table"):
        await db.write(bad_sql, inline=True, durable=False)
    assert db._conn is not None and not db._conn.in_transaction
    assert db._conn.execute("PRAGMA synchronous").fetchone() == (2,)
    assert rows(tmp_path / "i.db") == []
    assert await db.write(insert(8, []), inline=True, durable=False) == 8  # still usable
    db.close()


async def test_a_batch_of_only_unsynced_writes_commits_without_a_sync(tmp_path: Path) -> None:
    """Queued behind a running write, unsynced writes batch together unsynced; one durable
    write in the batch makes it sync."""
    for durable_second, wanted in ((False, "NORMAL"), (True, None)):
        path = tmp_path / f"b-{durable_second}.db"
        db = await opened(path)
        assert db._conn is not None
        statements: list[str] = []
        started, release = threading.Event(), threading.Event()

        def hold(
            conn: sqlite3.Connection,
            started: threading.Event = started,
            release: threading.Event = release,
        ) -> None:
            started.set()
            assert release.wait(30)

        first = asyncio.create_task(db.write(hold))
        assert await asyncio.to_thread(started.wait, 30)
        db._conn.set_trace_callback(statements.append)
        writes = [
            asyncio.create_task(db.write(insert(1, []), durable=False)),
            asyncio.create_task(db.write(insert(2, []), durable=durable_second)),
        ]
        await asyncio.sleep(0.05)
        release.set()
        await first
        assert [await w for w in writes] == [1, 2]
        db._conn.set_trace_callback(None)
        pragmas = [s for s in statements if s.startswith("PRAGMA synchronous")]
        if wanted is None:
            assert pragmas == []
        else:
            assert pragmas == [f"PRAGMA synchronous = {wanted}", "PRAGMA synchronous = FULL"]
        assert rows(path) == [1, 2]
        db.close()


async def test_a_queued_write_returns_with_the_connection_free(tmp_path: Path) -> None:
    """The drain settles its writes' futures only after it let the connection go, so the
    caller's next short write (a turn's lease release after its append) commits inline."""
    db = SQLiteFile(tmp_path / "i.db", schema=SCHEMA, error=BackendError)
    ran: list[int] = []
    for n in range(20):
        await db.write(insert(n, ran))  # queued (not inline)
        assert not db._lock.locked()
        await db.write(insert(100 + n, ran), inline=True, durable=False)
        assert ran[-1] == threading.get_ident()
    db.close()
