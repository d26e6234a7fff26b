"""What only the Postgres store has to prove: migrations, leases across processes, PgBouncer,
killed connections and a restarted server. The shared contract is in test_stores_contract.py."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from images import png
from postgres_server import (
    ThrowawayCluster,
    fresh_schema,
    pgbouncer_url,
    postgres_url,
    terminate_other_backends,
    throwaway_cluster,
)

from plait import Agent
from plait.backends.postgres import PostgresBackend
from plait.backends.postgres_db import MIGRATIONS, PostgresDatabase
from plait.errors import ConfigurationError, ThreadBusyError, ThreadConflictError
from plait.messages import (
    AssistantMessage,
    Blob,
    ImagePart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel, ScriptedModel
from plait.stores.base import StoreError
from plait.stores.postgres import PostgresThreadStore
from plait.trace.postgres import PostgresTraceStore

ROOT = Path(__file__).parents[2]


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    async with fresh_schema(postgres_url()) as name:
        yield name


@pytest.fixture
async def store(schema: str) -> AsyncIterator[PostgresThreadStore]:
    pg = PostgresThreadStore(postgres_url(), schema=schema, lease_wait=0, lease_ttl=1)
    await pg.setup()
    yield pg
    await pg.aclose()


@pytest.fixture
def own_cluster() -> Iterator[ThrowawayCluster]:
    """A server of the test's own, for the tests that kill connections or restart it: never the
    shared one, which other tests (other pytest-xdist workers too) use meanwhile."""
    with throwaway_cluster() as cluster:
        yield cluster


@pytest.fixture
async def own_store(own_cluster: ThrowawayCluster) -> AsyncIterator[PostgresThreadStore]:
    pg = PostgresThreadStore(own_cluster.url, lease_wait=0, lease_ttl=1)
    await pg.setup()
    yield pg
    await pg.aclose()


async def _until_started(store: PostgresThreadStore, thread_id: str) -> None:
    """Poll until a turn has persisted its input (the turn then holds the lease)."""
    for _ in range(3000):
        if (await store.load(thread_id)).version > 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the first turn never started")


async def test_setup_from_several_workers_at_once_applies_each_migration_once(schema: str) -> None:
    stores = [PostgresThreadStore(postgres_url(), schema=schema) for _ in range(4)]
    results = await asyncio.gather(*(s.setup() for s in stores))
    assert sorted(n for r in results for n in r) == list(range(1, len(MIGRATIONS) + 1))
    assert await stores[0].setup() == []
    assert await stores[0].db.schema_version(error=StoreError) == len(MIGRATIONS)
    for s in stores:
        await s.aclose()


def test_no_migration_creates_an_index_concurrently() -> None:
    assert not [m for m in MIGRATIONS if "CONCURRENTLY" in m.upper()]


async def test_using_the_store_before_setup_says_to_run_setup(schema: str) -> None:
    pg = PostgresThreadStore(postgres_url(), schema=schema)
    with pytest.raises(StoreError, match=r"setup\(\)"):
        await pg.load("t")
    await pg.aclose()


async def test_an_unreachable_server_is_a_store_error_within_the_pool_timeout() -> None:
    pg = PostgresThreadStore("postgresql://postgres@127.0.0.1:9/none", pool_timeout=0.5)
    with pytest.raises(StoreError, match="Check that the server runs"):
        await pg.load("t")
    await pg.aclose()


@pytest.mark.parametrize("schema_name", ["Public", "a-b", "1x", "x;drop"])
def test_bad_schema_names_are_refused(schema_name: str) -> None:
    with pytest.raises(ConfigurationError, match="schema name"):
        PostgresDatabase("postgresql://x@127.0.0.1/db", schema=schema_name)


def test_a_non_postgres_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="postgresql://"):
        PostgresThreadStore("mysql://x@localhost/db")


@pytest.mark.parametrize(
    "options",
    [{"max_size": 0}, {"max_size": -1}, {"pool_timeout": 0}, {"pool_timeout": float("nan")}],
    ids=["max_size 0", "max_size -1", "pool_timeout 0", "pool_timeout nan"],
)
def test_a_pool_that_cannot_work_is_refused_when_built(options: dict[str, float]) -> None:
    # Before: accepted, then psycopg_pool's ValueError (max_size) or an immediate PoolTimeout
    # at the first store call.
    with pytest.raises(ConfigurationError, match=next(iter(options))):
        PostgresThreadStore("postgresql://x@127.0.0.1/db", **options)  # type: ignore[arg-type]


_STORES: list[Callable[..., object]] = [PostgresThreadStore, PostgresBackend, PostgresTraceStore]


@pytest.mark.parametrize("build", _STORES)
@pytest.mark.parametrize("shared", [False, True], ids=["url", "shared database"])
def test_a_misspelled_option_is_refused_even_beside_a_shared_database(
    build: Callable[..., object], shared: bool
) -> None:
    """Before the options became one TypedDict a typo was Python's TypeError in every case; a
    shared PostgresDatabase must not swallow it now that they pass through ``**options``."""
    url = "postgresql://x@127.0.0.1/db"
    target = PostgresDatabase(url) if shared else url
    with pytest.raises(ConfigurationError, match=r"'shema'.*schema, prepared_statements"):
        build(target, shema="other")


async def test_an_application_pool_is_used_and_left_open(schema: str) -> None:
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(postgres_url(), min_size=1, max_size=2) as pool:
        pg = PostgresThreadStore(pool, schema=schema)
        await pg.setup()
        await pg.append("t", [UserMessage("hi")], expected_version=0)
        await pg.aclose()
        assert not pool.closed
        assert [
            m.text for m in (await PostgresThreadStore(pool, schema=schema).load("t")).messages
        ] == ["hi"]


async def test_a_second_turn_on_a_busy_thread_fails_fast_before_calling_the_model(
    store: PostgresThreadStore,
) -> None:
    gate = asyncio.Event()
    second_calls = 0

    async def slow(request: ModelRequest) -> ModelResponse:
        await gate.wait()
        return ModelResponse(content="first")

    async def counted(request: ModelRequest) -> ModelResponse:
        nonlocal second_calls
        second_calls += 1
        return ModelResponse(content="second")

    first = asyncio.create_task(Agent(FunctionModel(slow), store=store).run("one", thread_id="t"))
    await _until_started(store, "t")
    other_worker = PostgresThreadStore(store.db, lease_wait=0)
    with pytest.raises(ThreadBusyError, match="another worker"):
        await Agent(FunctionModel(counted), store=other_worker).run("two", thread_id="t")
    assert second_calls == 0
    gate.set()
    assert (await first).output == "first"
    assert [m.text for m in (await store.load("t")).messages] == ["one", "first"]


async def test_a_waiting_turn_runs_after_the_busy_one_and_sees_its_messages(
    store: PostgresThreadStore,
) -> None:
    gate = asyncio.Event()
    seen: list[list[str]] = []

    async def slow(request: ModelRequest) -> ModelResponse:
        await gate.wait()
        return ModelResponse(content="first")

    async def second(request: ModelRequest) -> ModelResponse:
        seen.append([m.text for m in request.messages])
        return ModelResponse(content="second")

    first = asyncio.create_task(Agent(FunctionModel(slow), store=store).run("one", thread_id="t"))
    await _until_started(store, "t")
    waiter = PostgresThreadStore(store.db, lease_wait=10)
    waiting = asyncio.create_task(
        Agent(FunctionModel(second), store=waiter).run("two", thread_id="t")
    )
    await asyncio.sleep(0.2)
    assert not waiting.done()
    gate.set()
    await first
    assert (await waiting).output == "second"
    assert seen == [["one", "first", "two"]]


async def test_a_stale_write_is_a_conflict_never_a_silent_reload(
    store: PostgresThreadStore,
) -> None:
    other = PostgresThreadStore(store.db)
    await store.append("t", [UserMessage("a")], expected_version=0)
    await other.append("t", [UserMessage("b")], expected_version=1)
    with pytest.raises(ThreadConflictError) as caught:
        await store.append("t", [UserMessage("stale")], expected_version=1)
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert [m.text for m in (await store.load("t")).messages] == ["a", "b"]


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from plait import Agent
    from plait.models.scripted import FunctionModel
    from plait.stores.postgres import PostgresThreadStore

    async def never(request):
        print("in-model", flush=True)
        await asyncio.Event().wait()

    async def main():
        store = PostgresThreadStore(sys.argv[1], schema=sys.argv[2], lease_ttl=1)
        await Agent(FunctionModel(never), store=store).run("doomed", thread_id="t")

    asyncio.run(main())
    """
)


