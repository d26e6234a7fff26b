"""The numbered schema migrations of plait's Postgres tables, applied by
:meth:`plait.backends.postgres_db.PostgresDatabase.setup` (which re-exports :data:`MIGRATIONS`).

Migrations are numbered and run only by :meth:`PostgresDatabase.setup` (``plait db upgrade``).
Each runs in its own transaction after ``pg_advisory_xact_lock`` (waited for at most 120 s), so
several workers calling ``setup()`` at once apply each migration exactly once; a
transaction-level lock also works through PgBouncer. No migration may use
``CREATE INDEX CONCURRENTLY`` (it cannot run inside a transaction); the runner refuses one.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from plait.errors import ConfigurationError, PlaitError, StoreTimeoutError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from plait.backends.postgres_db import PostgresDatabase

__all__ = ["MIGRATIONS", "MIGRATION_LOCK_TIMEOUT_S", "apply_migrations", "read_schema_version"]

T = TypeVar("T")
_MIGRATION_LOCK = 0x706C616974  # "plait": the advisory lock every setup() serialises on.
MIGRATION_LOCK_TIMEOUT_S = 120.0

# Each entry is one migration; its number is its position + 1. Never edit a released entry,
# append a new one. "{s}" is the schema. No CREATE INDEX CONCURRENTLY (it cannot run in a
# transaction; the runner refuses it).
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE SEQUENCE {s}.plait_thread_writes;
    CREATE TABLE {s}.plait_threads (
        thread_id text COLLATE "C" PRIMARY KEY,
        version bigint NOT NULL,
        state text NOT NULL,
        write_token text NOT NULL,
        written bigint NOT NULL DEFAULT nextval('{s}.plait_thread_writes'),
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
    );
    CREATE INDEX plait_threads_by_recency ON {s}.plait_threads (written);
    CREATE TABLE {s}.plait_messages (
        thread_id text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        id text NOT NULL,
        json text NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE TABLE {s}.plait_leases (
        thread_id text COLLATE "C" PRIMARY KEY,
        owner text NOT NULL,
        expires_at timestamptz NOT NULL
    );
    CREATE TABLE {s}.plait_blobs (
        path text COLLATE "C" PRIMARY KEY,
        content text,
        raw bytea,
        updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CHECK ((content IS NULL) <> (raw IS NULL))
    );
    """,
    # 2: the trace store (plait.trace.postgres.PostgresTraceStore).
    """
    CREATE TABLE {s}.plait_trace_runs (
        id text COLLATE "C" PRIMARY KEY,
        thread_id text COLLATE "C" NOT NULL,
        agent text NOT NULL,
        started double precision NOT NULL,
        finished double precision,
        status text NOT NULL,
        error text,
        input text NOT NULL,
        output text
    );
    CREATE INDEX plait_trace_runs_by_start ON {s}.plait_trace_runs (started);
    CREATE TABLE {s}.plait_trace_spans (
        n bigserial,
        id text COLLATE "C" PRIMARY KEY,
        run_id text COLLATE "C" NOT NULL,
        kind text NOT NULL,
        name text NOT NULL,
        dispatch integer NOT NULL,
        started double precision NOT NULL,
        finished double precision NOT NULL,
        data text NOT NULL
    );
    CREATE INDEX plait_trace_spans_by_run ON {s}.plait_trace_spans (run_id, started, n);
    CREATE TABLE {s}.plait_trace_requests (
        span_id text COLLATE "C" PRIMARY KEY,
        thread_id text COLLATE "C" NOT NULL,
        seq integer NOT NULL,
        "full" boolean NOT NULL,
        removed text NOT NULL,
        added text NOT NULL,
        system_hash text NOT NULL,
        tools_hash text NOT NULL,
        base_prompt_hash text NOT NULL,
        UNIQUE (thread_id, seq)
    );
    CREATE TABLE {s}.plait_trace_messages (
        thread_id text COLLATE "C" NOT NULL,
        key text COLLATE "C" NOT NULL,
        role text NOT NULL,
        tokens integer NOT NULL,
        kind text NOT NULL,
        body text,
        PRIMARY KEY (thread_id, key)
    );
    CREATE TABLE {s}.plait_trace_blobs (hash text COLLATE "C" PRIMARY KEY, text text NOT NULL);
    """,
    # 3: message blobs (images, files) stored once, by address (plait.stores.postgres).
    """
    CREATE TABLE {s}.plait_message_blobs (
        sha256 text COLLATE "C" PRIMARY KEY,
        size bigint NOT NULL,
        data bytea NOT NULL
    );
    CREATE TABLE {s}.plait_thread_blobs (
        thread_id text COLLATE "C" NOT NULL,
        sha256 text COLLATE "C" NOT NULL,
        PRIMARY KEY (thread_id, sha256)
    );
    CREATE INDEX plait_thread_blobs_by_blob ON {s}.plait_thread_blobs (sha256);
    """,
    # 4: image and file bytes of the trace store, once per sha256 (plait.trace.parts).
    """
    CREATE TABLE {s}.plait_trace_binary (
        sha256 text COLLATE "C" PRIMARY KEY,
        media_type text NOT NULL,
        size bigint NOT NULL,
        data bytea
    );
    """,
)


