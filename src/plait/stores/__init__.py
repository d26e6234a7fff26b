"""Thread stores: a conversation's messages and state between runs, with optimistic versioning.

=======================  ========================================================================
store                    what it is for
=======================  ========================================================================
``MemoryThreadStore``    tests and short-lived processes
``SQLiteThreadStore``    the embedded default: one file, WAL, safe across processes
``PostgresThreadStore``  many workers, one database (``plait.stores.postgres``; needs
                         ``pip install 'plait[postgres]'``, psycopg is imported only when used)
=======================  ========================================================================

Each store serialises turns per thread with a lease (see :mod:`plait.stores.lease`).
SQLite and Postgres keep JSON (``dump_messages`` rows and a JSON state object); the memory store
keeps private copies and uses the same codec for anything that is not plain JSON, so a value one
store refuses the others refuse too, with a :class:`ThreadDataError` naming it, and all give
back the same values.

Images and files are kept by content: SQLite and Postgres write each blob's bytes once, in a blob
table keyed by its sha256 and shared by the threads holding it, and the message rows hold only
its address (:func:`plait.stores.base.messages_to_rows`); deleting a thread deletes the blobs no
other thread holds (in the same transaction; there is no separate ``gc``). The memory store
shares the immutable :class:`~plait.parts.Blob` objects. Every part kind round-trips exactly,
bytes and reasoning payloads included.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.errors import StoreTimeoutError
    from plait.stores.base import StoreError, ThreadDataError, ThreadSnapshot, ThreadStore
    from plait.stores.memory import MemoryThreadStore
    from plait.stores.postgres import PostgresThreadStore
    from plait.stores.sqlite import SQLiteThreadStore

__all__ = [
    "MemoryThreadStore",
    "PostgresThreadStore",
    "SQLiteThreadStore",
    "StoreError",
    "StoreTimeoutError",
    "ThreadDataError",
    "ThreadSnapshot",
    "ThreadStore",
]

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.errors": ("StoreTimeoutError",),
            "plait.stores.base": (
                "StoreError",
                "ThreadDataError",
                "ThreadSnapshot",
                "ThreadStore",
            ),
            "plait.stores.memory": ("MemoryThreadStore",),
            "plait.stores.postgres": ("PostgresThreadStore",),
            "plait.stores.sqlite": ("SQLiteThreadStore",),
        },
    )
