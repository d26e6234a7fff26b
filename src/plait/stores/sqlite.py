"""``SQLiteThreadStore``: threads in one SQLite file (WAL mode), the embedded default.

Tables: ``threads(thread_id, version, state, updated_at)``, ``messages(thread_id, seq, id,
json)``, one row per message in order, and the bytes of images and files apart:
``message_blobs(sha256, size, data)`` holds each blob once (content-addressed, shared by every
thread that holds it) and ``thread_blobs(thread_id, sha256)`` says which threads hold which, so a
message row holds only the blob's address; a load reads the bytes of the thread's blobs not in
memory already (:func:`plait.parts.live_blobs`), in one query.
Deleting a thread deletes the blobs no other thread holds. Files from before the blob tables
(message rows with inline base64 blobs) load unchanged: the tables are created when the file
is opened, and old rows are read as they are. ``append`` is one
``BEGIN IMMEDIATE`` transaction: it takes the database's write lock *before* reading the version,
so of two writers holding the same version — two coroutines, two store instances, two processes —
exactly one commits and the other sees the new version and raises
:class:`~plait.errors.ThreadConflictError` with nothing written.

The sqlite calls run on one connection per store, serialised by a lock (see
:class:`~plait.backends.sqlite.SQLiteFile` for why). A turn's own writes are short and commit
on the event loop when nothing has to wait for them: its lease rows (taken, renewed, freed)
without a disk sync (a lease lost to a power failure only expires), and appends of at most
:data:`INLINE_APPEND_BYTES` with no image or file while disk syncs take under
:data:`~plait.backends.sqlite_file.INLINE_SYNC_S`. Everything else, and every write that would
wait (the connection busy, another write queued, another process holding the write lock), runs
in a worker thread with group commit: the event loop never waits on a lock, and waits on the
disk only for the sync of a short append on a fast disk.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from plait.backends.sqlite import SQLITE_MAX_VALUE_BYTES, SQLiteFile
from plait.errors import ThreadConflictError
from plait.messages import Message
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
CREATE TABLE IF NOT EXISTS message_blobs (
    sha256 TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS thread_blobs (
    thread_id TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (thread_id, sha256)
);
CREATE INDEX IF NOT EXISTS thread_blobs_by_blob ON thread_blobs (sha256);
CREATE TABLE IF NOT EXISTS leases (
    thread_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at REAL NOT NULL
);
"""


INLINE_APPEND_BYTES = 64 * 1024
"""An append of at most this many bytes of rows (and no blob) may commit on the event loop."""


