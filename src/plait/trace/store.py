"""``SQLiteTraceStore``: the timelines a :class:`~plait.trace.TraceRecorder` writes, in SQLite.

Six tables, all prefixed ``trace_`` so a trace store may share a file with a thread store (the
row types both stores share are in :mod:`plait.trace.rows`):

* ``trace_runs``: one row per turn (thread, start, end, status, input and output text).
* ``trace_spans``: model calls, tool calls and middleware actions of a run, with their dispatch,
  start and end (seconds since the epoch), and a JSON ``data`` column (usage, arguments, result
  preview, error, event fields).
* ``trace_requests``: one row per model call, stored as a *delta* against the previous request of
  the same thread: message keys removed and added (with their positions), the system prompt and
  tool list by hash. Reading request *n* replays the deltas since the last full row (every
  :data:`CHECKPOINT_EVERY` calls a request is stored whole, so a replay is bounded).
* ``trace_messages``: each message once per thread, keyed ``id:content-hash``; projected messages
  (skill bodies and anything a persist filter keeps out) are rows with ``body`` NULL, shown by
  reference (role, size, tokens).
* ``trace_blobs``: system prompts, tool lists and full tool outputs, once per content hash.
* ``trace_binary``: the bytes of the images and files the messages and tool results hold, once
  per sha256, with the media type first recorded and the size (``data`` NULL: over the
  recorder's ``max_blob_bytes``, reference only; see :mod:`plait.trace.parts`).

Writes go through :class:`~plait.backends.sqlite.SQLiteFile` (a worker thread, one connection,
WAL with ``synchronous=NORMAL``: a trace commit is not synced to disk, so a power failure may
lose the last traces, never the file); a foreign file is refused with :class:`TraceStoreError`,
unchanged. :class:`TraceStore` is the protocol both stores (this one and
:class:`~plait.trace.postgres.PostgresTraceStore`) implement.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from plait.backends.sqlite import SQLiteFile
from plait.errors import PlaitError, StoreTimeoutError, clipped
from plait.trace.parts import BinaryRow
from plait.trace.rows import (
    REQUEST_COLUMNS,
    RequestRow,
    TraceBatch,
    escape_like,
    replay,
    request_row,
    run_dict,
    span_dict,
    storable_batch,
)

__all__ = [
    "CHECKPOINT_EVERY",
    "MAX_RUNS_LISTED",
    "RequestRow",
    "SQLiteTraceStore",
    "TraceBatch",
    "TraceStore",
    "TraceStoreError",
    "TraceStoreTimeoutError",
    "storable_batch",
]

CHECKPOINT_EVERY = 50
"""Every this many model calls of a thread, a request is stored whole (a bounded replay)."""

MAX_RUNS_LISTED = 500
"""The most runs :meth:`SQLiteTraceStore.runs` returns (newest first)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trace_runs (
    id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, agent TEXT NOT NULL, started REAL NOT NULL,
    finished REAL, status TEXT NOT NULL, error TEXT, input TEXT NOT NULL, output TEXT
);
CREATE INDEX IF NOT EXISTS trace_runs_by_start ON trace_runs (started);
CREATE TABLE IF NOT EXISTS trace_spans (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
    dispatch INTEGER NOT NULL, started REAL NOT NULL, finished REAL NOT NULL, data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS trace_spans_by_run ON trace_spans (run_id, started);
CREATE TABLE IF NOT EXISTS trace_requests (
    span_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, seq INTEGER NOT NULL, full INTEGER NOT NULL,
    removed TEXT NOT NULL, added TEXT NOT NULL, system_hash TEXT NOT NULL,
    tools_hash TEXT NOT NULL, base_prompt_hash TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS trace_requests_by_thread ON trace_requests (thread_id, seq);
CREATE TABLE IF NOT EXISTS trace_messages (
    thread_id TEXT NOT NULL, key TEXT NOT NULL, role TEXT NOT NULL, tokens INTEGER NOT NULL,
    kind TEXT NOT NULL, body TEXT, PRIMARY KEY (thread_id, key)
);
CREATE TABLE IF NOT EXISTS trace_blobs (hash TEXT PRIMARY KEY, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trace_binary (
    sha256 TEXT PRIMARY KEY, media_type TEXT NOT NULL, size INTEGER NOT NULL, data BLOB
);
"""


class TraceStoreError(PlaitError):
    """The trace store's file cannot be used (damaged, foreign, unwritable)."""


class TraceStoreTimeoutError(StoreTimeoutError, TraceStoreError):
    """A trace store call got no answer within its deadline and was abandoned (see
    :class:`~plait.errors.StoreTimeoutError`); caught as a :class:`TraceStoreError` too (the
    recorder reports it and the turn goes on)."""


def unexpected_write_error(error: Exception) -> TraceStoreError:
    """A trace store's failure that is not a ``PlaitError`` (a bug in a custom store), reported
    like one rather than ending the writer with the batches it held."""
    trace_error = TraceStoreError(
        f"The trace store's write failed with {type(error).__name__}: {clipped(str(error), 500)}; "
        "these turns' traces were not written. A TraceStore should raise TraceStoreError."
    )
    trace_error.__cause__ = error
    return trace_error


class TraceStore(Protocol):
    """Where a :class:`~plait.trace.TraceRecorder` writes and the page reads (SQLite, Postgres).

    Every method raises :class:`TraceStoreError` when the database cannot be used."""

    async def write(self, batch: TraceBatch) -> None:
        """Write ``batch`` in one transaction (runs and spans upsert by id; messages and blobs
        are written once)."""
        ...

    async def aclose(self) -> None: ...

    async def runs(self, query: str = "", limit: int = MAX_RUNS_LISTED) -> list[dict[str, Any]]:
        """Runs newest first (at most ``limit``, capped at :data:`MAX_RUNS_LISTED`), filtered
        case-insensitively on thread id, run id, input and output text."""
        ...

    async def run(self, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A run and its spans in start order, or ``None``."""
        ...

    async def request(self, span_id: str) -> tuple[RequestRow, list[str], RequestRow | None] | None:
        """Model call ``span_id``'s row, its replayed message keys, and the previous row."""
        ...

    async def messages(self, thread_id: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored messages of ``thread_id`` by key."""
        ...

    async def blob(self, digest: str) -> str | None:
        """The text stored under ``digest``, or ``None``."""
        ...

    async def binary(self, sha256: str) -> BinaryRow | None:
        """The image or file stored under ``sha256``: media type, size and bytes (``None`` when
        only its reference was kept), or ``None`` if unknown."""
        ...

    async def binary_kept(self, digests: Sequence[str]) -> dict[str, bool]:
        """For each of ``digests`` the trace store knows, whether its bytes were kept."""
        ...

    async def last_request(self, thread_id: str) -> tuple[int, list[str]] | None:
        """The sequence number and message keys of the thread's newest request, or ``None``."""
        ...


class SQLiteTraceStore:
    """Traces in the SQLite file at ``path`` (created on first write; ``":memory:"`` works)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        self._file = SQLiteFile(path, schema=_SCHEMA, error=TraceStoreError, synchronous="NORMAL")

    async def write(self, batch: TraceBatch) -> None:
        """Write ``batch`` in one transaction (runs and spans are upserted by id)."""
        if batch:
            rows = storable_batch(batch)
            await self._file.write(lambda conn: _write(conn, rows))

    async def aclose(self) -> None:
        """Close the connection (the next call opens it again)."""
        self._file.close()

    async def runs(self, query: str = "", limit: int = MAX_RUNS_LISTED) -> list[dict[str, Any]]:
        """Runs newest first, with per-run totals; ``query`` filters (case-insensitive) on the
        thread id, run id, input or output text."""
        like = "%" + escape_like(query.lower()) + "%"
        limit = max(1, min(limit, MAX_RUNS_LISTED))

        def select(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = conn.execute(
                "SELECT id, thread_id, agent, started, finished, status, error, input, output "
                "FROM trace_runs WHERE lower(thread_id || ' ' || id || ' ' || input || ' ' || "
                "coalesce(output, '')) LIKE ? ESCAPE '\\' ORDER BY started DESC LIMIT ?",
                (like, limit),
            ).fetchall()
            return [run_dict(row) for row in rows]

        return await self._file.read(select)

    async def run(self, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """A run and its spans in start order, or ``None`` if unknown."""

        def select(conn: sqlite3.Connection) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
            row = conn.execute(
                "SELECT id, thread_id, agent, started, finished, status, error, input, output "
                "FROM trace_runs WHERE id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                return None
            spans = conn.execute(
                "SELECT id, kind, name, dispatch, started, finished, data FROM trace_spans "
                "WHERE run_id = ? ORDER BY started, rowid",
                (run_id,),
            ).fetchall()
            return run_dict(row), [span_dict(s) for s in spans]

        return await self._file.read(select)

    async def request(self, span_id: str) -> tuple[RequestRow, list[str], RequestRow | None] | None:
        """The request of model call ``span_id``: its row, its message keys (replayed from the
        last whole row), and the row of the thread's previous request (``None`` for the first)."""
        return await self._file.read(lambda conn: _request(conn, span_id))

    async def messages(self, thread_id: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored messages of ``thread_id`` by key (``body`` is ``None`` for projected ones)."""

        def select(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}
            for key, role, tokens, kind, body in _in_chunks(
                conn,
                "SELECT key, role, tokens, kind, body FROM trace_messages "
                "WHERE thread_id = ? AND key IN ({marks})",
                keys,
                thread_id,
            ):
                found[key] = {
                    "key": key,
                    "role": role,
                    "tokens": tokens,
                    "kind": kind,
                    "body": None if body is None else json.loads(body),
                }
            return found

        return await self._file.read(select)

    async def blob(self, digest: str) -> str | None:
        """The text stored under ``digest``, or ``None``."""

        def select(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT text FROM trace_blobs WHERE hash = ?", (digest,)).fetchone()
            return None if row is None else str(row[0])

        return await self._file.read(select)

    async def binary(self, sha256: str) -> BinaryRow | None:
        """The image or file stored under ``sha256`` (media type, size, bytes or ``None``)."""

        def select(conn: sqlite3.Connection) -> BinaryRow | None:
            row = conn.execute(
                "SELECT media_type, size, data FROM trace_binary WHERE sha256 = ?", (sha256,)
            ).fetchone()
            if row is None:
                return None
            return str(row[0]), int(row[1]), None if row[2] is None else bytes(row[2])

        return await self._file.read(select)

    async def binary_kept(self, digests: Sequence[str]) -> dict[str, bool]:
        """For each of ``digests`` known here, whether its bytes were kept."""

        def select(conn: sqlite3.Connection) -> dict[str, bool]:
            query = "SELECT sha256, data IS NOT NULL FROM trace_binary WHERE sha256 IN ({marks})"
            return {str(d): bool(kept) for d, kept in _in_chunks(conn, query, digests)}

        return await self._file.read(select)

    async def last_request(self, thread_id: str) -> tuple[int, list[str]] | None:
        """The sequence number and message keys of the thread's newest request, or ``None``."""

        def select(conn: sqlite3.Connection) -> tuple[int, list[str]] | None:
            row = conn.execute(
                "SELECT span_id FROM trace_requests WHERE thread_id = ? ORDER BY seq DESC LIMIT 1",
                (thread_id,),
            ).fetchone()
            if row is None:
                return None
            found = _request(conn, str(row[0]))
            return None if found is None else (found[0].seq, found[1])

        return await self._file.read(select)


def _write(conn: sqlite3.Connection, batch: TraceBatch) -> None:
    conn.executemany(
        "INSERT INTO trace_runs (id, thread_id, agent, started, finished, status, error, input, "
        "output) VALUES (:id, :thread_id, :agent, :started, :finished, :status, :error, :input, "
        ":output) ON CONFLICT (id) DO UPDATE SET finished = excluded.finished, "
        "status = excluded.status, error = excluded.error, output = excluded.output",
        batch.runs,
    )
    conn.executemany(
        "INSERT OR REPLACE INTO trace_spans (id, run_id, kind, name, dispatch, started, finished, "
        "data) VALUES (:id, :run_id, :kind, :name, :dispatch, :started, :finished, :data)",
        [{**s, "data": json.dumps(s["data"], default=str)} for s in batch.spans],
    )
    conn.executemany(
        "INSERT INTO trace_requests (span_id, thread_id, seq, full, removed, added, system_hash, "
        "tools_hash, base_prompt_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                r.span_id,
                r.thread_id,
                r.seq,
                int(r.full),
                json.dumps(r.removed),
                json.dumps(r.added),
                r.system_hash,
                r.tools_hash,
                r.base_prompt_hash,
            )
            for r in batch.requests
        ],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO trace_messages (thread_id, key, role, tokens, kind, body) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        batch.messages,
    )
    conn.executemany(
        "INSERT OR IGNORE INTO trace_blobs (hash, text) VALUES (?, ?)", batch.blobs.items()
    )
    if batch.binary:
        _write_binary(conn, batch.binary)


def _write_binary(conn: sqlite3.Connection, rows: dict[str, BinaryRow]) -> None:
    """Each blob once: only the digests whose bytes the file lacks are written (a row kept by
    reference gets its bytes when a recorder with a higher cap sends them)."""
    query = "SELECT sha256 FROM trace_binary WHERE sha256 IN ({marks}) AND data IS NOT NULL"
    kept = {str(d) for (d,) in _in_chunks(conn, query, list(rows))}
    conn.executemany(
        "INSERT INTO trace_binary (sha256, media_type, size, data) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (sha256) DO UPDATE SET data = excluded.data "
        "WHERE trace_binary.data IS NULL AND excluded.data IS NOT NULL",
        [(d, t, n, data) for d, (t, n, data) in rows.items() if d not in kept],
    )


def _in_chunks(
    conn: sqlite3.Connection, query: str, values: Sequence[str], *before: str
) -> Iterator[Any]:
    """The rows of ``query`` (its ``IN ({marks})`` list filled) over ``values``, 500 at a
    time (SQLite bounds the parameters of one statement); ``before`` are its first parameters."""
    for start in range(0, len(values), 500):
        chunk = values[start : start + 500]
        yield from conn.execute(query.format(marks=",".join("?" * len(chunk))), (*before, *chunk))


def _request(
    conn: sqlite3.Connection, span_id: str
) -> tuple[RequestRow, list[str], RequestRow | None] | None:
    found = conn.execute(
        f"SELECT {REQUEST_COLUMNS} FROM trace_requests WHERE span_id = ?", (span_id,)
    ).fetchone()
    if found is None:
        return None
    target = request_row(found)
    start = conn.execute(
        "SELECT max(seq) FROM trace_requests WHERE thread_id = ? AND seq <= ? AND full = 1",
        (target.thread_id, target.seq),
    ).fetchone()[0]
    rows = [
        request_row(r)
        for r in conn.execute(
            f"SELECT {REQUEST_COLUMNS} FROM trace_requests WHERE thread_id = ? AND seq >= ? "
            "AND seq <= ? ORDER BY seq",
            (target.thread_id, start if start is not None else 0, target.seq),
        )
    ]
    keys: list[str] = []
    for row in rows:
        keys = replay(keys, row)
    previous = rows[-2] if len(rows) > 1 else None
    if previous is None and target.seq > 0:
        before = conn.execute(
            f"SELECT {REQUEST_COLUMNS} FROM trace_requests WHERE thread_id = ? AND seq = ?",
            (target.thread_id, target.seq - 1),
        ).fetchone()
        previous = None if before is None else request_row(before)
    return target, keys, previous
