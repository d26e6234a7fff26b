"""Which pooled connections the pool may hand out without checking them first.

psycopg_pool's check sends an empty statement before every hand-out, so a connection the server
killed is replaced instead of failing the call. That is one more round trip a call: on a busy
worker (a served turn makes five to seven calls) it was about a fifth of the Postgres time a turn
and a tenth of the worker's CPU. A connection that came back to the pool less than
:data:`CHECK_AFTER_IDLE_S` ago is handed out unchecked (the local ``closed``/``broken`` flags
still are); one that sat idle longer is checked as before.

A connection the server killed in that window fails its statement as a lost connection; the
call then runs once more on another connection (``PostgresDatabase.run``'s retry), and
:meth:`RecentReturns.forget` makes every connection be checked again first, so a server restart
that killed the whole pool costs the failed statement, not the call.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["CHECK_AFTER_IDLE_S", "RecentReturns"]

CHECK_AFTER_IDLE_S = 2.0
"""A connection back in the pool for less than this (seconds) is handed out unchecked."""


class RecentReturns:
    """When each connection of one pool came back to it (the pool's ``reset=`` callback)."""

    def __init__(self, within: float = CHECK_AFTER_IDLE_S) -> None:
        self.within = within
        self._returned: WeakKeyDictionary[AsyncConnection[Any], float] = WeakKeyDictionary()

    async def returned(self, conn: AsyncConnection[Any]) -> None:
        """``conn`` is back in the pool, idle (psycopg_pool's ``reset`` callback)."""
        self._returned[conn] = time.monotonic()

    def fresh(self, conn: AsyncConnection[Any]) -> bool:
        """Whether ``conn``, being handed out, may skip the check: it came back within
        ``within`` seconds and is neither closed nor known broken."""
        back = self._returned.pop(conn, None)
        return (
            back is not None
            and time.monotonic() - back < self.within
            and not conn.closed
            and not conn.broken
        )

    def forget(self) -> None:
        """A call lost its connection: check every connection before its next use."""
        self._returned.clear()
