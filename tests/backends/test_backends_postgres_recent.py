"""The pool's check before a hand-out: skipped for a connection just back in the pool, made
again for every connection once a call lost its connection (the server killed them all), so a
killed pool costs a failed statement, never a failed or a stalled call. On a throwaway cluster
of this module's own (it kills connections)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from postgres_server import ThrowawayCluster, terminate_other_backends, throwaway_cluster

from plait.backends.postgres_db import PostgresDatabase
from plait.errors import StoreError


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    with throwaway_cluster() as started:
        yield started


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each connection the pool's check sent its round trip on."""
    seen: list[object] = []
    real = PostgresDatabase.check_connection

    async def counted(conn: psycopg.AsyncConnection[Any]) -> None:
        seen.append(conn)
        await real(conn)

    monkeypatch.setattr(PostgresDatabase, "check_connection", staticmethod(counted))
    return seen


async def backend_pid(db: PostgresDatabase, hold: float = 0.0) -> int:
    async def select(conn: psycopg.AsyncConnection[Any]) -> int:
        row = await (
            await conn.execute("SELECT pg_backend_pid(), pg_sleep(%s)", (hold,))
        ).fetchone()
        assert row is not None
        return int(row[0])

    return await db.run(select, error=StoreError, single=True)


async def test_a_connection_just_back_in_the_pool_is_not_checked_again(
    cluster: ThrowawayCluster, checks: list[object]
) -> None:
    db = PostgresDatabase(cluster.url)
    try:
        pids = {await backend_pid(db) for _ in range(20)}
        assert len(pids) == 1  # one connection, used 20 times
        assert len(checks) <= 1  # its first hand-out at most
        db._recent.within = 0.0  # every hand-out is now "idle too long"
        for _ in range(5):
            await backend_pid(db)
        assert len(checks) >= 5
    finally:
        await db.aclose()


async def test_a_pool_the_server_killed_costs_no_call(
    cluster: ThrowawayCluster, checks: list[object]
) -> None:
    db = PostgresDatabase(cluster.url, max_size=5)
    try:
        # five connections in the pool, each just back from a call
        before = set(await asyncio.gather(*(backend_pid(db, 0.2) for _ in range(5))))
        assert len(before) == 5
        checks.clear()
        assert await terminate_other_backends(cluster.url) >= 5
        # one call after another, each succeeds: the first meets a dead connection; its retry
        # would meet another one unchecked, or (checked one by one) sleep the pool's backoff
        # of 1, 2, 4 s between the dead ones (7-15 s here), but the pool's idle connections
        # are all checked at once and the dead ones dropped
        async with asyncio.timeout(3):
            first = await backend_pid(db)
        after = [first, *[await backend_pid(db) for _ in range(4)]]
        assert not before & set(after)
    finally:
        await db.aclose()