async def test_a_worker_killed_mid_turn_frees_its_thread_when_the_lease_expires(
    store: PostgresThreadStore, schema: str
) -> None:
    await store.append("t", [UserMessage("before")], expected_version=0)
    holder = subprocess.Popen(  # noqa: ASYNC220 - a real process, so kill -9 is real
        [sys.executable, "-c", _HOLDER, postgres_url(), schema], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(asyncio.to_thread(holder.stdout.readline), 30) == "in-model\n"
        with pytest.raises(ThreadBusyError):
            await Agent(ScriptedModel(["no"]), store=store).run("too early", thread_id="t")
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    survivor = PostgresThreadStore(store.db, lease_wait=10)
    result = await Agent(ScriptedModel(["after"]), store=survivor).run("next", thread_id="t")
    assert result.output == "after"
    texts = [m.text for m in (await store.load("t")).messages]
    assert texts == ["before", "doomed", "next", "after"]


async def test_connections_killed_by_the_server_are_replaced_and_the_turn_completes(
    own_cluster: ThrowawayCluster, own_store: PostgresThreadStore
) -> None:
    store = own_store
    await store.append("t", [UserMessage("warm")], expected_version=0)
    killed = False

    async def respond(request: ModelRequest) -> ModelResponse:
        nonlocal killed
        if not killed:
            killed = await terminate_other_backends(own_cluster.url) > 0
        return ModelResponse(content="survived")

    result = await Agent(FunctionModel(respond), store=store).run("go", thread_id="t")
    assert killed
    assert result.output == "survived"
    snapshot = await store.load("t")
    assert [m.text for m in snapshot.messages] == ["warm", "go", "survived"]
    assert snapshot.version == 3


async def test_a_restarted_server_is_survived_with_nothing_lost(
    own_cluster: ThrowawayCluster, own_store: PostgresThreadStore
) -> None:
    store, cluster = own_store, str(own_cluster.directory)
    await store.append("t", [UserMessage("before")], expected_version=0)

    async def respond(request: ModelRequest) -> ModelResponse:
        if len(request.messages) == 2:
            await asyncio.to_thread(
                subprocess.run, [str(ROOT / ".ci" / "postgres.sh"), "restart", cluster], check=True
            )
        return ModelResponse(content="after restart")

    result = await Agent(FunctionModel(respond), store=store).run("go", thread_id="t")
    assert result.output == "after restart"
    assert [m.text for m in (await store.load("t")).messages] == ["before", "go", "after restart"]


async def test_through_pgbouncer_in_transaction_mode_without_prepared_statements() -> None:
    url = pgbouncer_url()
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresThreadStore(url, schema=schema, prepared_statements=False, max_size=4)
        blobs = PostgresBackend(pg.db)
        await pg.setup()
        async with pg.db.connection() as conn:
            assert conn.prepare_threshold is None

        async def writer(n: int) -> None:
            for i in range(12):  # well past psycopg's default prepare threshold of 5
                while True:
                    snap = await pg.load("t")
                    try:
                        await pg.append(
                            "t", [UserMessage(f"{n}-{i}")], expected_version=snap.version
                        )
                        break
                    except ThreadConflictError:
                        await asyncio.sleep(0)
                await blobs.write(f"w{n}/{i}", "x" * i)

        await asyncio.gather(*(writer(n) for n in range(4)))
        snapshot = await pg.load("t")
        assert snapshot.version == 48
        assert sorted(m.text for m in snapshot.messages) == sorted(
            f"{n}-{i}" for n in range(4) for i in range(12)
        )
        assert len(await blobs.ls()) == 48
        async with pg.lease("t"):
            with pytest.raises(ThreadBusyError):
                async with PostgresThreadStore(pg.db, lease_wait=0).lease("t"):
                    pass
        await pg.aclose()


async def test_store_and_backend_share_one_database(store: PostgresThreadStore) -> None:
    blobs = PostgresBackend(store.db)
    await blobs.write("results/1.txt", "evicted")
    await store.append(
        "t", [AssistantMessage("x"), ToolMessage("c", "f", data=1)], expected_version=0
    )
    assert await blobs.read("results/1.txt", 2, 3) == "ict"
    with pytest.raises(Exception, match="shorter names"):
        await blobs.write("k" * 3000, "too long a key")


class CommitCutter:
    """A TCP proxy to the test server that, once armed, forwards the next message holding
    ``marker`` (the ``COMMIT`` of a transaction, or the one statement of an append that is one),
    waits for the server's reply (so the write committed) and drops the client's connection
    instead of passing the reply on: a commit whose acknowledgement was lost."""

    def __init__(self, target_port: int, marker: bytes) -> None:
        self.target_port = target_port
        self.marker = marker
        self.armed = False
        self.cut = 0
        self.sent = bytearray()
        """Everything the client sent the server."""
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target_port)

        committing = False

        async def upstream() -> None:
            nonlocal committing
            while data := await client_r.read(65536):
                self.sent += data
                if self.armed and self.marker in data:
                    self.armed = False
                    committing = True
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(65536):
                if committing:  # the server committed; its reply is lost with the connection
                    self.cut += 1
                    client_w.transport.abort()
                    return
                client_w.write(data)
                await client_w.drain()

        try:
            await asyncio.gather(upstream(), downstream(), return_exceptions=True)
        finally:
            server_w.close()
            client_w.close()

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.mark.parametrize(
    ("second", "marker"),
    [
        pytest.param(UserMessage("second"), b"SET version", id="one-statement"),
        pytest.param(
            UserMessage([TextPart("second"), ImagePart(Blob(png(4, 4)))]),
            b"COMMIT",
            id="transaction",  # a message with an image: blobs need the locked path
        ),
    ],
)
async def test_a_lost_commit_acknowledgement_is_not_a_false_conflict(
    schema: str, second: UserMessage, marker: bytes
) -> None:
    url = postgres_url()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    proxy = CommitCutter(port, marker)
    proxied = url.replace(f":{port}/", f":{await proxy.start()}/")
    pg = PostgresThreadStore(proxied, schema=schema, max_size=1)
    await pg.setup()
    await pg.append("t", [UserMessage("first")], expected_version=0, state={"n": 1})
    proxy.armed = True
    version = await pg.append("t", [second], expected_version=1, state={"n": 2})
    assert proxy.cut == 1
    assert version == 2
    snapshot = await pg.load("t")
    assert [m.text for m in snapshot.messages] == ["first", "second"]
    assert (snapshot.version, snapshot.state) == (2, {"n": 2})
    stored = snapshot.messages[1]
    assert isinstance(stored, UserMessage)
    assert [type(p) for p in stored.content] == [type(p) for p in second.content]
    await pg.aclose()
    await proxy.aclose()


