"""``PostgresThreadStore``: threads in Postgres, shared by every worker that reaches the server.

Needs ``pip install 'plait[postgres]'``. Tables (created by :meth:`PostgresThreadStore.setup`,
see :mod:`plait.backends.postgres_db` for the migrations): ``plait_threads(thread_id, version,
state, write_token, written)``, ``plait_messages(thread_id, seq, id, json)``,
``plait_leases(thread_id, owner, expires_at)``, and the bytes of images and files apart
(migration 3): ``plait_message_blobs(sha256, size, data)`` holds each blob once,
content-addressed and shared by every thread that holds it, and ``plait_thread_blobs(thread_id,
sha256)`` says which threads hold which. A message row holds only a blob's address; a load
reads the thread's blobs in the same statement as its messages, the bytes only of those not
in memory already (:func:`plait.parts.live_blobs`); an append sends only the blobs
the server lacks. Deleting a thread deletes the blobs no other thread holds (appends that add
blobs and deletes serialise on a transaction-level advisory lock, shared by appends, so a
delete never removes a blob an append is adding a hold on). Rows written before migration 3
(blobs inline as base64) load unchanged.

``append`` is one autocommitted statement when it can be: the version bump applies only to the
version the caller holds (``UPDATE … WHERE version = %s``, the message rows in the same
statement; a new thread's row and rows likewise), one round trip. When it does not apply (a
conflict, a retry whose first attempt committed, messages with images or files) the append is
one transaction: ``SELECT … FOR UPDATE`` on the thread row (or an ``INSERT … ON CONFLICT DO
NOTHING`` for a new thread) serialises writers on the row. Either way, of two writers holding
the same version exactly one commits and the other raises
:class:`~plait.errors.ThreadConflictError` with nothing written. The store never reloads and
carries on: a stale write is always the caller's to handle.

Every call has one deadline, ``timeout`` (default 30 s; the table of every Postgres deadline
is in :mod:`plait.backends.postgres_db`): past it the call is abandoned without waiting on the
server (a frozen server never answers) and raises :class:`~plait.errors.StoreTimeoutError`
naming the call (``append``, ``load``, ``lease acquire``, …), the deadline and how to change it.

A cancelled ``append`` raises ``CancelledError`` only after its write has committed or rolled
back (waiting at most ``SETTLE_TIMEOUT_S``, 30 s, and never past its deadline), never with the
write still in flight; a server that stops answering meanwhile has its connection closed (the
transaction then rolls back, unless its commit had reached the server). Any other cancelled call
returns within about a second, its connection closed rather than waited on.

A connection the server drops mid-call is retried once on a fresh connection. For ``append``
that is safe because each write carries a random ``write_token``: if the first attempt committed
but its acknowledgement was lost, the retry finds its own token at the next version and returns
that version instead of raising a false conflict. Any other failure is a
:class:`~plait.stores.base.StoreError` saying what to do; the transaction was rolled back.

Turns on one thread are serialised across workers by :meth:`PostgresThreadStore.lease` (see
:mod:`plait.stores.lease`); the lease lives in a table, not in a session, so it works behind a
transaction-mode pooler and survives a dropped connection. Taking it also reads the thread,
on the same connection, for the turn's ``load`` that follows (one call fewer a turn: the lease,
two appends and the release); an append or delete through this store drops that snapshot, and
it never outlives the lease. A take retried by the same owner (a lost acknowledgement) takes
the lease again instead of waiting out its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Unpack

from plait.backends.postgres_db import PostgresDatabase, PostgresOptions
from plait.errors import ThreadConflictError
from plait.messages import Message, new_id
from plait.parts import Blob, live_blobs
from plait.stores.base import (
    StoreError,
    ThreadSnapshot,
    messages_from_rows,
    messages_to_rows,
    state_from_json,
    state_to_json,
)
from plait.stores.lease import (
    DEFAULT_LEASE_TTL_S,
    DEFAULT_LEASE_WAIT_S,
    check_lease_options,
    held_lease,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["SETTLE_TIMEOUT_S", "PostgresThreadStore"]

SETTLE_TIMEOUT_S = 30.0

_BLOB_LOCK = 0x706C616963  # appends adding blobs hold it shared, a delete exclusively


class PostgresThreadStore:
    """A :class:`~plait.stores.base.ThreadStore` in Postgres.

    ``target`` is a ``postgresql://`` URL (the store builds and closes its own pool) or an
    ``AsyncConnectionPool`` the application owns (never closed here). ``lease_wait`` (default
    30 s; 0 fails fast) bounds how long a turn waits for a thread busy in another worker;
    ``lease_ttl`` (default 30 s) is how long a dead worker keeps a thread. The other keyword
    ``options`` are the :class:`~plait.backends.postgres_db.PostgresOptions`: ``schema`` names
    the Postgres schema for plait's tables (default ``"public"``), ``prepared_statements=False``
    is for transaction-mode poolers such as PgBouncer, ``max_size`` bounds the pool built from a
    URL (default 10), ``pool_timeout`` (default 30 s) the wait for a connection and ``timeout``
    (default 30 s) each call, all of it: past it the call raises
    :class:`~plait.errors.StoreTimeoutError`.

    Call :meth:`setup` once (any worker, any number of times) before use; until then every call
    raises :class:`~plait.stores.base.StoreError` saying so. :meth:`aclose` closes the pool.
    """

    def __init__(
        self,
        target: str | AsyncConnectionPool[Any] | PostgresDatabase,
        *,
        lease_wait: float = DEFAULT_LEASE_WAIT_S,
        lease_ttl: float = DEFAULT_LEASE_TTL_S,
        **options: Unpack[PostgresOptions],
    ) -> None:
        check_lease_options(lease_wait, lease_ttl)
        self.db = PostgresDatabase.of(target, **options)
        self.lease_wait = lease_wait
        self.lease_ttl = lease_ttl
        self._prefetched: dict[str, ThreadSnapshot] = {}
        """Threads read as their lease was taken, for the turn's ``load`` that comes next."""
        s = self.db.sql
        # One statement, so one snapshot: the messages always match the version read. Both
        # blob arrays come from the same join, so they pair up even when a blob row is missing
        # (the message naming it is then a StoreError saying so).
        self._q_load = s(
            "SELECT version, state, ARRAY(SELECT json FROM {s}.plait_messages m "
            "WHERE m.thread_id = t.thread_id ORDER BY seq), "
            "ARRAY(SELECT b.sha256 FROM {s}.plait_thread_blobs r JOIN {s}.plait_message_blobs b "
            "ON b.sha256 = r.sha256 WHERE r.thread_id = t.thread_id ORDER BY r.sha256), "
            "ARRAY(SELECT CASE WHEN b.sha256 = ANY(%s::text[]) THEN NULL ELSE b.data END "
            "FROM {s}.plait_thread_blobs r JOIN {s}.plait_message_blobs b "
            "ON b.sha256 = r.sha256 WHERE r.thread_id = t.thread_id ORDER BY r.sha256) "
            "FROM {s}.plait_threads t WHERE thread_id = %s"
        )
        # A lease of the same owner counts as free to it: a retry after a lost acknowledgement
        # takes it again instead of waiting out its own lease.
        self._q_take = s(
            "INSERT INTO {s}.plait_leases AS l (thread_id, owner, expires_at) "
            "VALUES (%s, %s, clock_timestamp() + make_interval(secs => %s)) "
            "ON CONFLICT (thread_id) DO UPDATE SET owner = EXCLUDED.owner, "
            "expires_at = EXCLUDED.expires_at WHERE l.expires_at < clock_timestamp() "
            "OR l.owner = EXCLUDED.owner RETURNING owner"
        )
        self._q_blobs_present = s(
            "SELECT sha256 FROM {s}.plait_message_blobs WHERE sha256 = ANY(%s::text[])"
        )
        self._q_blobs = s(
            "INSERT INTO {s}.plait_message_blobs (sha256, size, data) "
            "SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bytea[]) "
            "ON CONFLICT (sha256) DO NOTHING"
        )
        self._q_holds = s(
            "INSERT INTO {s}.plait_thread_blobs (thread_id, sha256) "
            "SELECT %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
        )
        self._q_lock = s(
            "SELECT version, write_token, (SELECT COALESCE(MAX(seq) + 1, 0) "
            "FROM {s}.plait_messages WHERE thread_id = %s) "
            "FROM {s}.plait_threads WHERE thread_id = %s FOR UPDATE"
        )
        self._q_create = s(
            "INSERT INTO {s}.plait_threads (thread_id, version, state, write_token) "
            "VALUES (%s, 1, %s, %s) ON CONFLICT (thread_id) DO NOTHING"
        )
        # The version bump and the message rows in one statement (one round trip).
        self._q_bump = s(
            "WITH bump AS (UPDATE {s}.plait_threads SET version = version + 1, "
            "state = COALESCE(%s, state), write_token = %s, "
            "written = nextval('{s}.plait_thread_writes'), updated_at = clock_timestamp() "
            "WHERE thread_id = %s RETURNING thread_id) "
            "INSERT INTO {s}.plait_messages (thread_id, seq, id, json) "
            "SELECT bump.thread_id, %s + u.n - 1, u.id, u.json FROM bump, "
            "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, json, n)"
        )
        self._q_insert = s(
            "INSERT INTO {s}.plait_messages (thread_id, seq, id, json) "
            "SELECT %s, u.n - 1, u.id, u.json "
            "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, json, n)"
        )
        # An append in one autocommitted statement (one round trip, not BEGIN, lock, write and
        # COMMIT): the bump applies only to the version the caller holds. A row another writer
        # changed after this statement's snapshot is re-checked at its newest version, which
        # is then past the caller's, so when the bump applies no other write came between the
        # snapshot and the row lock, and the snapshot's highest seq is the thread's. When it
        # does not apply (a conflict, a retried write that committed, a thread not yet made)
        # the append takes the locked path, which says which.
        self._q_bump_at = s(
            "WITH bump AS (UPDATE {s}.plait_threads SET version = version + 1, "
            "state = COALESCE(%s, state), write_token = %s, "
            "written = nextval('{s}.plait_thread_writes'), updated_at = clock_timestamp() "
            "WHERE thread_id = %s AND version = %s RETURNING thread_id, version), "
            "rows AS (INSERT INTO {s}.plait_messages (thread_id, seq, id, json) "
            "SELECT bump.thread_id, (SELECT COALESCE(MAX(seq) + 1, 0) FROM {s}.plait_messages "
            "WHERE thread_id = %s) + u.n - 1, u.id, u.json FROM bump, "
            "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, json, n)) "
            "SELECT version FROM bump"
        )
        # A new thread and its first messages in one statement; nothing if the thread exists.
        self._q_create_with = s(
            "WITH made AS (INSERT INTO {s}.plait_threads (thread_id, version, state, write_token) "
            "VALUES (%s, 1, %s, %s) ON CONFLICT (thread_id) DO NOTHING RETURNING thread_id), "
            "rows AS (INSERT INTO {s}.plait_messages (thread_id, seq, id, json) "
            "SELECT made.thread_id, u.n - 1, u.id, u.json FROM made, "
            "unnest(%s::text[], %s::text[]) WITH ORDINALITY AS u(id, json, n)) "
            "SELECT 1 FROM made"
        )

    async def setup(self) -> list[int]:
        """Apply the schema migrations not yet applied (see :mod:`plait.backends.postgres_db`);
        returns their numbers. Safe to run concurrently from several workers."""
        return await self.db.setup(error=StoreError)

    async def aclose(self) -> None:
        """Close the pool if the store built it from a URL."""
        await self.db.aclose()

    async def load(self, thread_id: str) -> ThreadSnapshot:
        prefetched = self._prefetched.pop(thread_id, None)
        if prefetched is not None:
            return prefetched

        async def select(conn: AsyncConnection[Any]) -> ThreadSnapshot:
            return await self._select(conn, thread_id)

        return await self.db.run(select, error=StoreError, operation="load", single=True)

    async def _select(self, conn: AsyncConnection[Any], thread_id: str) -> ThreadSnapshot:
        held = live_blobs()  # in memory already: the server sends no bytes for them
        head = await (await conn.execute(self._q_load, (list(held), thread_id))).fetchone()
        if head is None:
            return ThreadSnapshot(thread_id)
        blobs = {d: b for d, b in zip(head[3], head[4], strict=True) if b is not None}
        messages = messages_from_rows(thread_id, head[2], blobs)
        del held  # the messages hold what they use
        return ThreadSnapshot(thread_id, messages, state_from_json(head[1]), int(head[0]))

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        self._prefetched.pop(thread_id, None)  # stale once this commits
        rows, blobs = messages_to_rows(thread_id, messages)
        state_json = None if state is None else state_to_json(thread_id, state)
        token = new_id()
        ids = [message.id for message in messages]

        async def one_statement(conn: AsyncConnection[Any]) -> int | None:
            if expected_version == 0:
                made = await conn.execute(
                    self._q_create_with, (thread_id, state_json or "{}", token, ids, rows)
                )
                return 1 if await made.fetchone() else None
            bumped = await conn.execute(
                self._q_bump_at,
                (state_json, token, thread_id, expected_version, thread_id, ids, rows),
            )
            head = await bumped.fetchone()
            return None if head is None else int(head[0])

        async def insert(conn: AsyncConnection[Any]) -> int:
            if not conn.autocommit:  # an application's pool: run() opened the transaction
                return await locked(conn)
            if not blobs:
                version = await one_statement(conn)
                if version is not None:
                    return version
            async with self.db.transaction(conn):
                return await locked(conn)

        async def locked(conn: AsyncConnection[Any]) -> int:
            if expected_version == 0:
                created = await conn.execute(self._q_create, (thread_id, state_json or "{}", token))
                if created.rowcount == 1:
                    if rows:
                        await conn.execute(self._q_insert, (thread_id, ids, rows))
                    if blobs:
                        await self._insert_blobs(conn, thread_id, blobs)
                    return 1
            head = await (await conn.execute(self._q_lock, (thread_id, thread_id))).fetchone()
            version = 0 if head is None else int(head[0])
            if version == expected_version + 1 and head is not None and head[1] == token:
                return version  # a retry after a commit whose acknowledgement was lost
            if version != expected_version or head is None:
                raise ThreadConflictError(thread_id, expected_version, version)
            await conn.execute(
                self._q_bump, (state_json, token, thread_id, int(head[2]), ids, rows)
            )
            if blobs:
                await self._insert_blobs(conn, thread_id, blobs)
            return version + 1

        # Cancellation settles (the ThreadStore.append contract): a cancelled caller gets its
        # CancelledError only once the write has committed or rolled back, so its next write
        # sees it; the wait is bounded by SETTLE_TIMEOUT_S and the call's deadline.
        return await self.db.run(
            insert, error=StoreError, operation="append", settle=SETTLE_TIMEOUT_S, single=True
        )

    async def _insert_blobs(
        self, conn: AsyncConnection[Any], thread_id: str, blobs: Mapping[str, Blob]
    ) -> None:
        """Each blob's bytes once (only those the server lacks are sent) and the thread's hold
        on every one, under the shared blob lock (see :meth:`delete`)."""
        await conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (_BLOB_LOCK,))
        digests = list(blobs)
        cur = await conn.execute(self._q_blobs_present, (digests,))
        present = {row[0] for row in await cur.fetchall()}
        missing = [blobs[d] for d in digests if d not in present]
        if missing:
            await conn.execute(
                self._q_blobs,
                ([b.sha256 for b in missing], [b.size for b in missing], [b.data for b in missing]),
            )
        await conn.execute(self._q_holds, (thread_id, digests))

    async def list_threads(self) -> list[str]:
        query = self.db.sql("SELECT thread_id FROM {s}.plait_threads ORDER BY written DESC")

        async def select(conn: AsyncConnection[Any]) -> list[str]:
            return [row[0] for row in await (await conn.execute(query)).fetchall()]

        return await self.db.run(select, error=StoreError, operation="list threads", single=True)

    async def delete(self, thread_id: str) -> bool:
        self._prefetched.pop(thread_id, None)
        s = self.db.sql

        async def remove(conn: AsyncConnection[Any]) -> bool:
            # The thread row, then the blob lock: the order an append takes them in. The
            # blobs only this thread held go too; the exclusive lock waits for the appends
            # adding holds (they take it shared), so the check below sees their holds.
            await conn.execute(
                s("SELECT 1 FROM {s}.plait_threads WHERE thread_id = %s FOR UPDATE"), (thread_id,)
            )
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_BLOB_LOCK,))
            await conn.execute(
                s("DELETE FROM {s}.plait_messages WHERE thread_id = %s"), (thread_id,)
            )
            await conn.execute(
                s(
                    "WITH held AS (DELETE FROM {s}.plait_thread_blobs WHERE thread_id = %s "
                    "RETURNING sha256) DELETE FROM {s}.plait_message_blobs b USING held "
                    "WHERE b.sha256 = held.sha256 AND NOT EXISTS (SELECT 1 FROM "
                    "{s}.plait_thread_blobs r WHERE r.sha256 = b.sha256 AND r.thread_id <> %s)"
                ),
                (thread_id, thread_id),
            )
            cur = await conn.execute(
                s("DELETE FROM {s}.plait_threads WHERE thread_id = %s"), (thread_id,)
            )
            return cur.rowcount > 0

        return await self.db.run(remove, error=StoreError, operation="delete")

    @asynccontextmanager
    async def lease(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's turn lease for the body (see :mod:`plait.stores.lease`).

        Waits at most ``lease_wait`` seconds for a lease another worker holds, then raises
        :class:`~plait.errors.ThreadBusyError`. Expiry uses the server's clock, so workers'
        clocks need not agree.
        """
        s, ttl = self.db.sql, self.lease_ttl
        q_renew = s(
            "UPDATE {s}.plait_leases SET expires_at = clock_timestamp() + "
            "make_interval(secs => %s) WHERE thread_id = %s AND owner = %s"
        )
        q_free = s("DELETE FROM {s}.plait_leases WHERE thread_id = %s AND owner = %s")

        async def acquire(thread: str, owner: str) -> bool:
            # The turn loads the thread next: read it on the same connection once the lease is
            # ours, for ``load`` (one call, not two). A retry after a lost connection takes the
            # lease again: a lease of this owner counts as free to it.
            async def take(conn: AsyncConnection[Any]) -> bool:
                row = await (await conn.execute(self._q_take, (thread, owner, ttl))).fetchone()
                if row is None:
                    return False
                self._prefetched[thread] = await self._select(conn, thread)
                return True

            return await self.db.run(take, error=StoreError, operation="lease acquire", single=True)

        async def renew(thread: str, owner: str) -> bool:
            async def extend(conn: AsyncConnection[Any]) -> bool:
                return (await conn.execute(q_renew, (ttl, thread, owner))).rowcount == 1

            return await self.db.run(extend, error=StoreError, operation="lease renew", single=True)

        async def release(thread: str, owner: str, within: float) -> None:
            # ``within`` is not needed: held_lease cancels this at its deadline, and a cancelled
            # Postgres call returns within about a second (its connection shut, not waited on).
            async def free(conn: AsyncConnection[Any]) -> None:
                await conn.execute(q_free, (thread, owner))

            await self.db.run(free, error=StoreError, operation="lease release", single=True)

        try:
            async with held_lease(
                thread_id,
                acquire=acquire,
                renew=renew,
                release=release,
                wait=self.lease_wait,
                ttl=ttl,
            ):
                yield
        finally:
            self._prefetched.pop(thread_id, None)  # unread (a turn that failed first): dropped
