"""``PostgresThreadStore`` reads the thread on the connection that takes its lease, and the
turn's ``load`` returns that snapshot: one database call fewer a turn (4, not 5). The snapshot
is never stale through this store, never outlives the lease, and correctness never depends on
it (a write from elsewhere still conflicts). A retried take (its connection lost after the
lease row was written) takes the lease again instead of waiting for its own lease to expire."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from postgres_server import fresh_schema, postgres_url

from plait import Agent
from plait.backends.postgres_db import PostgresDatabase
from plait.errors import StoreError, ThreadConflictError
from plait.messages import UserMessage
from plait.models.scripted import ScriptedModel
from plait.stores.postgres import PostgresThreadStore


@pytest.fixture
async def store() -> AsyncIterator[PostgresThreadStore]:
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresThreadStore(postgres_url(), schema=schema, lease_wait=0, lease_ttl=5)
        await pg.setup()
        yield pg
        await pg.aclose()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The operation of each database call from now on."""
    seen: list[str] = []
    real = PostgresDatabase.run

    async def counted(
        self: PostgresDatabase, fn: Callable[[Any], Awaitable[Any]], **kw: Any
    ) -> Any:
        seen.append(str(kw.get("operation")))
        return await real(self, fn, **kw)

    monkeypatch.setattr(PostgresDatabase, "run", counted)
    return seen


async def test_a_turn_makes_four_calls_not_five(
    store: PostgresThreadStore, calls: list[str]
) -> None:
    agent = Agent(ScriptedModel(["one", "two"]), store=store)
    await agent.run("warm", thread_id="t")
    calls.clear()
    result = await agent.run("again", thread_id="t")
    assert result.output == "two"
    assert calls == ["lease acquire", "append", "append", "lease release"]
    assert [m.text for m in (await store.load("t")).messages] == ["warm", "one", "again", "two"]


async def test_load_under_the_lease_returns_what_the_lease_read(
    store: PostgresThreadStore, calls: list[str]
) -> None:
    version = await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        calls.clear()
        snapshot = await store.load("t")
        assert calls == []  # the lease's own read
        assert snapshot.version == version and [m.text for m in snapshot.messages] == ["a"]
        again = await store.load("t")  # returned once: the next load reads
        assert calls == ["load"] and again.version == version


async def test_an_append_or_a_delete_drops_the_prefetched_snapshot(
    store: PostgresThreadStore,
) -> None:
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        await store.append("t", [UserMessage("b")], expected_version=1)
        snapshot = await store.load("t")
    assert snapshot.version == 2 and [m.text for m in snapshot.messages] == ["a", "b"]
    async with store.lease("t"):
        assert await store.delete("t")
        assert (await store.load("t")).version == 0


async def test_a_snapshot_left_unread_ends_with_its_lease(store: PostgresThreadStore) -> None:
    other = PostgresThreadStore(store.db)
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        pass  # a turn that failed before it loaded
    await other.append("t", [UserMessage("b")], expected_version=1)
    snapshot = await store.load("t")
    assert snapshot.version == 2 and [m.text for m in snapshot.messages] == ["a", "b"]


async def test_a_write_from_elsewhere_still_conflicts(store: PostgresThreadStore) -> None:
    other = PostgresThreadStore(store.db)  # a writer that ignores the lease
    await store.append("t", [UserMessage("a")], expected_version=0)
    async with store.lease("t"):
        await other.append("t", [UserMessage("b")], expected_version=1)
        snapshot = await store.load("t")  # read as the lease was taken, before that write
        assert snapshot.version == 1
        with pytest.raises(ThreadConflictError):
            await store.append("t", [UserMessage("c")], expected_version=snapshot.version)
    final = await store.load("t")
    assert [m.text for m in final.messages] == ["a", "b"]  # nothing lost, nothing doubled


async def test_a_take_run_again_by_its_owner_takes_the_lease_again(
    store: PostgresThreadStore,
) -> None:
    async def owner_of_t(conn: Any) -> str:
        sql = store.db.sql("SELECT owner FROM {s}.plait_leases WHERE thread_id = 't'")
        rows = await (await conn.execute(sql)).fetchall()
        assert len(rows) == 1
        return str(rows[0][0])

    def take(owner: str) -> Callable[[Any], Awaitable[str | None]]:
        # the store's own statement, as a retry after a lost acknowledgement sends it
        async def run(conn: Any) -> str | None:
            row = await (await conn.execute(store._q_take, ("t", owner, 5))).fetchone()
            return None if row is None else str(row[0])

        return run

    async with store.lease("t"):
        owner = await store.db.run(owner_of_t, error=StoreError, operation="read")
        assert await store.db.run(take(owner), error=StoreError, operation="take") == owner
        # anyone else still waits for it
        assert await store.db.run(take("other"), error=StoreError, operation="take") is None
    async with store.lease("t"):  # and the lease was released as usual
        pass
