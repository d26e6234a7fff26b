"""``SQLiteThreadStore`` reads the thread in the transaction that takes its lease, and the turn's
``load`` returns that snapshot: one transaction (and one worker-thread hop) fewer a turn. The
snapshot is never stale through this store, never outlives the lease, and correctness never
depends on it (a write from elsewhere still conflicts)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from plait import Agent
from plait.errors import ThreadConflictError
from plait.messages import UserMessage
from plait.models.scripted import ScriptedModel
from plait.stores.sqlite import SQLiteThreadStore


def transactions(store: SQLiteThreadStore) -> list[str]:
    """Every ``BEGIN`` the store's connection runs from now on (sqlite3's trace callback)."""
    seen: list[str] = []
    conn: sqlite3.Connection = store._db._connect()
    conn.set_trace_callback(lambda sql: seen.append(sql) if sql.startswith("BEGIN") else None)
    return seen


async def test_a_turn_runs_four_transactions_not_five(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.sqlite3")
    agent = Agent(ScriptedModel(["one", "two"]), store=store)
    await agent.run("warm", thread_id="t")  # the file is created and stamped
    seen = transactions(store)
    result = await agent.run("again", thread_id="t")
    assert result.output == "two"
    # lease + load, the input, the answer, the release: all writes, no separate read
    assert seen == ["BEGIN IMMEDIATE"] * 4
    assert [m.text for m in (await store.load("t")).messages] == ["warm", "one", "again", "two"]


async def test_load_under_the_lease_returns_what_the_lease_read(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.sqlite3")
    version = await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        seen = transactions(store)
        snapshot = await store.load("t")
        assert seen == []  # no transaction: the lease's own read
        assert snapshot.version == version and [m.text for m in snapshot.messages] == ["a"]
        again = await store.load("t")  # returned once: the next load reads
        assert seen == ["BEGIN"] and again.version == version


async def test_an_append_through_the_store_drops_the_prefetched_snapshot(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.sqlite3")
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        await store.append("t", [UserMessage("b")], expected_version=1)
        snapshot = await store.load("t")
    assert snapshot.version == 2 and [m.text for m in snapshot.messages] == ["a", "b"]


async def test_a_snapshot_left_unread_ends_with_its_lease(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.sqlite3")
    other = SQLiteThreadStore(tmp_path / "t.sqlite3")
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        pass  # a turn that failed before it loaded
    await other.append("t", [UserMessage("b")], expected_version=1)
    snapshot = await store.load("t")
    assert snapshot.version == 2 and [m.text for m in snapshot.messages] == ["a", "b"]


async def test_a_write_from_elsewhere_still_conflicts(tmp_path: Path) -> None:
    store = SQLiteThreadStore(tmp_path / "t.sqlite3")
    other = SQLiteThreadStore(tmp_path / "t.sqlite3")  # a writer that ignores the lease
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        await other.append("t", [UserMessage("b")], expected_version=1)
        snapshot = await store.load("t")  # read as the lease was taken, before that write
        assert snapshot.version == 1
        with pytest.raises(ThreadConflictError):
            await store.append("t", [UserMessage("c")], expected_version=snapshot.version)
    final = await store.load("t")
    assert [m.text for m in final.messages] == ["a", "b"]  # nothing lost, nothing doubled
