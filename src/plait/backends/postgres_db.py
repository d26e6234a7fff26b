"""``PostgresDatabase``: the connection pool and the numbered schema migrations that
:class:`~plait.stores.postgres.PostgresThreadStore` and
:class:`~plait.backends.postgres.PostgresBackend` run on.

Needs ``pip install 'plait[postgres]'`` (psycopg 3 and psycopg-pool); psycopg is imported when
a database is built, never by ``import plait``.

Connections come from a ``psycopg_pool.AsyncConnectionPool``, either built here from a
``postgresql://`` URL (then :meth:`PostgresDatabase.aclose` closes it) or owned by the application
(then plait never closes it). A pool built here uses ``autocommit=True``, checks a connection
as it is handed out (``check_connection``: one the server killed — idle timeout,
``pg_terminate_backend``, a restart — is replaced, not used) unless it came back to the pool
less than ``CHECK_AFTER_IDLE_S`` (2 s) ago (:mod:`plait.backends.postgres_recent`: a busy worker
skips a round trip a call; after any call whose connection broke, every connection is checked
again), and recycles connections after
``max_idle`` (5 min) / ``max_lifetime`` (30 min). A write of several statements runs in one
explicit transaction (a single statement is atomic on its own), so a connection lost mid-write
leaves nothing half-written.

Behind a transaction-mode pooler (PgBouncer) pass ``prepared_statements=False``: psycopg then
never prepares a statement on the server (``prepare_threshold=None``), which such a pooler cannot
route ("prepared statement "_pg3_0" does not exist").

Deadlines. A server that stops answering (a frozen host, a network partition) sends no error
either, so every call runs under one client-side deadline covering all of it (the wait for a
connection, the pool's check of it, the statements, a retry) and is abandoned past it without
waiting on the server (:mod:`plait.backends.postgres_deadline`). The thread store, the backend
and the trace store share these (they take the same ``timeout=`` option):

=====================================  ==================================  =======================
what                                   default                             set with
=====================================  ==================================  =======================
one call, all of it                    30 s, then ``StoreTimeoutError``    ``timeout=`` (> 0;
                                       (``BackendTimeoutError``,           ``math.inf``: none)
                                       ``TraceStoreTimeoutError``) naming
                                       the call and the deadline
its wait for a free connection         30 s (within the call's deadline)   ``pool_timeout=``
server side: ``statement_timeout``,    the call's deadline; a statement    ``timeout=``
``lock_timeout``,                      the server ends at one is a
``idle_in_transaction_session_         ``StoreTimeoutError`` too
timeout``
a cancelled call                       about 1 s: a cancel request         ``CANCEL_TIMEOUT_S``,
                                       (0.5 s, none behind a pooler), its  ``UNWIND_TIMEOUT_S`` in
                                       connection shut, 0.5 s to unwind    ``postgres_deadline``
a cancelled ``append``                 settles first: at most 30 s and     ``SETTLE_TIMEOUT_S``
                                       never past its deadline
``setup()``, each step                 the call's deadline + 120 s for     ``timeout=``,
                                       another worker's migration lock     ``MIGRATION_LOCK_
                                                                           TIMEOUT_S``
a silent peer (libpq, pools built      keepalives after 10 s idle, 5 s     the URL:
here)                                  apart, 3 probes;                    ``?keepalives_idle=30``
                                       ``tcp_user_timeout`` 30 s;          (the URL's own win)
                                       ``connect_timeout`` 10 s
=====================================  ==================================  =======================

The server-side timeouts go in the startup options of the connections of a pool built here, or,
behind a pooler (``prepared_statements=False``: a transaction-mode pooler drops or refuses
startup options, and a session ``SET`` would leak to its other clients) and on an application's
pool, are set with ``SET LOCAL`` as each transaction starts; a one-statement call there keeps
the server's own settings (``ALTER ROLE … SET statement_timeout``, PgBouncer's
``query_timeout``), the client-side deadline still bounds it. An abandoned call's transaction
rolls back; a single statement the server had already received (a lease, a blob, an append
without images or files) may still take effect if the server resumes. An application's pool
should be built with ``check=PostgresDatabase.check_connection``, or a frozen server can hold a
call in the pool's check past its deadline by psycopg's cancellation wait (up to 10 s).

Migrations: :mod:`plait.backends.postgres_schema`.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from plait.backends.postgres_deadline import CURRENT_CALL, bounded, connection_lost, server_deadline
from plait.backends.postgres_recent import RecentReturns
from plait.backends.postgres_schema import (
    MIGRATION_LOCK_TIMEOUT_S,
    MIGRATIONS,
    apply_migrations,
    read_schema_version,
)
from plait.errors import ConfigurationError, PlaitError, StoreTimeoutError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "MIGRATION_LOCK_TIMEOUT_S", "PostgresDatabase", "PostgresOptions"]

T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

DEFAULT_POOL_TIMEOUT_S = 30.0
DEFAULT_TIMEOUT_S = 30.0
# libpq settings for the connections of a pool built from a URL, unless the URL sets them: a peer
# gone silent is noticed on an idle connection in about 25 s, on a busy one in 30 s.
_CONNECTION_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
    "connect_timeout": "10",
}
_SERVER_TIMEOUTS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
DEFAULT_MAX_SIZE = 10


class PostgresOptions(TypedDict, total=False):
    """The connection options of :class:`PostgresDatabase`, which the Postgres thread store,
    backend and trace store take as keywords beside their ``target`` and pass on: ``schema``
    (default ``"public"``), ``prepared_statements`` (default ``True``; ``False`` behind
    PgBouncer in transaction mode), ``max_size`` (default 10), ``pool_timeout`` (default
    30 s) and ``timeout`` (default 30 s, the deadline of each call). A ``target`` that is
    already a :class:`PostgresDatabase` keeps its own."""

    schema: str
    prepared_statements: bool
    max_size: int
    pool_timeout: float
    timeout: float


class PostgresDatabase:
    """One Postgres database (and schema) shared by a thread store and a backend.

    ``target`` is a ``postgresql://`` URL or an ``AsyncConnectionPool`` the application owns.
    ``schema`` (default ``"public"``) holds plait's tables; it must be a plain lower-case SQL
    name and is created by :meth:`setup` if missing. ``timeout`` is the deadline of each call,
    all of it (default 30 s; > 0, ``math.inf`` for none): past it the call is abandoned and
    raises :class:`~plait.errors.StoreTimeoutError` (see the module docstring).
    ``pool_timeout`` bounds the part of it spent waiting for a free connection (default 30 s;
    > 0). ``max_size`` bounds the pool built from a URL (default 10; >= 1). A value outside
    these is a :class:`~plait.errors.ConfigurationError` here. The pool opens on first use, in
    the running event loop. An application's pool should be built with
    ``check=PostgresDatabase.check_connection`` so that a frozen server cannot hold a call in
    the pool's check past its deadline.
    """

    def __init__(
        self,
        target: str | AsyncConnectionPool[Any],
        *,
        schema: str = "public",
        prepared_statements: bool = True,
        max_size: int = DEFAULT_MAX_SIZE,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT_S,
        timeout: float = DEFAULT_TIMEOUT_S,
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
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigurationError(
                f"Invalid Postgres timeout {timeout!r}: use a number of seconds > 0 "
                f"(default {DEFAULT_TIMEOUT_S:g}; math.inf for no deadline)."
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
        self._recent = RecentReturns()
        self._timeout = pool_timeout
        self.timeout = float(timeout)
        # Server-side timeouts go in the startup options where plait builds the connections and
        # nothing between drops them; elsewhere each transaction sets them with SET LOCAL.
        self._session_timeouts = self._owned and prepared_statements
        ms = 0 if math.isinf(self.timeout) else max(1, math.ceil(self.timeout * 1000))
        self._timeout_settings = {name: ms for name in _SERVER_TIMEOUTS}
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
                # The pool's background workers copy this context: not the call that opens it.
                outside = CURRENT_CALL.set(None)
                try:
                    self._pool = await self._open()
                finally:
                    CURRENT_CALL.reset(outside)
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
                **self._connection_settings(self._target),
            },
            check=self._check,
            reset=self._recent.returned,
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

    def _connection_settings(self, url: str) -> dict[str, str]:
        """libpq keepalives and timeouts the URL does not set, and (on a direct connection)
        the server-side timeouts as startup options."""
        from psycopg.conninfo import conninfo_to_dict

        given = conninfo_to_dict(url)
        settings = {k: v for k, v in _CONNECTION_DEFAULTS.items() if k not in given}
        if self._session_timeouts:
            ours = " ".join(f"-c {k}={v}" for k, v in self._timeout_settings.items())
            # The URL's own -c settings come last, so they win.
            settings["options"] = f"{ours} {given.get('options', '')}".strip()
        return settings

    async def _check(self, conn: AsyncConnection[Any]) -> None:
        """The check of this database's own pool: none for a connection just back in it."""
        if not self._recent.fresh(conn):
            await PostgresDatabase.check_connection(conn)

    @staticmethod
    async def check_connection(conn: AsyncConnection[Any]) -> None:
        """psycopg_pool's ``check_connection`` (one empty statement), with ``conn`` registered
        to the call waiting for it, so that a frozen server cannot hold the call in the check
        past its deadline. Pools built here use it; pass it as ``check=`` to your own."""
        from psycopg_pool import AsyncConnectionPool

        call = CURRENT_CALL.get()
        if call is None:
            await AsyncConnectionPool.check_connection(conn)
            return
        call.hold(conn)
        try:
            await AsyncConnectionPool.check_connection(conn)
        except Exception:
            if call.abandoned:
                # The pool would take the next connection and check it again until its own
                # timeout; the call is over, so stop it here.
                raise asyncio.CancelledError from None
            raise
        finally:
            call.drop(conn)

    async def aclose(self) -> None:
        """Close the pool if plait built it; an application's pool is left open. A pool whose
        event loop has ended is only dropped (its connections went with that loop)."""
        if self._owned and self._pool is not None:
            pool, self._pool = self._pool, None
            if self._loop is asyncio.get_running_loop():
                await pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection from the pool, registered to the running call (if any) until it is
        back in the pool, so that abandoning the call shuts it instead of waiting on it."""
        pool = await self.pool()
        call = CURRENT_CALL.get()
        taken: AsyncConnection[Any] | None = None
        try:
            async with pool.connection(timeout=self._timeout) as conn:
                taken = conn
                if call is not None:
                    call.hold(conn)
                yield conn
        finally:
            if call is not None and taken is not None:
                call.drop(taken)

    async def run(
        self,
        fn: Callable[[AsyncConnection[Any]], Awaitable[T]],
        *,
        error: type[PlaitError],
        timeout_error: type[StoreTimeoutError] = StoreTimeoutError,
        operation: str = "a call",
        retry: bool = True,
        single: bool = False,
        settle: float = 0.0,
        deadline: float | None = None,
    ) -> T:
        """``fn(conn)`` inside one transaction, committed if it returns, rolled back if it raises.
        With ``single=True``, ``fn`` runs exactly one statement, which autocommit makes atomic on
        its own: no ``BEGIN``/``COMMIT`` round trips.

        All of it runs within ``deadline`` seconds (default: the database's ``timeout``); past
        them the call is abandoned without waiting on the server and ``timeout_error`` names
        ``operation``. A cancelled caller gets its ``CancelledError`` within about a second;
        with ``settle``, only after the call finished (at most ``settle`` seconds, within its
        deadline), so a cancelled write has committed or rolled back when it raises.

        A ``PlaitError`` from ``fn`` passes through unchanged; every psycopg or pool failure
        becomes ``error(message)`` saying what to do: the server unreachable or gone, the pool
        exhausted for ``pool_timeout``, plait's tables missing (``setup()`` not run).

        With ``retry`` (the default), a call whose connection broke is run once more on a fresh
        connection: the server rolled the failed transaction back, so ``fn`` must only be safe
        to run again after a rollback (every caller's is; ``append`` checks its write token).
        Without psycopg installed: a ``ConfigurationError`` with the ``pip install`` command.
        """
        seconds = self.timeout if deadline is None else deadline
        where = f"Postgres at {self.description}"

        def expired() -> StoreTimeoutError:
            return timeout_error(operation, seconds, where)

        async def attempts() -> T:
            return await self._attempts(
                fn, error, timeout_error, operation, seconds, retry=retry, single=single
            )

        return await bounded(
            attempts, seconds, expired, settle=settle, cancel=self.prepared_statements
        )

    async def _attempts(
        self,
        fn: Callable[[AsyncConnection[Any]], Awaitable[T]],
        error: type[PlaitError],
        timeout_error: type[StoreTimeoutError],
        operation: str,
        seconds: float,
        *,
        retry: bool,
        single: bool,
    ) -> T:
        try:
            import psycopg
            from psycopg_pool import PoolTimeout
        except ImportError as exc:
            raise ConfigurationError(
                "The Postgres store needs psycopg: pip install 'plait[postgres]'."
            ) from exc

        call = CURRENT_CALL.get()
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                async with self.connection() as conn:
                    if single and conn.autocommit:
                        return await fn(conn)
                    async with self.transaction(conn):
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
                setting = server_deadline(exc)
                if setting is not None:
                    raise timeout_error(
                        operation,
                        seconds,
                        f"Postgres at {self.description}",
                        cause=f"the server ended it at its {setting}",
                    ) from exc
                lost = connection_lost(exc)
                if lost:  # the others may be gone too (a restart): check each before use
                    self._recent.forget()
                if lost and attempt + 1 < attempts and not (call and call.abandoned):
                    await self._drop_dead()
                    continue
                raise self._failure(exc, lost, error) from exc
        raise AssertionError("unreachable")

    @asynccontextmanager
    async def transaction(self, conn: AsyncConnection[Any]) -> AsyncIterator[None]:
        """One transaction on ``conn`` for the block (``BEGIN``, then ``SET LOCAL`` of the
        server-side timeouts where the session lacks them); a ``single`` call whose one
        statement did not apply opens one here for its slower path."""
        async with conn.transaction():
            if not self._session_timeouts:
                await conn.execute(self.set_local_timeouts())
            yield

    async def _drop_dead(self) -> None:
        """After a lost connection: check the idle connections at once, dropping the dead
        (``pool.check()``; the hand-out check slept a backoff of 1, 2, 4 ... s per dead one)."""
        try:
            await (await self.pool()).check()
        except Exception:  # the retry reports what is wrong
            return

    def set_local_timeouts(self, ms: int | None = None) -> bytes:
        """``SET LOCAL`` of the server-side timeouts (``ms``, default the database's), one
        round trip (no parameters: psycopg sends it as a simple query)."""
        values = self._timeout_settings if ms is None else dict.fromkeys(_SERVER_TIMEOUTS, ms)
        return "; ".join(f"SET LOCAL {k} = {v}" for k, v in values.items()).encode()

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

    async def setup(
        self,
        *,
        error: type[PlaitError],
        timeout_error: type[StoreTimeoutError] = StoreTimeoutError,
    ) -> list[int]:
        """Create the schema and apply every migration not yet applied; return their numbers.

        Safe to call from several workers at once (each migration runs once) and again later
        (nothing to do returns ``[]``). Each step's deadline is ``timeout`` plus the
        ``MIGRATION_LOCK_TIMEOUT_S`` (120 s) it may wait for another worker's migration
        (:func:`plait.backends.postgres_schema.apply_migrations`).
        """
        return await apply_migrations(self, error=error, timeout_error=timeout_error)

    async def schema_version(self, *, error: type[PlaitError]) -> int:
        """The highest applied migration (0 before :meth:`setup`)."""
        return await read_schema_version(self, error=error)