async def test_an_append_without_images_is_one_statement_and_one_with_them_a_transaction(
    schema: str,
) -> None:
    url = postgres_url()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    proxy = CommitCutter(port, b"never armed")
    pg = PostgresThreadStore(url.replace(f":{port}/", f":{await proxy.start()}/"), schema=schema)
    await pg.setup()
    for version in range(3):  # a new thread, then two bumps: no BEGIN, no COMMIT
        del proxy.sent[:]
        assert await pg.append("t", [UserMessage(f"m{version}")], expected_version=version)
        assert b"BEGIN" not in proxy.sent and b"COMMIT" not in proxy.sent
    del proxy.sent[:]
    image = UserMessage([TextPart("look"), ImagePart(Blob(png(4, 4)))])
    assert await pg.append("t", [image], expected_version=3) == 4
    assert b"BEGIN" in proxy.sent and b"COMMIT" in proxy.sent
    assert [m.text for m in (await pg.load("t")).messages] == ["m0", "m1", "m2", "look"]
    await pg.aclose()
    await proxy.aclose()


def test_a_store_built_from_a_url_works_across_event_loops(schema: str) -> None:
    pg = PostgresThreadStore(postgres_url(), schema=schema)
    asyncio.run(pg.setup())
    assert asyncio.run(pg.append("t", [UserMessage("one")], expected_version=0)) == 1
    assert asyncio.run(pg.append("t", [UserMessage("two")], expected_version=1)) == 2
    assert [m.text for m in asyncio.run(pg.load("t")).messages] == ["one", "two"]
    asyncio.run(pg.aclose())


