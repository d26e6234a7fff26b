"""``SQLiteThreadStore``: threads in one SQLite file (WAL mode), the embedded default.

Two tables: ``threads(thread_id, version, state, updated_at)`` and
``messages(thread_id, seq, id, json)``, one row per message in order. ``append`` is one
``BEGIN IMMEDIATE`` transaction: it takes the database's write lock *before* reading the version,
so of two writers holding the same version — two coroutines, two store instances, two processes —
exactly one commits and the other sees the new version and raises
:class:`~plait.errors.ThreadConflictError` with nothing written.

The sqlite calls run in a worker thread on one connection per store, serialised by a lock (see
:class:`~plait.backends.sqlite.SQLiteFile` for why); the event loop never waits on disk.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from plait.backends.sqlite import SQLITE_MAX_VALUE_BYTES, SQLiteFile
from plait.errors import ThreadConflictError
from plait.messages import Message
from plait.stores.base import (
    StoreError,
    ThreadSnapshot,
    messages_from_json,
    messages_to_json,
    state_from_json,
    state_to_json,
)

__all__ = ["SQLiteThreadStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    thread_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    state TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS threads_by_recency ON threads (updated_at);
CREATE TABLE IF NOT EXISTS messages (
    thread_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
"""


class SQLiteThreadStore:
    """A :class:`~plait.stores.base.ThreadStore` in the SQLite file at ``path``.

    The file and its parent directory are created on first use; ``":memory:"`` gives a private
    in-memory database. A damaged file raises :class:`~plait.stores.base.StoreError` on the
    first call that touches it; so does a file that is not plait's, which is left unchanged.
    One message (as JSON) or the thread state is at most ``max_value_bytes`` bytes (default
    :data:`~plait.backends.sqlite.SQLITE_MAX_VALUE_BYTES`); an append with a larger one raises
    ``StoreError`` saying so and writes nothing. ``aclose()`` releases the connection (the next
    call reopens it).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, max_value_bytes: int = SQLITE_MAX_VALUE_BYTES
    ) -> None:
        self._db = SQLiteFile(
            path, schema=_SCHEMA, error=StoreError, max_value_bytes=max_value_bytes
        )

    @property
    def path(self) -> str:
        return self._db.path

    async def aclose(self) -> None:
        """Close the connection (waiting for a running statement); the next call reopens it."""
        await asyncio.to_thread(self._db.close)

    async def load(self, thread_id: str) -> ThreadSnapshot:
        def select(conn: sqlite3.Connection) -> ThreadSnapshot:
            head = conn.execute(
                "SELECT version, state FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            if head is None:
                return ThreadSnapshot(thread_id)
            rows = conn.execute(
                "SELECT json FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,)
            ).fetchall()
            return ThreadSnapshot(
                thread_id,
                messages_from_json(thread_id, [str(row[0]) for row in rows]),
                state_from_json(str(head[1])),
                int(head[0]),
            )

        return await self._db.read(select)

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        rows = messages_to_json(thread_id, messages)
        state_json = None if state is None else state_to_json(thread_id, state)

        def insert(conn: sqlite3.Connection) -> int:
            head = conn.execute(
                "SELECT version FROM threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            version = 0 if head is None else int(head[0])
            if version != expected_version:
                raise ThreadConflictError(thread_id, expected_version, version)
            (next_seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            conn.executemany(
                "INSERT INTO messages (thread_id, seq, id, json) VALUES (?, ?, ?, ?)",
                [
                    (thread_id, next_seq + i, message.id, row)
                    for i, (message, row) in enumerate(zip(messages, rows, strict=True))
                ],
            )
            updated_at = _recency(conn)
            if head is None:
                conn.execute(
                    "INSERT INTO threads (thread_id, version, state, updated_at) "
                    "VALUES (?, 1, ?, ?)",
                    (thread_id, state_json or "{}", updated_at),
                )
            else:
                conn.execute(
                    "UPDATE threads SET version = version + 1, state = COALESCE(?, state), "
                    "updated_at = ? WHERE thread_id = ?",
                    (state_json, updated_at, thread_id),
                )
            return version + 1

        return await self._db.write(insert)

    async def list_threads(self) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT thread_id FROM threads ORDER BY updated_at DESC")
            return [str(row[0]) for row in rows]

        return await self._db.read(select)

    async def delete(self, thread_id: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM messages WHERE thread_id = ?", (thread_id,))
            deleted = conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
            return deleted.rowcount > 0

        return await self._db.write(remove)


def _recency(conn: sqlite3.Connection) -> float:
    """Now, or just after the latest write if the clock has not moved on (a coarse or stepped
    clock), so ``list_threads`` orders writes exactly as they committed."""
    (latest,) = conn.execute("SELECT MAX(updated_at) FROM threads").fetchone()
    now = time.time()
    return now if latest is None or now > latest else float(latest) + 1e-6
