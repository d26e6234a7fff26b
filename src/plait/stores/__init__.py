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
All keep the same JSON (``dump_messages`` rows and a JSON state object), so a value one store
refuses the other refuses too, with a :class:`ThreadDataError` naming it.
"""

from plait.stores.base import StoreError, ThreadDataError, ThreadSnapshot, ThreadStore
from plait.stores.memory import MemoryThreadStore
from plait.stores.postgres import PostgresThreadStore
from plait.stores.sqlite import SQLiteThreadStore

__all__ = [
    "MemoryThreadStore",
    "PostgresThreadStore",
    "SQLiteThreadStore",
    "StoreError",
    "ThreadDataError",
    "ThreadSnapshot",
    "ThreadStore",
]
