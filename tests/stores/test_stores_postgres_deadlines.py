"""Deadlines on the Postgres thread store: a frozen server (``SIGSTOP`` on a throwaway cluster of
this module's own) costs each call its deadline and a typed error, never a hang; a cancelled call
does not wait for it; nothing persisted is lost and the store works again once the server does.
The figures (time from freezing to the error, against the deadline) are in
``bench/postgres_stall.py``; these tests assert behaviour only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import psycopg
import pytest
from postgres_server import (
    ThrowawayCluster,
    fresh_schema,
    postgres_url,
    terminate_other_backends,
    throwaway_cluster,
)

from plait import Agent
from plait.errors import StoreError, StoreTimeoutError
from plait.messages import UserMessage
from plait.middleware import Event
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel, ScriptedModel
from plait.runtime.events import ErrorOccurred
from plait.stores.postgres import PostgresThreadStore
from plait.trace.postgres import PostgresTraceStore
from plait.trace.store import TraceStoreError, TraceStoreTimeoutError

pytestmark = pytest.mark.slow  # run once in CI, on the first Python (.ci/run)

DEADLINE = 1.0  # the frozen calls' deadline: each test waits it out once per call
_SERVER_TIMEOUTS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")


@pytest.fixture(scope="module")
def cluster() -> Iterator[ThrowawayCluster]:
    with throwaway_cluster() as started:
        yield started


@pytest.fixture(params=["direct", "pgbouncer"])
def via(request: pytest.FixtureRequest, cluster: ThrowawayCluster) -> dict[str, Any]:
    """How the stores reach the frozen cluster: directly, or through its transaction-mode
    PgBouncer (which stays up while the server behind it is frozen)."""
    if request.param == "direct":
        return {"target": cluster.url, "prepared_statements": True}
    assert cluster.pgbouncer_url, "the throwaway cluster has no PgBouncer (install pgbouncer)"
    return {"target": cluster.pgbouncer_url, "prepared_statements": False}


@pytest.fixture
async def schema(cluster: ThrowawayCluster) -> AsyncIterator[str]:
    async with fresh_schema(cluster.url) as name:
        yield name


async def _until_usable(store: PostgresThreadStore) -> None:
    """Poll until a call succeeds: the pool reconnects in the background after a freeze."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 60
    while True:
        try:
            await store.load("warm-up")
            return
        except StoreError:
            if loop.time() > give_up:
                raise
            await asyncio.sleep(0.05)


async def _settled(cluster: ThrowawayCluster, store: PostgresThreadStore) -> None:
    """Once the thawed server answers ``store``: end every other session, so a statement an
    abandoned call left in a backend's socket has either run or never will (it could
    otherwise land after the next load), then wait until ``store`` answers again."""
    await _until_usable(store)
    await terminate_other_backends(cluster.url)
    await _until_usable(store)


async def _typed_timeout(call: Awaitable[object]) -> StoreTimeoutError:
    """The StoreTimeoutError ``call`` raises; the outer bound only turns a hang into a failure."""
    async with asyncio.timeout(60):
        with pytest.raises(StoreTimeoutError) as caught:
            await call
    return caught.value


async def _lease(store: PostgresThreadStore, thread_id: str) -> None:
    async with store.lease(thread_id):
        pass


