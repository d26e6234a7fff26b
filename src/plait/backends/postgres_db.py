"""``PostgresDatabase``: the connection pool and the numbered schema migrations that
:class:`~plait.stores.postgres.PostgresThreadStore` and
:class:`~plait.backends.postgres.PostgresBackend` run on.

Needs ``pip install 'plait[postgres]'`` (psycopg 3 and psycopg-pool); psycopg is imported when
a database is built, never by ``import plait``.

Connections come from a ``psycopg_pool.AsyncConnectionPool``, either built here from a
``postgresql://`` URL (then :meth:`PostgresDatabase.aclose` closes it) or owned by the application
(then plait never closes it). A pool built here uses ``autocommit=True``, checks every connection
as it is handed out (``check_connection``: one the server killed — idle timeout,
``pg_terminate_backend``, a restart — is replaced, not used), and recycles connections after
``max_idle`` (5 min) / ``max_lifetime`` (30 min). A write of several statements runs in one
explicit transaction (a single statement is atomic on its own), so a connection lost mid-write
leaves nothing half-written.

Behind a transaction-mode pooler (PgBouncer) pass ``prepared_statements=False``: psycopg then
never prepares a statement on the server (``prepare_threshold=None``), which such a pooler cannot
route ("prepared statement "_pg3_0" does not exist").

Migrations are numbered and run only by :meth:`PostgresDatabase.setup` (``plait db upgrade``).
Each runs in its own transaction after ``pg_advisory_xact_lock`` (waited for at most 120 s), so
several workers calling ``setup()`` at once apply each migration exactly once; a
transaction-level lock also works through PgBouncer. No migration may use
``CREATE INDEX CONCURRENTLY`` (it cannot run inside a transaction); the runner refuses one.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from plait.errors import ConfigurationError, PlaitError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "PostgresDatabase", "PostgresOptions"]

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_LOCK = 0x706C616974  # "plait": the advisory lock every setup() serialises on.

# Each entry is one migration; its number is its position + 1. Never edit a released entry,
# append a new one. "{s}" is the schema. No CREATE INDEX CONCURRENTLY (see the module docstring).
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
)

DEFAULT_POOL_TIMEOUT_S = 30.0
MIGRATION_LOCK_TIMEOUT_S = 120.0
DEFAULT_MAX_SIZE = 10


class PostgresOptions(TypedDict, total=False):
    """The connection options of :class:`PostgresDatabase`, which the Postgres thread store,
    backend and trace store take as keywords beside their ``target`` and pass on: ``schema``
    (default ``"public"``), ``prepared_statements`` (default ``True``; ``False`` behind
    PgBouncer in transaction mode), ``max_size`` (default 10) and ``pool_timeout`` (default
    30 s). A ``target`` that is already a :class:`PostgresDatabase` keeps its own."""

    schema: str
    prepared_statements: bool
    max_size: int
    pool_timeout: float


class PostgresDatabase:
    """One Postgres database (and schema) shared by a thread store and a backend.

    ``target`` is a ``postgresql://`` URL or an ``AsyncConnectionPool`` the application owns.
    ``schema`` (default ``"public"``) holds plait's tables; it must be a plain lower-case SQL
    name and is created by :meth:`setup` if missing. ``pool_timeout`` bounds the wait for a free
    connection (default 30 s; > 0). ``max_size`` bounds the pool built from a URL (default 10;
    >= 1). A value outside these is a :class:`~plait.errors.ConfigurationError` here.
    The pool opens on first use, in the running event loop.
    """

    def __init__(
        self,
        target: str | AsyncConnectionPool[Any],
        *,
        schema: str = "public",
        prepared_statements: bool = True,
        max_size: int = DEFAULT_MAX_SIZE,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT_S,
    ) -> None:
        if not _SCHEMA_NAME.match(schema):
            raise ConfigurationError(
                f"Invalid Postgres schema name {schema!r}: use lower-case letters, digits and "
                "underscores, starting with a letter or underscore (at most 63 characters)."
            )
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigurationError(
                f"Invalid Postgres max_size {max_size!r}: the pool needs at least one "
                f"connection; use a whole number >= 1 (default {DEFAULT_MAX_SIZE})."
            )
        if not math.isfinite(pool_timeout) or pool_timeout <= 0:
            raise ConfigurationError(
                f"Invalid Postgres pool_timeout {pool_timeout!r}: use a number of seconds "
                f"> 0 (default {DEFAULT_POOL_TIMEOUT_S:g})."
            )
        if isinstance(target, str) and not target.startswith(("postgresql://", "postgres://")):
            raise ConfigurationError(
                f"Not a Postgres URL: {target!r}. Use postgresql://user@host:port/dbname."
            )
        self.schema = schema
        self.prepared_statements = prepared_statements
        self._target = target
        self._owned = isinstance(target, str)
        self._pool: AsyncConnectionPool[Any] | None = None if isinstance(target, str) else target
        self._max_size = max_size
        self._timeout = pool_timeout
        self._opening = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def of(
        cls,
        target: str | AsyncConnectionPool[Any] | PostgresDatabase,
        **options: Unpack[PostgresOptions],
    ) -> PostgresDatabase:
        """``target`` itself if it is a ``PostgresDatabase`` (shared: ``options`` are ignored,
        it keeps its own), else a new one on the URL or pool with ``options`` (those of the
        constructor). The thread store, the backend and the trace store take their ``target``
        here. A name that is not a :class:`PostgresOptions` key is a
        :class:`~plait.errors.ConfigurationError` naming the valid ones, shared target or not
        (a typo is never silently ignored)."""
        unknown = sorted(options.keys() - PostgresOptions.__annotations__.keys())
        if unknown:
            raise ConfigurationError(
                f"Unknown Postgres option {', '.join(map(repr, unknown))}: the options are "
                f"{', '.join(PostgresOptions.__annotations__)}."
            )
        if isinstance(target, PostgresDatabase):
            return target
        return cls(target, **options)

    @property
    def description(self) -> str:
        """Where the data lives, without a password (for messages)."""
        if isinstance(self._target, str):
            return re.sub(r"//[^@/]*@", "//", self._target) + f" (schema {self.schema})"
        return f"the application's pool (schema {self.schema})"

    def sql(self, statement: str) -> str:
        """``statement`` with ``{s}`` replaced by the quoted schema."""
        return statement.replace("{s}", f'"{self.schema}"')

    async def pool(self) -> AsyncConnectionPool[Any]:
        """The pool, opened on first call (waits at most ``pool_timeout`` for one connection).

        A pool belongs to the event loop that opened it. Used from a new loop (``run_sync``
        twice, one ``asyncio.run`` per CLI command), a pool built from a URL is opened afresh
        there (the old loop is gone, so are its connections' tasks); an application's pool
        raises :class:`ConfigurationError` instead.
        """
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop in (None, loop):
            return self._pool
        if not self._owned:
            raise ConfigurationError(
                "The application's Postgres pool was opened in another event loop; use the "
                "store from the loop that owns the pool, or pass a URL instead."
            )
        if self._loop is not loop:
            self._pool, self._loop, self._opening = None, loop, asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> AsyncConnectionPool[Any]:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:
            raise ConfigurationError(
                "The Postgres store needs psycopg: pip install 'plait[postgres]'."
            ) from exc
        assert isinstance(self._target, str)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._target,
            min_size=1,
            max_size=self._max_size,
            kwargs={
                "autocommit": True,
                "prepare_threshold": 5 if self.prepared_statements else None,
            },
            check=AsyncConnectionPool.check_connection,
            max_idle=300.0,
            max_lifetime=1800.0,
            timeout=self._timeout,
            open=False,
        )
        try:
            await pool.open(wait=True, timeout=self._timeout)
        except BaseException:
            await pool.close()
            raise
        return pool

    async def aclose(self) -> None:
        """Close the pool if plait built it; an application's pool is left open. A pool whose
        event loop has ended is only dropped (its connections went with that loop)."""
        if self._owned and self._pool is not None:
            pool, self._pool = self._pool, None
            if self._loop is asyncio.get_running_loop():
                await pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        pool = await self.pool()
        async with pool.connection(timeout=self._timeout) as conn:
            yield conn

    async def run(
        self,
        fn: Callable[[AsyncConnection[Any]], Awaitable[T]],
        *,
        error: type[PlaitError],
        retry: bool = True,
        single: bool = False,
    ) -> T:
        """``fn(conn)`` inside one transaction, committed if it returns, rolled back if it raises.
        With ``single=True``, ``fn`` runs exactly one statement, which autocommit makes atomic on
        its own: no ``BEGIN``/``COMMIT`` round trips.

        A ``PlaitError`` from ``fn`` passes through unchanged; every psycopg or pool failure
        becomes ``error(message)`` saying what to do: the server unreachable or gone, the pool
        exhausted for ``pool_timeout``, plait's tables missing (``setup()`` not run).

        With ``retry`` (the default), a call whose connection broke is run once more on a fresh
        connection: the server rolled the failed transaction back, so ``fn`` must only be safe
        to run again after a rollback (every caller's is; ``append`` checks its write token).
        Without psycopg installed: a ``ConfigurationError`` with the ``pip install`` command.
        """
        try:
            import psycopg
            from psycopg_pool import PoolTimeout
        except ImportError as exc:
            raise ConfigurationError(
                "The Postgres store needs psycopg: pip install 'plait[postgres]'."
            ) from exc

        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                async with self.connection() as conn:
                    if single and conn.autocommit:
                        return await fn(conn)
                    async with conn.transaction():
                        return await fn(conn)
            except PlaitError:
                raise
            except PoolTimeout as exc:
                raise error(
                    f"Got no connection to Postgres at {self.description} within "
                    f"{self._timeout:g} s: the server is unreachable or every pooled connection "
                    "is busy. Check that the server runs and the URL is right, or raise "
                    "max_size / pool_timeout."
                ) from exc
            except psycopg.Error as exc:
                lost = _connection_lost(exc)
                if lost and attempt + 1 < attempts:
                    continue
                raise self._failure(exc, lost, error) from exc
        raise AssertionError("unreachable")

    def _failure(self, exc: BaseException, lost: bool, error: type[PlaitError]) -> PlaitError:
        import psycopg

        where = f"Postgres at {self.description}"
        if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.InvalidSchemaName):
            return error(
                f"plait's tables are missing in {where}. Run 'await store.setup()' (or "
                "'plait db upgrade --store URL') once before use."
            )
        if lost:
            return error(
                f"{where} dropped the connection ({type(exc).__name__}: {exc}). The call was "
                "not committed; check that the server is up and run again."
            )
        return error(f"{where} failed ({type(exc).__name__}: {exc}).")

    async def setup(self, *, error: type[PlaitError]) -> list[int]:
        """Create the schema and apply every migration not yet applied; return their numbers.

        Safe to call from several workers at once (each migration runs once) and again later
        (nothing to do returns ``[]``).
        """
        applied: list[int] = []
        s = self.sql

        async def bootstrap(conn: AsyncConnection[Any]) -> None:
            await _take_migration_lock(conn)
            await conn.execute(s("CREATE SCHEMA IF NOT EXISTS {s}"))
            await conn.execute(
                s("CREATE TABLE IF NOT EXISTS {s}.plait_migrations (v integer PRIMARY KEY)")
            )

        await self.run(bootstrap, error=error)
        for number, statement in enumerate(MIGRATIONS, start=1):
            if "CONCURRENTLY" in statement.upper():
                raise ConfigurationError(
                    f"Migration {number} uses CREATE INDEX CONCURRENTLY, which cannot run in "
                    "a transaction; create the index without CONCURRENTLY."
                )

            async def apply(
                conn: AsyncConnection[Any], n: int = number, body: str = statement
            ) -> bool:
                await _take_migration_lock(conn)
                cur = await conn.execute(s("SELECT 1 FROM {s}.plait_migrations WHERE v = %s"), (n,))
                if await cur.fetchone() is not None:
                    return False
                await conn.execute(s(body))
                await conn.execute(s("INSERT INTO {s}.plait_migrations (v) VALUES (%s)"), (n,))
                return True

            if await self.run(apply, error=error):
                applied.append(number)
        return applied

    async def schema_version(self, *, error: type[PlaitError]) -> int:
        """The highest applied migration (0 before :meth:`setup`)."""

        async def select(conn: AsyncConnection[Any]) -> int:
            cur = await conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL", (f'"{self.schema}".plait_migrations',)
            )
            row = await cur.fetchone()
            if row is None or not row[0]:
                return 0
            cur = await conn.execute(
                self.sql("SELECT COALESCE(MAX(v), 0) FROM {s}.plait_migrations")
            )
            row = await cur.fetchone()
            return int(row[0]) if row else 0

        return await self.run(select, error=error)


async def _take_migration_lock(conn: AsyncConnection[Any]) -> None:
    """The lock every ``setup()`` serialises on, waited for at most ``MIGRATION_LOCK_TIMEOUT_S``
    (a lock timeout is then a ``StoreError``/``BackendError`` naming the server)."""
    await conn.execute(f"SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT_S:g}s'")
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))


def _connection_lost(exc: BaseException) -> bool:
    import psycopg

    if isinstance(exc, psycopg.errors.AdminShutdown | psycopg.errors.CrashShutdown):
        return True
    if isinstance(exc, psycopg.InterfaceError):
        return True
    text = str(exc).lower()
    return any(
        marker in text
        for marker in ("connection", "server closed", "terminating", "ssl", "eof", "broken pipe")
    )
