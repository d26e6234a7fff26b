"""``PostgresTraceStore``: the trace store on a thread store's Postgres database.

Needs ``pip install 'plait[postgres]'`` (psycopg 3 and psycopg-pool). The six tables of
:mod:`plait.trace.store`, named ``plait_trace_*``, come with the thread store's migrations
(numbers 2 and 4 in :mod:`plait.backends.postgres_db`): run ``await store.setup()`` or
``plait db upgrade --store URL`` once; until then a write is a :class:`TraceStoreError` that says
so (the recorder reports it as a non-fatal ``ErrorOccurred``; the turn goes on).

Build it on the thread store's database (``PostgresTraceStore(thread_store.db)``: one pool,
closed by the thread store) or on its own URL or pool. A write is one transaction: the runs and
spans are upserted by id, messages and blobs inserted once (``ON CONFLICT DO NOTHING``), each
table with one ``executemany`` (psycopg sends them in one pipeline); an image's or file's bytes
are sent only when the table lacks them (one ``SELECT`` first). Reads are one transaction
each, so a request is replayed from one snapshot.

Every call has the database's deadline (``timeout``, default 30 s; the table is in
:mod:`plait.backends.postgres_db`): a frozen server makes it a :class:`TraceStoreTimeoutError`
(a ``TraceStoreError``: the recorder reports it as a non-fatal ``ErrorOccurred``) at the deadline.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Unpack

from plait.backends.postgres_db import PostgresDatabase, PostgresOptions
from plait.trace.parts import BinaryRow
from plait.trace.rows import (
    REQUEST_COLUMNS,
    RUN_COLUMNS,
    RequestRow,
    TraceBatch,
    escape_like,
    replay,
    request_row,
    run_dict,
    span_dict,
    storable_batch,
)
from plait.trace.store import MAX_RUNS_LISTED, TraceStoreError, TraceStoreTimeoutError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresTraceStore"]

_COLUMNS = REQUEST_COLUMNS.replace("full", '"full"')


class PostgresTraceStore:
    """A :class:`~plait.trace.store.TraceStore` in Postgres.

    ``target`` is a :class:`~plait.backends.postgres_db.PostgresDatabase` (a thread store's
    ``db``: shared, never closed here), a ``postgresql://`` URL or an application's
    ``AsyncConnectionPool``; the keyword ``options`` are the
    :class:`~plait.backends.postgres_db.PostgresOptions` (schema, prepared statements, pool size
    and wait), ignored for a shared ``PostgresDatabase``.
    """

    def __init__(
        self,
        target: str | AsyncConnectionPool[Any] | PostgresDatabase,
        **options: Unpack[PostgresOptions],
    ) -> None:
        self._shared = isinstance(target, PostgresDatabase)
        self.db = PostgresDatabase.of(target, **options)
        s = self.db.sql
        self._q_run = s(
            "INSERT INTO {s}.plait_trace_runs (id, thread_id, agent, started, finished, status, "
            "error, input, output) VALUES (%(id)s, %(thread_id)s, %(agent)s, %(started)s, "
            "%(finished)s, %(status)s, %(error)s, %(input)s, %(output)s) ON CONFLICT (id) DO "
            "UPDATE SET finished = excluded.finished, status = excluded.status, "
            "error = excluded.error, output = excluded.output"
        )
        self._q_span = s(
            "INSERT INTO {s}.plait_trace_spans (id, run_id, kind, name, dispatch, started, "
            "finished, data) VALUES (%(id)s, %(run_id)s, %(kind)s, %(name)s, %(dispatch)s, "
            "%(started)s, %(finished)s, %(data)s) ON CONFLICT (id) DO UPDATE SET "
            "finished = excluded.finished, data = excluded.data"
        )
        self._q_request = s(
            f"INSERT INTO {{s}}.plait_trace_requests ({_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
        )
        self._q_message = s(
            "INSERT INTO {s}.plait_trace_messages (thread_id, key, role, tokens, kind, body) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
        )
        self._q_blob = s(
            "INSERT INTO {s}.plait_trace_blobs (hash, text) VALUES (%s, %s) ON CONFLICT DO NOTHING"
        )
        self._q_kept = s(
            "SELECT sha256, data IS NOT NULL FROM {s}.plait_trace_binary WHERE sha256 = ANY(%s)"
        )
        self._q_binary = s(
            "INSERT INTO {s}.plait_trace_binary (sha256, media_type, size, data) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (sha256) DO UPDATE SET data = excluded.data "
            "WHERE plait_trace_binary.data IS NULL AND excluded.data IS NOT NULL"
        )

    async def setup(self) -> list[int]:
        """Apply the migrations not yet applied (the thread store's, these tables among them)."""
        return await self.db.setup(error=TraceStoreError, timeout_error=TraceStoreTimeoutError)

    async def aclose(self) -> None:
        """Close the pool, unless the database is shared with a thread store (it closes it)."""
        if not self._shared:
            await self.db.aclose()

    async def write(self, batch: TraceBatch) -> None:
        """Write ``batch`` in one transaction (runs and spans upsert by id)."""
        if not batch:
            return
        batch = storable_batch(batch)

        async def insert(conn: AsyncConnection[Any]) -> None:
            async with conn.cursor() as cur:
                if batch.runs:
                    await cur.executemany(self._q_run, batch.runs)
                if batch.spans:
                    spans = [{**x, "data": json.dumps(x["data"], default=str)} for x in batch.spans]
                    await cur.executemany(self._q_span, spans)
                if batch.requests:
                    await cur.executemany(
                        self._q_request, [_request_values(r) for r in batch.requests]
                    )
                if batch.messages:
                    await cur.executemany(self._q_message, batch.messages)
                if batch.blobs:
                    await cur.executemany(self._q_blob, list(batch.blobs.items()))
                if batch.binary:
                    await cur.execute(self._q_kept, (list(batch.binary),))
                    kept = {str(d) for d, has in await cur.fetchall() if has}
                    rows = [
                        (d, t, n, data) for d, (t, n, data) in batch.binary.items() if d not in kept
                    ]
                    if rows:
                        await cur.executemany(self._q_binary, rows)

        await self.db.run(
            insert,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace write",
        )

    async def runs(self, query: str = "", limit: int = MAX_RUNS_LISTED) -> list[dict[str, Any]]:
        """Runs newest first; ``query`` filters (case-insensitive) on thread id, run id, input
        and output text."""
        like = "%" + escape_like(query.lower()) + "%"
        limit = max(1, min(limit, MAX_RUNS_LISTED))
        statement = self.db.sql(
            f"SELECT {RUN_COLUMNS} FROM {{s}}.plait_trace_runs WHERE lower(thread_id || ' ' || "
            "id || ' ' || input || ' ' || coalesce(output, '')) LIKE %s "
            "ORDER BY started DESC LIMIT %s"
        )

        async def select(conn: AsyncConnection[Any]) -> list[dict[str, Any]]:
            rows = await (await conn.execute(statement, (like, limit))).fetchall()
            return [run_dict(tuple(row)) for row in rows]

        return await self.db.run(
            select,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace runs",
            single=True,
        )

    async def run(self, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A run and its spans in start order, or ``None`` if unknown."""
        s = self.db.sql

        async def select(
            conn: AsyncConnection[Any],
        ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            row = await (
                await conn.execute(
                    s(f"SELECT {RUN_COLUMNS} FROM {{s}}.plait_trace_runs WHERE id = %s"), (run_id,)
                )
            ).fetchone()
            if row is None:
                return None
            spans = await (
                await conn.execute(
                    s(
                        "SELECT id, kind, name, dispatch, started, finished, data FROM "
                        "{s}.plait_trace_spans WHERE run_id = %s ORDER BY started, n"
                    ),
                    (run_id,),
                )
            ).fetchall()
            return run_dict(tuple(row)), [span_dict(tuple(x)) for x in spans]

        return await self.db.run(
            select,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace run",
        )

    async def request(self, span_id: str) -> tuple[RequestRow, list[str], RequestRow | None] | None:
        """The request of model call ``span_id``: its row, its message keys (replayed from the
        last whole row), and the row of the thread's previous request (``None`` for the first)."""
        return await self.db.run(
            lambda conn: self._request(conn, span_id),
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace request",
        )

    async def _request(
        self, conn: AsyncConnection[Any], span_id: str
    ) -> tuple[RequestRow, list[str], RequestRow | None] | None:
        s = self.db.sql
        found = await (
            await conn.execute(
                s(f"SELECT {_COLUMNS} FROM {{s}}.plait_trace_requests WHERE span_id = %s"),
                (span_id,),
            )
        ).fetchone()
        if found is None:
            return None
        target = request_row(tuple(found))
        rows = [
            request_row(tuple(r))
            for r in await (
                await conn.execute(
                    s(
                        f"SELECT {_COLUMNS} FROM {{s}}.plait_trace_requests WHERE thread_id = %s "
                        "AND seq <= %s AND seq >= (SELECT coalesce(max(seq), 0) FROM "
                        '{s}.plait_trace_requests WHERE thread_id = %s AND seq <= %s AND "full") '
                        "ORDER BY seq"
                    ),
                    (target.thread_id, target.seq, target.thread_id, target.seq),
                )
            ).fetchall()
        ]
        keys: list[str] = []
        for row in rows:
            keys = replay(keys, row)
        previous = rows[-2] if len(rows) > 1 else None
        if previous is None and target.seq > 0:
            before = await (
                await conn.execute(
                    s(
                        f"SELECT {_COLUMNS} FROM {{s}}.plait_trace_requests "
                        "WHERE thread_id = %s AND seq = %s"
                    ),
                    (target.thread_id, target.seq - 1),
                )
            ).fetchone()
            previous = None if before is None else request_row(tuple(before))
        return target, keys, previous

    async def messages(self, thread_id: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored messages of ``thread_id`` by key (``body`` is ``None`` for projected ones)."""
        statement = self.db.sql(
            "SELECT key, role, tokens, kind, body FROM {s}.plait_trace_messages "
            "WHERE thread_id = %s AND key = ANY(%s)"
        )

        async def select(conn: AsyncConnection[Any]) -> dict[str, dict[str, Any]]:
            rows = await (await conn.execute(statement, (thread_id, list(keys)))).fetchall()
            return {
                key: {
                    "key": key,
                    "role": role,
                    "tokens": tokens,
                    "kind": kind,
                    "body": None if body is None else json.loads(body),
                }
                for key, role, tokens, kind, body in rows
            }

        return await self.db.run(
            select,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace messages",
            single=True,
        )

    async def blob(self, digest: str) -> str | None:
        """The text stored under ``digest``, or ``None``."""
        statement = self.db.sql("SELECT text FROM {s}.plait_trace_blobs WHERE hash = %s")

        async def select(conn: AsyncConnection[Any]) -> str | None:
            row = await (await conn.execute(statement, (digest,))).fetchone()
            return None if row is None else str(row[0])

        return await self.db.run(
            select,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace blob",
            single=True,
        )

    async def binary(self, sha256: str) -> BinaryRow | None:
        """The image or file stored under ``sha256`` (media type, size, bytes or ``None``)."""
        statement = self.db.sql(
            "SELECT media_type, size, data FROM {s}.plait_trace_binary WHERE sha256 = %s"
        )

        async def select(conn: AsyncConnection[Any]) -> BinaryRow | None:
            row = await (await conn.execute(statement, (sha256,))).fetchone()
            if row is None:
                return None
            return str(row[0]), int(row[1]), None if row[2] is None else bytes(row[2])

        return await self.db.run(select, error=TraceStoreError, single=True)

    async def binary_kept(self, digests: Sequence[str]) -> dict[str, bool]:
        """For each of ``digests`` known here, whether its bytes were kept."""

        async def select(conn: AsyncConnection[Any]) -> dict[str, bool]:
            rows = await (await conn.execute(self._q_kept, (list(digests),))).fetchall()
            return {str(d): bool(kept) for d, kept in rows}

        return await self.db.run(select, error=TraceStoreError, single=True)

    async def last_request(self, thread_id: str) -> tuple[int, list[str]] | None:
        """The sequence number and message keys of the thread's newest request, or ``None``."""
        statement = self.db.sql(
            "SELECT span_id FROM {s}.plait_trace_requests WHERE thread_id = %s "
            "ORDER BY seq DESC LIMIT 1"
        )

        async def select(conn: AsyncConnection[Any]) -> tuple[int, list[str]] | None:
            row = await (await conn.execute(statement, (thread_id,))).fetchone()
            if row is None:
                return None
            found = await self._request(conn, str(row[0]))
            return None if found is None else (found[0].seq, found[1])

        return await self.db.run(
            select,
            error=TraceStoreError,
            timeout_error=TraceStoreTimeoutError,
            operation="trace last request",
        )


def _request_values(r: RequestRow) -> tuple[Any, ...]:
    return (
        r.span_id,
        r.thread_id,
        r.seq,
        r.full,
        json.dumps(r.removed),
        json.dumps(r.added),
        r.system_hash,
        r.tools_hash,
        r.base_prompt_hash,
    )