async def test_a_cancelled_append_settles_before_it_raises(store: PostgresThreadStore) -> None:
    await store.append("t", [UserMessage("first")], expected_version=0)
    released = False
    async with await psycopg.AsyncConnection.connect(postgres_url()) as blocker:
        await blocker.execute(
            f'SELECT 1 FROM "{store.db.schema}".plait_threads WHERE thread_id = %s FOR UPDATE',
            ("t",),
        )
        append = asyncio.create_task(store.append("t", [UserMessage("second")], expected_version=1))
        await _until_waiting_on_a_lock()
        append.cancel()
        await asyncio.sleep(0.2)
        assert not append.done()  # still settling: its write is in flight behind the lock
        released = True
        await blocker.commit()
    with pytest.raises(asyncio.CancelledError):
        await append
    assert released
    snapshot = await store.load("t")
    assert [m.text for m in snapshot.messages] == ["first", "second"]
    assert snapshot.version == 2


async def _until_waiting_on_a_lock() -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url(), autocommit=True) as conn:
        for _ in range(3000):
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            row = await cur.fetchone()
            if row and row[0] > 0:
                return
            await asyncio.sleep(0.01)
    raise AssertionError("the append never waited on the row lock")


async def test_releasing_a_lease_whose_row_another_session_locks_gives_up_within_its_bound(
    schema: str,
) -> None:
    """The turn's end is bounded by ``LEASE_RELEASE_S`` on Postgres too: another session holds
    the lease row ``FOR UPDATE`` until the turn's end has returned (a release that waited for it
    would never return), so the release is cancelled at the deadline and the lease is left to
    expire, its row still there."""
    store = PostgresThreadStore(postgres_url(), schema=schema, lease_ttl=60)
    await store.setup()
    leases = f'"{schema}".plait_leases'
    async with await psycopg.AsyncConnection.connect(postgres_url()) as other:
        async with store.lease("t"):
            await other.execute(f"SELECT 1 FROM {leases} WHERE thread_id = 't' FOR UPDATE")
        await other.rollback()
        await other.set_autocommit(True)
        cur = await other.execute(f"SELECT count(*) FROM {leases}")
        assert await cur.fetchone() == (1,)
    await store.aclose()
