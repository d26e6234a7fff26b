"""SQLiteBackend: one file, pages read inside SQLite, transactions that roll back."""

from __future__ import annotations

import asyncio
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from plait.backends import BackendError, SQLiteBackend
from plait.backends.sqlite import SQLiteFile


async def test_a_page_of_a_ten_megabyte_blob_does_not_load_the_blob(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "b.db")
    size = 10 * 1024 * 1024
    await backend.write("big", "é" * (size - 3) + "end")
    tracemalloc.start()
    try:
        page = await backend.read("big", size - 3, 100)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    await backend.aclose()
    assert page == "end"
    assert peak < 1024 * 1024


async def test_blobs_persist_in_one_file_with_the_documented_schema(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "b.db"
    first = SQLiteBackend(path)
    await first.write("a/b", "kept")
    await first.write("nul", "with\x00nul")
    await first.aclose()
    second = SQLiteBackend(path)
    assert await second.read("a/b") == "kept"
    assert await second.read("nul", 4) == "\x00nul"
    await second.aclose()
    with sqlite3.connect(path) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(blobs)")]
        kinds = dict(conn.execute("SELECT path, typeof(content) FROM blobs").fetchall())
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert columns == ["path", "content", "updated_at"]
    assert kinds == {"a/b": "text", "nul": "blob"}
    assert mode == "wal"


async def test_two_instances_on_one_file_see_each_others_writes(tmp_path: Path) -> None:
    a, b = SQLiteBackend(tmp_path / "b.db"), SQLiteBackend(tmp_path / "b.db")
    await a.write("from-a", "1")
    await b.write("from-b", "2")
    assert await a.ls() == await b.ls() == ["from-a", "from-b"]
    await a.aclose()
    await b.aclose()


async def test_a_file_that_is_not_a_database_gives_a_backend_error(tmp_path: Path) -> None:
    path = tmp_path / "b.db"
    path.write_bytes(b"definitely not a database " * 100)
    backend = SQLiteBackend(path)
    with pytest.raises(BackendError, match="move it aside"):
        await backend.write("x", "y")
    with pytest.raises(BackendError, match=str(path)):
        await backend.ls()
    await backend.aclose()


async def test_a_failing_write_transaction_rolls_back_and_raises_unchanged(
    tmp_path: Path,
) -> None:
    backend = SQLiteBackend(tmp_path / "b.db")
    await backend.write("f", "old")
    await backend.aclose()
    db = SQLiteFile(tmp_path / "b.db", schema="", error=BackendError)

    def half_done(conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE blobs SET content = 'new' WHERE path = 'f'")
        raise KeyError("failed after the update")

    with pytest.raises(KeyError, match="failed after the update"):
        await db.write(half_done)
    db.close()
    assert await backend.read("f") == "old"
    await backend.aclose()


def file_state(path: Path) -> tuple[bytes, list[str]]:
    """The file's bytes and the names beside it (a WAL switch would add -wal/-shm files)."""
    return path.read_bytes(), sorted(p.name for p in path.parent.iterdir())


def make_db(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


FOREIGN_FILES = {
    "another application's tables": ("CREATE TABLE users (id INTEGER, name TEXT)",),
    "a blobs table with other columns": ("CREATE TABLE blobs (path TEXT, data BLOB)",),
    "another application id": (
        "PRAGMA application_id = 1234",
        "CREATE TABLE blobs (path TEXT PRIMARY KEY, content TEXT, updated_at REAL)",
    ),
    "plait's old tables beside another application's": (
        "CREATE TABLE blobs (path TEXT PRIMARY KEY, content TEXT, updated_at REAL)",
        "CREATE TABLE users (id INTEGER, name TEXT)",
    ),
    "a plait stamp on a table of other columns": (
        "PRAGMA application_id = 1885692265",
        "CREATE TABLE blobs (path TEXT, data BLOB)",
    ),
}


@pytest.mark.parametrize("statements", FOREIGN_FILES.values(), ids=FOREIGN_FILES.keys())
async def test_a_sqlite_file_that_is_not_plaits_is_refused_unchanged(
    tmp_path: Path, statements: tuple[str, ...]
) -> None:
    path = tmp_path / "other.db"
    make_db(path, *statements)
    before = file_state(path)
    backend = SQLiteBackend(path)
    with pytest.raises(BackendError, match=r"is not a plait SQLite database.*left it unchanged"):
        await backend.write("a", "x")
    with pytest.raises(BackendError, match="is not a plait SQLite database"):
        await backend.read("a")
    await backend.aclose()
    assert file_state(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


OLD_BLOB_FILE = (
    "CREATE TABLE blobs (path TEXT PRIMARY KEY, content TEXT NOT NULL, updated_at REAL NOT NULL)",
    "INSERT INTO blobs VALUES ('a', 'old text', 0)",
)


@pytest.mark.parametrize("first", ["backend", "thread store"])
async def test_a_plait_file_from_before_the_stamp_is_accepted_and_stamped(
    tmp_path: Path, first: str
) -> None:
    """Opened first by the backend that made it, or by a thread store (regression: an
    unstamped blob-only file was refused by the thread store, which knew only its tables)."""
    from plait.messages import UserMessage
    from plait.stores import SQLiteThreadStore

    path = tmp_path / "old.db"
    make_db(path, *OLD_BLOB_FILE)
    if first == "thread store":
        store = SQLiteThreadStore(path)
        await store.append("t", [UserMessage("hi")], expected_version=0)
        await store.aclose()
    backend = SQLiteBackend(path)
    assert await backend.read("a") == "old text"
    await backend.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == 0x706C6169
    conn.close()


async def test_a_store_and_a_backend_can_share_one_new_file(tmp_path: Path) -> None:
    from plait.messages import UserMessage
    from plait.stores import SQLiteThreadStore

    path = tmp_path / "shared.db"
    backend, store = SQLiteBackend(path), SQLiteThreadStore(path)
    await backend.write("a", "blob")
    await store.append("t", [UserMessage("hi")], expected_version=0)
    assert await backend.read("a") == "blob"
    assert [m.text for m in (await store.load("t")).messages] == ["hi"]
    await backend.aclose()
    await store.aclose()


async def test_a_blob_over_the_value_limit_says_so_and_keeps_the_old_one(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "b.db", max_value_bytes=1000)
    await backend.write("a", "old")
    with pytest.raises(BackendError) as raised:
        await backend.write("a", "x" * 2000)
    message = str(raised.value)
    assert "larger than its limit of 1,000 bytes" in message
    assert "damaged" not in message
    assert await backend.read("a") == "old"
    await backend.aclose()


@pytest.mark.parametrize("limit", [0, 2_000_000_000])
def test_a_value_limit_outside_sqlites_range_is_refused(tmp_path: Path, limit: int) -> None:
    with pytest.raises(BackendError, match="max_value_bytes must be between 1 and"):
        SQLiteBackend(tmp_path / "b.db", max_value_bytes=limit)


OLD_THREAD_TABLES = (
    "CREATE TABLE threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
    "state TEXT NOT NULL, updated_at REAL NOT NULL)",
    "CREATE TABLE messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, "
    "json TEXT NOT NULL, PRIMARY KEY (thread_id, seq))",
)


async def test_a_thread_file_from_before_the_stamp_opened_by_a_blob_backend_is_plaits(
    tmp_path: Path,
) -> None:
    from plait.stores import SQLiteThreadStore

    path = tmp_path / "old.db"
    make_db(path, *OLD_THREAD_TABLES, "INSERT INTO threads VALUES ('t', 1, '{}', 0)")
    backend = SQLiteBackend(path)
    await backend.write("a", "blob")
    assert await backend.read("a") == "blob"
    await backend.aclose()
    store = SQLiteThreadStore(path)
    assert (await store.load("t")).version == 1
    await store.aclose()


async def test_sqlite_names_the_lone_surrogate(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "blobs.db")
    try:
        with pytest.raises(BackendError, match="lone surrogate"):
            await backend.write("s/\udc80name", "v")
        with pytest.raises(BackendError, match="lone surrogate"):
            await backend.ls("s/\udc80")
    finally:
        await backend.aclose()


async def test_two_files_opening_one_new_database_at_once_both_see_it_as_plaits(
    tmp_path: Path,
) -> None:
    """The ownership check reads the stamp and the tables in one snapshot: a file another
    instance is creating at that moment is never taken for a foreign one."""
    schema = "CREATE TABLE IF NOT EXISTS rows (n INTEGER)"
    for round_ in range(60):
        path = tmp_path / f"r{round_}.db"
        files = [SQLiteFile(path, schema=schema, error=BackendError) for _ in range(3)]

        def add(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO rows (n) VALUES (1)")

        await asyncio.gather(*(f.write(add) for f in files))
        for f in files:
            f.close()
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM rows").fetchone() == (3,)
        conn.close()