class SQLiteThreadStore:
    """A :class:`~plait.stores.base.ThreadStore` in the SQLite file at ``path``.

    The file and its parent directory are created on first use; ``":memory:"`` gives a private
    in-memory database. A damaged file raises :class:`~plait.stores.base.StoreError` on the
    first call that touches it; so does a file that is not plait's, which is left unchanged.
    One message (as JSON) or the thread state is at most ``max_value_bytes`` bytes (default
    :data:`~plait.backends.sqlite.SQLITE_MAX_VALUE_BYTES`); an append with a larger one raises
    ``StoreError`` saying so and writes nothing. ``aclose()`` releases the connection (the next
    call reopens it).

    Turns on one thread are serialised across processes sharing the file by :meth:`lease`:
    ``lease_wait`` (default 30 s; 0 fails fast) bounds the wait for a busy thread, ``lease_ttl``
    (default 30 s) is how long a killed process keeps it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_value_bytes: int = SQLITE_MAX_VALUE_BYTES,
        lease_wait: float = DEFAULT_LEASE_WAIT_S,
        lease_ttl: float = DEFAULT_LEASE_TTL_S,
    ) -> None:
        check_lease_options(lease_wait, lease_ttl)
        self._db = SQLiteFile(
            path, schema=_SCHEMA, error=StoreError, max_value_bytes=max_value_bytes
        )
        self.lease_wait = lease_wait
        self.lease_ttl = lease_ttl
        self._prefetched: dict[str, ThreadSnapshot] = {}
        """Per thread, what its lease read as it was taken, until ``load`` returns it."""

    @property
    def path(self) -> str:
        return self._db.path

    async def aclose(self) -> None:
        """Close the connection (waiting for a running statement); the next call reopens it."""
        await asyncio.to_thread(self._db.close)

    async def load(self, thread_id: str) -> ThreadSnapshot:
        # The snapshot the turn's lease read as it was taken, if this task holds that lease
        # and nothing was written to the thread through this store since: one transaction
        # (and one worker-thread hop) fewer a turn.
        prefetched = self._prefetched.pop(thread_id, None)
        if prefetched is not None:
            return prefetched
        return await self._db.read(lambda conn: _select_thread(conn, thread_id))

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
            if blobs:
                _insert_blobs(conn, thread_id, blobs)
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

        # A turn's messages are a few rows: committed on the event loop when the connection is
        # idle (no worker-thread round trip, see SQLiteFile.write); large ones and images
        # go through the worker thread, which does not hold up other requests meanwhile.
        small = not blobs and sum(map(len, rows)) <= INLINE_APPEND_BYTES
        return await self._db.write(insert, inline=small)

    async def list_threads(self) -> list[str]:
        def select(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT thread_id FROM threads ORDER BY updated_at DESC")
            return [str(row[0]) for row in rows]

        return await self._db.read(select)

    async def delete(self, thread_id: str) -> bool:
        self._prefetched.pop(thread_id, None)

        def remove(conn: sqlite3.Connection) -> bool:
            conn.execute("DELETE FROM messages WHERE thread_id = ?", (thread_id,))
            held = conn.execute(
                "DELETE FROM thread_blobs WHERE thread_id = ? RETURNING sha256", (thread_id,)
            ).fetchall()
            conn.executemany(
                "DELETE FROM message_blobs WHERE sha256 = ? AND NOT EXISTS "
                "(SELECT 1 FROM thread_blobs WHERE sha256 = ?)",
                [(digest, digest) for (digest,) in held],  # qmarks: ?1 with a sequence is
                # deprecated since Python 3.12
            )
            deleted = conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
            return deleted.rowcount > 0

        return await self._db.write(remove)

    @asynccontextmanager
    async def lease(self, thread_id: str) -> AsyncIterator[None]:
        """Hold the thread's turn lease (a row of ``leases`` with an expiry) for the body; see
        :mod:`plait.stores.lease`. Raises :class:`~plait.errors.ThreadBusyError` after
        ``lease_wait`` seconds.

        The transaction that takes the lease also reads the thread, and the next ``load`` of it
        returns that snapshot instead of reading again (a turn loads right after its lease):
        one transaction and one worker-thread hop fewer a turn. An ``append`` or ``delete``
        through this store drops it, and so does the lease's end; a write from elsewhere
        meanwhile makes the turn's append conflict, as it would after any load.

        The lease's writes are not synced to disk (``durable=False``): they survive a crash of
        the process; one lost to a power failure leaves at most a row that expires after
        ``lease_ttl``. They commit on the event loop when the connection is idle."""
        ttl = self.lease_ttl

        def take(conn: sqlite3.Connection, thread: str, owner: str) -> ThreadSnapshot | None:
            """The thread as it stands once the lease is ours, or ``None`` if it is not free."""
            row = conn.execute(
                "SELECT expires_at FROM leases WHERE thread_id = ?", (thread,)
            ).fetchone()
            now = time.time()
            if row is not None and float(row[0]) > now:
                return None
            conn.execute(
                "INSERT OR REPLACE INTO leases (thread_id, owner, expires_at) VALUES (?, ?, ?)",
                (thread, owner, now + ttl),
            )
            return _select_thread(conn, thread)

        def extend(conn: sqlite3.Connection, thread: str, owner: str) -> bool:
            cur = conn.execute(
                "UPDATE leases SET expires_at = ? WHERE thread_id = ? AND owner = ?",
                (time.time() + ttl, thread, owner),
            )
            return cur.rowcount == 1

        def free(conn: sqlite3.Connection, thread: str, owner: str) -> None:
            conn.execute("DELETE FROM leases WHERE thread_id = ? AND owner = ?", (thread, owner))

        async def acquire(thread: str, owner: str) -> bool:
            # The turn loads the thread next: read it in the same transaction, for ``load``.
            snapshot = await self._db.write(
                lambda conn: take(conn, thread, owner), durable=False, inline=True
            )
            if snapshot is None:
                return False
            self._prefetched[thread] = snapshot
            return True

        async def renew(thread: str, owner: str) -> bool:
            return await self._db.write(
                lambda conn: extend(conn, thread, owner), durable=False, inline=True
            )

        async def release(thread: str, owner: str, within: float) -> None:
            # A write in a worker thread cannot be cancelled: bound its waits instead, so the
            # turn's end keeps the LEASE_RELEASE_S promise behind a busy lock.
            await self._db.write(
                lambda conn: free(conn, thread, owner), within=within, durable=False, inline=True
            )

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


def _select_thread(conn: sqlite3.Connection, thread_id: str) -> ThreadSnapshot:
    """The thread as stored, read in the caller's transaction."""
    head = conn.execute(
        "SELECT version, state FROM threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    if head is None:
        return ThreadSnapshot(thread_id)
    rows = conn.execute(
        "SELECT json FROM messages WHERE thread_id = ? ORDER BY seq", (thread_id,)
    ).fetchall()
    held = live_blobs()  # in memory already: their bytes are not read again
    digests = conn.execute(
        "SELECT sha256 FROM thread_blobs WHERE thread_id = ?", (thread_id,)
    ).fetchall()
    wanted = [str(d) for (d,) in digests if d not in held]
    blobs: dict[str, bytes] = {}
    for i in range(0, len(wanted), 500):  # under SQLite's bound on parameters
        chunk = wanted[i : i + 500]
        marks = ",".join("?" * len(chunk))
        blobs.update(
            (str(d), bytes(b))
            for d, b in conn.execute(
                f"SELECT sha256, data FROM message_blobs WHERE sha256 IN ({marks})", chunk
            )
        )
    messages = messages_from_rows(thread_id, [str(row[0]) for row in rows], blobs)
    del held  # the messages hold what they use
    return ThreadSnapshot(thread_id, messages, state_from_json(str(head[1])), int(head[0]))


def _insert_blobs(conn: sqlite3.Connection, thread_id: str, blobs: Mapping[str, Blob]) -> None:
    """Each blob's bytes once (only those the file lacks are sent to SQLite), and the thread's
    hold on every one of them."""
    digests = list(blobs)
    marks = ",".join("?" * len(digests))
    present = {
        str(row[0])
        for row in conn.execute(
            f"SELECT sha256 FROM message_blobs WHERE sha256 IN ({marks})", digests
        )
    }
    conn.executemany(
        "INSERT INTO message_blobs (sha256, size, data) VALUES (?, ?, ?) "
        "ON CONFLICT (sha256) DO NOTHING",
        [(d, b.size, b.data) for d, b in blobs.items() if d not in present],
    )
    conn.executemany(
        "INSERT INTO thread_blobs (thread_id, sha256) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(thread_id, d) for d in digests],
    )


def _recency(conn: sqlite3.Connection) -> float:
    """Now, or just after the latest write if the clock has not moved on (a coarse or stepped
    clock), so ``list_threads`` orders writes exactly as they committed."""
    (latest,) = conn.execute("SELECT MAX(updated_at) FROM threads").fetchone()
    now = time.time()
    return now if latest is None or now > latest else float(latest) + 1e-6