async def test_every_call_on_a_frozen_server_raises_the_typed_error_and_nothing_is_lost(
    cluster: ThrowawayCluster, via: dict[str, Any], schema: str
) -> None:
    target, prepared = via["target"], via["prepared_statements"]
    safe = PostgresThreadStore(target, schema=schema, prepared_statements=prepared)
    await safe.setup()
    assert await safe.append("t", [UserMessage("one"), UserMessage("two")], expected_version=0)
    hasty = PostgresThreadStore(
        target, schema=schema, prepared_statements=prepared, timeout=DEADLINE, lease_wait=5
    )
    await _until_usable(hasty)
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "append": lambda: hasty.append("t", [UserMessage("lost")], expected_version=1),
        "load": lambda: hasty.load("t"),
        "lease acquire": lambda: _lease(hasty, "other"),
        "list threads": lambda: hasty.list_threads(),
        "trace runs": lambda: PostgresTraceStore(hasty.db).runs(),
    }
    with cluster.frozen():
        errors = {name: await _typed_timeout(call()) for name, call in calls.items()}
    for name, error in errors.items():
        assert (error.operation, error.deadline) == (name, DEADLINE)
        assert f"{name} within its 1 s deadline" in str(error)
        assert "timeout=" in str(error)  # how to change it
    assert isinstance(errors["trace runs"], TraceStoreTimeoutError)
    assert isinstance(errors["trace runs"], TraceStoreError)  # what the recorder catches

    await _settled(cluster, safe)
    # The abandoned append is one statement the frozen server had received: it may have taken
    # effect as the server resumed (StoreTimeoutError: "the next load shows which"), whole or
    # not at all, never half.
    snapshot = await safe.load("t")
    written = [m.text for m in snapshot.messages]
    assert (written, snapshot.version) in [(["one", "two"], 1), (["one", "two", "lost"], 2)]
    await _until_usable(hasty)
    version = snapshot.version
    assert await hasty.append("t", [UserMessage("three")], expected_version=version) == version + 1
    await _lease(hasty, "t")
    assert [m.text for m in (await safe.load("t")).messages] == [*written, "three"]
    await hasty.aclose()
    await safe.aclose()


async def test_a_cancelled_call_on_a_frozen_server_shuts_its_connection_instead_of_waiting(
    cluster: ThrowawayCluster, via: dict[str, Any], schema: str
) -> None:
    """The call's deadline (10 minutes) is far away: only the cancellation ends it, and the
    connection it held is discarded (shut, never waited on) rather than given back."""
    store = PostgresThreadStore(
        via["target"],
        schema=schema,
        prepared_statements=via["prepared_statements"],
        timeout=600,
        max_size=1,
    )
    await store.setup()
    await store.append("t", [UserMessage("kept")], expected_version=0)
    pool = await store.db.pool()
    with cluster.frozen():
        call = asyncio.create_task(store.load("t"))
        await _until(lambda: pool.get_stats().get("pool_available", 0) == 0)
        call.cancel()
        async with asyncio.timeout(60):
            with pytest.raises(asyncio.CancelledError):
                await call
        stats = pool.get_stats()
        assert stats.get("connections_lost", 0) + stats.get("returns_bad", 0) >= 1
    await _until_usable(store)
    assert [m.text for m in (await store.load("t")).messages] == ["kept"]
    await store.aclose()


