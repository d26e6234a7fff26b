"""SQLiteThreadStore beyond the shared contract: files, processes, locks, damage."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from plait.errors import ThreadConflictError
from plait.messages import AssistantMessage, UserMessage
from plait.stores import SQLiteThreadStore, StoreError, ThreadSnapshot
from plait.stores.sqlite import INLINE_APPEND_BYTES


async def test_threads_persist_across_store_instances_and_close(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    first = SQLiteThreadStore(path)
    await first.append("t", [UserMessage("hello")], expected_version=0, state={"n": 1})
    await first.aclose()
    second = SQLiteThreadStore(path)
    snapshot = await second.load("t")
    assert [m.text for m in snapshot.messages] == ["hello"]
    assert (snapshot.state, snapshot.version) == ({"n": 1}, 1)
    await second.append("t", [AssistantMessage("hi")], expected_version=1)
    await second.aclose()
    assert (await second.load("t")).version == 2  # reopens after close
    await second.aclose()


async def test_creates_parent_directories_and_uses_wal_with_the_documented_schema(
    tmp_path: Path,
) -> None:
    path = tmp_path / "deep" / "er" / "t.db"
    store = SQLiteThreadStore(path)
    assert not path.exists()  # nothing happens until the first call
    await store.append("t", [UserMessage("a"), UserMessage("b")], expected_version=0)
    await store.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = {
            table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            for table in ("threads", "messages")
        }
        rows = conn.execute("SELECT thread_id, seq, id FROM messages ORDER BY seq").fetchall()
    conn.close()
    assert columns == {
        "threads": ["thread_id", "version", "state", "updated_at"],
        "messages": ["thread_id", "seq", "id", "json"],
    }
    assert [(r[0], r[1]) for r in rows] == [("t", 0), ("t", 1)]


async def test_two_store_instances_on_one_file_detect_the_conflict(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    a, b = SQLiteThreadStore(path), SQLiteThreadStore(path)
    await a.append("t", [UserMessage("start")], expected_version=0)
    seen_a, seen_b = await a.load("t"), await b.load("t")
    results = await asyncio.gather(
        a.append("t", [AssistantMessage("from a")], expected_version=seen_a.version),
        b.append("t", [AssistantMessage("from b")], expected_version=seen_b.version),
        return_exceptions=True,
    )
    assert sum(isinstance(r, ThreadConflictError) for r in results) == 1
    assert [r for r in results if isinstance(r, int)] == [2]
    for store in (a, b):
        snapshot = await store.load("t")
        assert snapshot.version == 2
        assert len(snapshot.messages) == 2
    await a.aclose()
    await b.aclose()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from plait.errors import ThreadConflictError
    from plait.messages import UserMessage
    from plait.stores import SQLiteThreadStore

    async def main(path, name, count):
        store = SQLiteThreadStore(path)
        for i in range(count):
            while True:
                snapshot = await store.load("shared")
                try:
                    await store.append(
                        "shared", [UserMessage(f"{name}-{i}")],
                        expected_version=snapshot.version,
                    )
                    break
                except ThreadConflictError:
                    pass
        await store.aclose()

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


async def test_two_processes_appending_to_one_thread_lose_and_duplicate_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    count = 15
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, str(path), name, str(count)
        )
        for name in ("p", "q")
    ]
    for proc in procs:
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    store = SQLiteThreadStore(path)
    snapshot = await store.load("shared")
    await store.aclose()
    texts = [m.text for m in snapshot.messages]
    assert snapshot.version == 2 * count
    assert sorted(texts) == sorted(f"{n}-{i}" for n in "pq" for i in range(count))
    for name in "pq":
        assert [t for t in texts if t[0] == name] == [f"{name}-{i}" for i in range(count)]


async def test_waiting_on_another_writer_does_not_block_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.append("t", [UserMessage("a")], expected_version=0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    append = asyncio.create_task(store.append("t", [UserMessage("b")], expected_version=1))
    ticks = 0
    for _ in range(20):
        await asyncio.sleep(0.005)
        ticks += 1
    assert not append.done()
    assert ticks == 20
    holder.rollback()
    holder.close()
    assert await append == 2
    await store.aclose()


async def test_a_file_that_is_not_a_database_gives_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    path.write_bytes(b"this is not sqlite, just some text that is long enough " * 40)
    store = SQLiteThreadStore(path)  # no I/O yet
    with pytest.raises(StoreError) as caught:
        await store.load("t")
    message = str(caught.value)
    assert str(path) in message
    assert "move it aside" in message
    with pytest.raises(StoreError):
        await store.append("t", [UserMessage("x")], expected_version=0)
    await store.aclose()


async def test_a_damaged_message_row_gives_a_store_error_naming_the_thread(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path)
    await store.append("t", [UserMessage("ok")], expected_version=0)
    with sqlite3.connect(path) as conn:
        conn.execute('UPDATE messages SET json = \'{"role": "user"}\'')
    conn.close()
    with pytest.raises(StoreError, match=r"(?s)Thread 't'.*delete the thread or restore"):
        await store.load("t")
    await store.aclose()


async def test_an_unwritable_location_gives_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    store = SQLiteThreadStore(blocker / "t.db")
    with pytest.raises(StoreError, match="writable directory"):
        await store.load("t")


async def test_in_memory_database_works_for_one_store(tmp_path: Path) -> None:
    store = SQLiteThreadStore(":memory:")
    await store.append("t", [UserMessage("x")], expected_version=0)
    assert (await store.load("t")).version == 1
    assert await SQLiteThreadStore(":memory:").load("t") == ThreadSnapshot("t")
    await store.aclose()


async def test_a_database_of_another_application_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE threads (id INTEGER PRIMARY KEY, title TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    store = SQLiteThreadStore(path)
    with pytest.raises(StoreError, match=r"not a plait SQLite database.*tables: threads"):
        await store.load("t")
    with pytest.raises(StoreError, match="not a plait SQLite database"):
        await store.append("t", [UserMessage("hi")], expected_version=0)
    await store.aclose()
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["app.db"]


async def test_a_message_over_the_value_limit_is_a_store_error_not_damage(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.db", max_value_bytes=10_000)
    await store.append("t", [UserMessage("small")], expected_version=0)
    with pytest.raises(StoreError) as raised:
        await store.append("t", [UserMessage("x" * 20_000)], expected_version=1)
    assert "larger than its limit of 10,000 bytes" in str(raised.value)
    assert "damaged" not in str(raised.value)
    snapshot = await store.load("t")
    assert ([m.text for m in snapshot.messages], snapshot.version) == (["small"], 1)
    await store.aclose()


async def test_a_cancelled_append_raises_only_once_its_write_has_landed(tmp_path: Path) -> None:
    """The write runs in a worker thread, which cancelling cannot stop; ``append`` raises
    ``CancelledError`` only after it committed, so another instance (another process) sees it
    at once and the caller's next write is not a conflict (issue 11 §2). The messages are
    larger than ``INLINE_APPEND_BYTES``, so the write cannot commit on the event loop (where
    no cancellation could land while it runs)."""
    writer = SQLiteThreadStore(tmp_path / "t.db")
    reader = SQLiteThreadStore(tmp_path / "t.db")
    pad = "x" * INLINE_APPEND_BYTES
    try:
        for version in range(20):
            task = asyncio.create_task(
                writer.append("t", [UserMessage(f"m{version}{pad}")], expected_version=version)
            )
            await asyncio.sleep(0)  # the write is now in its worker thread
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert (await reader.load("t")).version == version + 1
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_a_turn_cancelled_while_taking_its_lease_leaves_the_thread_free(
    tmp_path: Path,
) -> None:
    """Taking the lease is a settled write: a cancellation that arrives meanwhile surfaces
    only after the row is in. The lease must then be freed, not left to expire (``lease_ttl``)
    while the next turn on the thread waits for it. (The first take opens the connection in a
    worker thread; the later ones commit on the event loop, and the cancellation lands in the
    body: the release must hold either way.)"""
    store = SQLiteThreadStore(tmp_path / "t.db", lease_wait=0)
    other = SQLiteThreadStore(tmp_path / "t.db", lease_wait=0)

    async def turn() -> None:
        async with store.lease("t"):
            await asyncio.sleep(0)

    try:
        for _ in range(20):
            task = asyncio.create_task(turn())
            await asyncio.sleep(0)  # the lease's write is now in its worker thread
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            async with other.lease("t"):  # ThreadBusyError if the cancelled take kept it
                pass
    finally:
        await store.aclose()
        await other.aclose()


async def test_releasing_a_lease_behind_a_busy_write_lock_gives_up_within_its_bound(
    tmp_path: Path,
) -> None:
    """Regression: the release waited out SQLite's 30 s busy timeout behind another process's
    write lock, not the documented ``LEASE_RELEASE_S`` (5 s). Another connection holds the lock
    until the turn's end returns or 20 s pass; the end must return first (the lease is left to
    expire, its row still there)."""
    path = tmp_path / "t.db"
    store = SQLiteThreadStore(path, lease_ttl=60)
    ended = threading.Event()
    locked = threading.Event()

    def hold_the_write_lock() -> bool:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        gave_up = not ended.wait(20)
        conn.execute("ROLLBACK")
        conn.close()
        return gave_up

    try:
        async with store.lease("t"):
            holder = asyncio.ensure_future(asyncio.to_thread(hold_the_write_lock))
            await asyncio.to_thread(locked.wait)
        ended.set()
        assert not await holder  # the turn's end returned while the lock was still held
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM leases").fetchone() == (1,)
        conn.close()
    finally:
        ended.set()
        await store.aclose()
