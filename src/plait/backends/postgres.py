"""``PostgresBackend``: evicted results and offloaded history in Postgres, one row per blob.

Needs ``pip install 'plait[postgres]'``; shares its pool and migrations with
:class:`~plait.stores.postgres.PostgresThreadStore` through
:class:`~plait.backends.postgres_db.PostgresDatabase` (pass one ``PostgresDatabase`` to both).

Reads page with ``substr`` inside Postgres (characters, as the database is UTF-8), so reading a
page of a 10 MB blob moves the page, not 10 MB. A write is one ``INSERT … ON CONFLICT`` in its
own transaction, so a reader sees the old text or the new one, never a mix. Postgres ``text``
cannot hold NUL, so a text containing ``"\\x00"`` is stored as UTF-8 in a ``bytea`` column and
paged in Python. A key longer than 2,000 UTF-8 bytes is refused (a B-tree key must fit in a
third of a page).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from plait.backends.base import BackendError, BackendTimeoutError
from plait.backends.memory import check_page, encode_text, virtual_prefix
from plait.backends.postgres_db import PostgresDatabase, PostgresOptions
from plait.paths import normalize_virtual_path

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresBackend"]

MAX_KEY_BYTES = 2000
T = TypeVar("T")


def _key(path: str) -> str:
    key = normalize_virtual_path(path)
    _check_key(key)
    return key


def _check_key(key: str) -> None:
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BackendError(
            f"Cannot use the path {key!r} in the Postgres backend: it has a lone surrogate "
            f"({key[exc.start]!r} at index {exc.start}). Use a path that is valid Unicode."
        ) from exc
    if size > MAX_KEY_BYTES:
        raise BackendError(
            f"The path {key[:60]!r}… is {size} bytes; the Postgres backend keys at most "
            f"{MAX_KEY_BYTES}. Use shorter names."
        )


class PostgresBackend:
    """A :class:`~plait.backends.base.Backend` storing every blob as a row of ``plait_blobs``.

    ``target`` is a ``postgresql://`` URL, an application-owned ``AsyncConnectionPool``, or a
    :class:`PostgresDatabase` shared with a thread store; the keyword ``options`` are the
    :class:`~plait.backends.postgres_db.PostgresOptions` (schema, prepared statements, pool size
    and wait, ``timeout``: each call's deadline, default 30 s, past which it raises
    :class:`~plait.backends.base.BackendTimeoutError`). Call :meth:`setup` once before use.
    Paths are plain keys: ``a`` and ``a/b`` can both hold text.
    """

    def __init__(
        self,
        target: str | AsyncConnectionPool[Any] | PostgresDatabase,
        **options: Unpack[PostgresOptions],
    ) -> None:
        self.db = PostgresDatabase.of(target, **options)

    async def setup(self) -> list[int]:
        """Apply the schema migrations not yet applied; returns their numbers."""
        return await self.db.setup(error=BackendError, timeout_error=BackendTimeoutError)

    async def aclose(self) -> None:
        """Close the pool if it was built from a URL."""
        await self.db.aclose()

    async def write(self, path: str, content: str) -> str:
        """Store ``content`` at ``path``; returns the normalised path."""
        key = _key(path)
        data = encode_text(key, content)
        text, raw = (None, data) if "\x00" in content else (content, None)
        query = self.db.sql(
            "INSERT INTO {s}.plait_blobs (path, content, raw) VALUES (%s, %s, %s) "
            "ON CONFLICT (path) DO UPDATE SET content = EXCLUDED.content, raw = EXCLUDED.raw, "
            "updated_at = clock_timestamp()"
        )

        async def upsert(conn: AsyncConnection[Any]) -> None:
            await conn.execute(query, (key, text, raw))

        await self._run(upsert, "backend write")
        return key

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        key = _key(path)
        check_page(offset, limit)
        if limit is None:
            query = self.db.sql(
                "SELECT substr(content, %s), raw FROM {s}.plait_blobs WHERE path = %s"
            )
            params: tuple[object, ...] = (offset + 1, key)
        else:
            query = self.db.sql(
                "SELECT substr(content, %s, %s), raw FROM {s}.plait_blobs WHERE path = %s"
            )
            params = (offset + 1, limit, key)

        async def select(conn: AsyncConnection[Any]) -> tuple[str | None, bytes | None] | None:
            row = await (await conn.execute(query, params)).fetchone()
            return None if row is None else (row[0], row[1])

        found = await self._run(select, "backend read")
        if found is None:
            raise FileNotFoundError(f"No blob at {key!r} in the Postgres backend.")
        text, raw = found
        if text is not None:
            return text
        whole = bytes(raw or b"").decode("utf-8")
        return whole[offset:] if limit is None else whole[offset : offset + limit]

    async def exists(self, path: str) -> bool:
        key = _key(path)
        query = self.db.sql("SELECT 1 FROM {s}.plait_blobs WHERE path = %s")

        async def select(conn: AsyncConnection[Any]) -> bool:
            return await (await conn.execute(query, (key,))).fetchone() is not None

        return await self._run(select, "backend exists")

    async def ls(self, prefix: str = "") -> list[str]:
        root = virtual_prefix(prefix)
        if root:
            _check_key(root)
        # Everything under "a/" sorts in ["a/", "a0") in the C collation: '0' follows '/'.
        query = self.db.sql(
            "SELECT path FROM {s}.plait_blobs WHERE %s = '' OR path = %s "
            "OR (path >= %s AND path < %s)"
        )

        async def select(conn: AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(query, (root, root, root + "/", root + "0"))
            return sorted(row[0] for row in await cur.fetchall())

        return await self._run(select, "backend ls")

    async def delete(self, path: str) -> bool:
        key = _key(path)
        query = self.db.sql("DELETE FROM {s}.plait_blobs WHERE path = %s")

        async def remove(conn: AsyncConnection[Any]) -> bool:
            return (await conn.execute(query, (key,))).rowcount > 0

        return await self._run(remove, "backend delete")

    def _run(
        self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]], operation: str
    ) -> Awaitable[T]:
        """One statement under the database's deadline (a :class:`BackendTimeoutError` past
        it)."""
        return self.db.run(
            fn,
            error=BackendError,
            timeout_error=BackendTimeoutError,
            operation=operation,
            single=True,
        )