async def _until(condition: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while not condition():
        assert loop.time() < give_up, "the condition never held"
        await asyncio.sleep(0.01)


async def test_a_turn_whose_write_meets_a_frozen_server_ends_with_the_typed_error(
    cluster: ThrowawayCluster, schema: str
) -> None:
    """Like a cancelled turn: the turn ends with the error (a fatal ``ErrorOccurred`` first; the
    state is not written again, which would wait out a second deadline), the input persisted
    before the model call stays, the lost dispatch is not half-written (its append is one
    statement the frozen server had received: whole if it took effect as the server resumed,
    else absent), and the thread's lease, left to expire, lets the next turn in."""
    store = PostgresThreadStore(cluster.url, schema=schema, lease_ttl=1, lease_wait=30)
    await store.setup()
    hasty = PostgresThreadStore(
        cluster.url, schema=schema, timeout=DEADLINE, lease_ttl=1, lease_wait=30
    )
    await _until_usable(hasty)

    def freeze_then_answer(request: ModelRequest) -> ModelResponse:
        cluster.freeze()
        return ModelResponse(content="never stored")

    events: list[Event] = []
    try:
        with pytest.raises(StoreTimeoutError) as caught:
            async with asyncio.timeout(60):
                stream = Agent(FunctionModel(freeze_then_answer), store=hasty).stream(
                    "kept", thread_id="t"
                )
                async for event in stream:
                    events.append(event)
    finally:
        cluster.thaw()
    assert caught.value.operation == "append"
    errors = [(e.where, e.error, e.fatal) for e in events if isinstance(e, ErrorOccurred)]
    assert errors == [("turn", caught.value, True)]  # no second write of the state to wait out

    await _settled(cluster, store)
    model = ScriptedModel(["next"])
    result = await Agent(model, store=store).run("again", thread_id="t")
    model.assert_complete()
    assert result.output == "next"
    written = [m.text for m in (await store.load("t")).messages]
    assert written in (["kept", "again", "next"], ["kept", "never stored", "again", "next"])
    await hasty.aclose()
    await store.aclose()


# --- On the shared (live) server: what the server and the sockets are told -------------------


@pytest.mark.parametrize("single", [False, True], ids=["transaction", "one statement"])
async def test_the_server_is_told_the_deadline_on_a_direct_connection(single: bool) -> None:
    async with fresh_schema() as schema:
        store = PostgresThreadStore(postgres_url(), schema=schema, timeout=7)
        assert await store.db.run(_show_timeouts, error=StoreError, single=single) == ["7s"] * 3
        await store.aclose()


async def test_a_server_setting_in_the_url_options_wins_over_the_deadline() -> None:
    url = postgres_url() + "?options=-c%20statement_timeout%3D5000"
    store = PostgresThreadStore(url, timeout=7)
    assert await store.db.run(_show_timeouts, error=StoreError, single=True) == ["5s", "7s", "7s"]
    await store.aclose()


async def test_behind_pgbouncer_each_transaction_sets_the_deadline_locally() -> None:
    """PgBouncer (transaction mode) drops startup options and a session SET would leak to other
    clients, so a transaction starts with SET LOCAL; the session keeps the server's defaults."""
    from postgres_server import pgbouncer_url

    async with fresh_schema() as schema:
        store = PostgresThreadStore(
            pgbouncer_url(), schema=schema, timeout=7, prepared_statements=False
        )
        assert await store.db.run(_show_timeouts, error=StoreError) == ["7s"] * 3
        assert "7s" not in await store.db.run(_show_timeouts, error=StoreError, single=True)
        await store.aclose()


async def _show_timeouts(conn: psycopg.AsyncConnection[Any]) -> list[str]:
    shown = []
    for name in _SERVER_TIMEOUTS:
        row = await (await conn.execute(f"SHOW {name}")).fetchone()
        assert row is not None
        shown.append(str(row[0]))
    return shown


async def test_a_statement_the_server_ends_at_its_timeout_is_the_typed_error() -> None:
    async with fresh_schema() as schema:
        store = PostgresThreadStore(postgres_url(), schema=schema)

        async def slow(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute("SET LOCAL statement_timeout = 50")
            await conn.execute("SELECT pg_sleep(30)")

        with pytest.raises(StoreTimeoutError, match="at its statement_timeout") as caught:
            await store.db.run(slow, error=StoreError, operation="a slow call")
        assert (caught.value.operation, caught.value.deadline) == ("a slow call", 30.0)
        await store.aclose()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"keepalives_idle": "10", "tcp_user_timeout": "30000", "connect_timeout": "10"}),
        ("?keepalives_idle=3&connect_timeout=4", {"keepalives_idle": "3", "connect_timeout": "4"}),
    ],
    ids=["defaults", "the URL's own"],
)
async def test_connections_carry_tcp_keepalives_unless_the_url_sets_them(
    query: str, expected: dict[str, str]
) -> None:
    store = PostgresThreadStore(postgres_url() + query)
    async with store.db.connection() as conn:
        options = {o.keyword.decode(): (o.val or b"").decode() for o in conn.pgconn.info}
    assert options["keepalives"] == "1"
    assert {k: options[k] for k in expected} == expected
    await store.aclose()


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "5"])
def test_a_deadline_that_cannot_work_is_refused_when_built(timeout: object) -> None:
    from plait.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="timeout"):
        PostgresThreadStore("postgresql://x@127.0.0.1/db", timeout=timeout)  # type: ignore[arg-type]
