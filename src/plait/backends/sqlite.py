"""``SQLiteBackend``: blobs in one SQLite file (the embedded default). The connection every
SQLite component runs on, :class:`SQLiteFile`, lives in :mod:`plait.backends.sqlite_file` and is
re-exported here.

Reads page with ``substr`` inside SQLite, so reading 2,000 characters of a 10 MB blob moves
2,000 characters into Python, not 10 MB. A write is one ``INSERT … ON CONFLICT`` statement in its
own transaction, so a reader sees the old text or the new one, never a mix.

SQLite's string functions stop at an embedded NUL, so a text containing ``"\x00"`` is stored as
its UTF-8 bytes (a BLOB in the same column) and paged in Python; every other text is TEXT.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time

from plait.backends.base import BackendError
from plait.backends.memory import check_page, encode_text, virtual_prefix
from plait.backends.sqlite_file import SQLITE_MAX_VALUE_BYTES, SQLiteFile
from plait.errors import quoted
from plait.paths import normalize_virtual_path

__all__ = ["SQLITE_MAX_VALUE_BYTES", "SQLiteBackend", "SQLiteFile"]

_BLOB_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    path TEXT PRIMARY KEY,
    content TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


def _sqlite_key(key: str) -> str:
    """``key`` (already normalised) if SQLite can store it as TEXT; a lone surrogate, which
    other backends accept, is refused with a :class:`BackendError` rather than escaping from
    the driver as a ``UnicodeEncodeError``."""
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BackendError(
            f"Cannot use the path {quoted(key)} in the SQLite backend: it has a lone surrogate "
            f"({key[exc.start]!r} at index {exc.start}), which SQLite cannot store. "
            "Use a path that is valid Unicode."
        ) from exc
    return key


class SQLiteBackend:
    """A :class:`~plait.backends.base.Backend` storing every blob as a row of one SQLite file.

    Paths are plain keys: ``a`` and ``a/b`` can both hold text (unlike a filesystem). One blob
    is at most ``max_value_bytes`` bytes of UTF-8 (default :data:`SQLITE_MAX_VALUE_BYTES`); a
    larger write raises :class:`BackendError` and leaves the old blob in place. A file that is
    not plait's is refused unchanged (see :class:`SQLiteFile`).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, max_value_bytes: int = SQLITE_MAX_VALUE_BYTES
    ) -> None:
        self._db = SQLiteFile(
            path, schema=_BLOB_SCHEMA, error=BackendError, max_value_bytes=max_value_bytes
        )

    @property
    def path(self) -> str:
        return self._db.path

    async def aclose(self) -> None:
        """Close the database connection (waiting for a running statement); it reopens on the
        next call."""
        await asyncio.to_thread(self._db.close)

    async def write(self, path: str, content: str) -> str:
        """Store ``content`` at ``path``; returns the normalised path."""
        key = _sqlite_key(normalize_virtual_path(path))
        data = encode_text(key, content)
        value: str | bytes = data if "\x00" in content else content

        def upsert(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO blobs (path, content, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(path) DO UPDATE SET content = excluded.content, "
                "updated_at = excluded.updated_at",
                (key, value, time.time()),
            )

        await self._db.write(upsert)
        return key

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        key = _sqlite_key(normalize_virtual_path(path))
        check_page(offset, limit)

        def select(conn: sqlite3.Connection) -> str | None:
            # substr counts the characters of a TEXT value and is 1-based; the 2-argument form
            # reads to the end. A BLOB (text with a NUL) comes back whole and is paged here.
            length = -1 if limit is None else limit
            row = conn.execute(
                "SELECT CASE WHEN typeof(content) = 'text' THEN "
                "CASE WHEN ? < 0 THEN substr(content, ?) ELSE substr(content, ?, ?) END "
                "ELSE content END FROM blobs WHERE path = ?",
                (length, offset + 1, offset + 1, length, key),
            ).fetchone()
            if row is None:
                return None
            value = row[0]
            if isinstance(value, str):
                return value
            text = bytes(value).decode("utf-8")
            return text[offset:] if limit is None else text[offset : offset + limit]

        text = await self._db.read(select)
        if text is None:
            raise FileNotFoundError(
                f"No blob at {quoted(key)} in the SQLite backend {self.path!r}."
            )
        return text

    async def exists(self, path: str) -> bool:
        key = _sqlite_key(normalize_virtual_path(path))

        def select(conn: sqlite3.Connection) -> bool:
            return conn.execute("SELECT 1 FROM blobs WHERE path = ?", (key,)).fetchone() is not None

        return await self._db.read(select)

    async def ls(self, prefix: str = "") -> list[str]:
        root = _sqlite_key(virtual_prefix(prefix))

        def select(conn: sqlite3.Connection) -> list[str]:
            if not root:
                rows = conn.execute("SELECT path FROM blobs").fetchall()
            else:
                # Everything under "a/" sorts in ["a/", "a0"): '0' is the byte after '/'.
                rows = conn.execute(
                    "SELECT path FROM blobs WHERE path = ? OR (path >= ? AND path < ?)",
                    (root, root + "/", root + "0"),
                ).fetchall()
            return sorted(str(row[0]) for row in rows)

        return await self._db.read(select)

    async def delete(self, path: str) -> bool:
        key = _sqlite_key(normalize_virtual_path(path))

        def remove(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM blobs WHERE path = ?", (key,)).rowcount > 0

        return await self._db.write(remove)