async def apply_migrations(
    db: PostgresDatabase,
    *,
    error: type[PlaitError],
    timeout_error: type[StoreTimeoutError] = StoreTimeoutError,
) -> list[int]:
    """Create the schema and apply every migration not yet applied; return their numbers.

    Safe to call from several workers at once (each migration runs once) and again later
    (nothing to do returns ``[]``). Each step's deadline is ``timeout`` plus the
    ``MIGRATION_LOCK_TIMEOUT_S`` (120 s) it may wait for another worker's migration.
    """
    applied: list[int] = []
    s = db.sql
    within = MIGRATION_LOCK_TIMEOUT_S + db.timeout
    settings = db.set_local_timeouts(0 if math.isinf(within) else math.ceil(within * 1000))

    def step(fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> Awaitable[T]:
        return db.run(
            fn,
            error=error,
            timeout_error=timeout_error,
            operation="setup (the schema migrations)",
            deadline=within,
        )

    async def take_migration_lock(conn: AsyncConnection[Any]) -> None:
        # The statements may wait for another worker's migration: past the session's
        # statement_timeout, up to MIGRATION_LOCK_TIMEOUT_S (a lock timeout is then a
        # StoreTimeoutError naming the server's lock_timeout).
        await conn.execute(settings)
        await conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT_S:g}s'")
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    async def bootstrap(conn: AsyncConnection[Any]) -> None:
        await take_migration_lock(conn)
        await conn.execute(s("CREATE SCHEMA IF NOT EXISTS {s}"))
        await conn.execute(
            s("CREATE TABLE IF NOT EXISTS {s}.plait_migrations (v integer PRIMARY KEY)")
        )

    await step(bootstrap)
    for number, statement in enumerate(MIGRATIONS, start=1):
        if "CONCURRENTLY" in statement.upper():
            raise ConfigurationError(
                f"Migration {number} uses CREATE INDEX CONCURRENTLY, which cannot run in "
                "a transaction; create the index without CONCURRENTLY."
            )

        async def apply(conn: AsyncConnection[Any], n: int = number, body: str = statement) -> bool:
            await take_migration_lock(conn)
            cur = await conn.execute(s("SELECT 1 FROM {s}.plait_migrations WHERE v = %s"), (n,))
            if await cur.fetchone() is not None:
                return False
            await conn.execute(s(body))
            await conn.execute(s("INSERT INTO {s}.plait_migrations (v) VALUES (%s)"), (n,))
            return True

        if await step(apply):
            applied.append(number)
    return applied


async def read_schema_version(db: PostgresDatabase, *, error: type[PlaitError]) -> int:
    """The highest applied migration (0 before :meth:`setup`)."""

    async def select(conn: AsyncConnection[Any]) -> int:
        cur = await conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (f'"{db.schema}".plait_migrations',)
        )
        row = await cur.fetchone()
        if row is None or not row[0]:
            return 0
        cur = await conn.execute(db.sql("SELECT COALESCE(MAX(v), 0) FROM {s}.plait_migrations"))
        row = await cur.fetchone()
        return int(row[0]) if row else 0

    return await db.run(select, error=error, operation="schema version")
