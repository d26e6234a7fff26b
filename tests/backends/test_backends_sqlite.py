"""SQLiteBackend: one file, pages read inside SQLite, transactions that roll back."""

from __future__ import annotations

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
