"""Runs visible across workers: a small ``plait_serve_runs`` table beside the Postgres thread
store, so a run started on one worker (``plait serve --workers N``) can be read, waited for
and cancelled from any other.

- **What is shared.** The run's view (``GET .../runs/{r}``: status, output, pending calls,
  error), written by the worker that runs it when the run starts and when it ends, one
  autocommitted statement each (so a remote view may still say ``pending`` for a run that
  has started). Its live events stay on that worker: ``.../stream`` from another worker
  waits for the end and sends only the final ``run`` event.
- **Cancel.** Another worker sets the row's ``cancel`` flag; the owner polls the flags of its
  live runs every :data:`CANCEL_POLL` seconds and cancels them (the turn settles as for a
  local cancel); the asking worker answers once the row is terminal, or after
  :data:`REMOTE_WAIT` seconds with the run as it stands.
- **Bounded.** Rows older than :data:`KEEP_S` are deleted every :data:`PRUNE_EVERY` ended
  runs (and at a worker's first). The table is created (``IF NOT EXISTS``, under an advisory
  lock) on first use.

SQLite and the memory store have one worker: runs stay in its memory (no board).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from plait.stores.base import StoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from plait.backends.postgres_db import PostgresDatabase
    from plait.stores.base import ThreadStore

__all__ = ["CANCEL_POLL", "KEEP_S", "REMOTE_POLL", "REMOTE_WAIT", "RunBoard", "board_of"]

CANCEL_POLL = 0.5
"""Seconds between the owner's checks for cancel requests from other workers."""

REMOTE_POLL = 0.2
"""Seconds between reads of another worker's run while waiting for it."""

REMOTE_WAIT = 30.0
"""Seconds a cancel of another worker's run waits for it to settle."""

KEEP_S = 24 * 3600
"""Seconds a run's row is kept after it was last written."""

PRUNE_EVERY = 1000
"""Ended runs between two deletions of the rows older than :data:`KEEP_S`."""

_LOCK = 0x706C61697472756E  # pg_advisory_xact_lock key of the table's creation

logger = logging.getLogger("plait.serve")


class RunBoard:
    """The ``plait_serve_runs`` table of one Postgres database (module docstring)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db
        self._ready = False
        self._ready_lock = asyncio.Lock()
        self._ended = 0

    async def _run(self, fn: Any, operation: str) -> Any:
        if not self._ready:
            async with self._ready_lock:
                if not self._ready:
                    await self.db.run(self._create, error=StoreError, operation="create runs")
                    self._ready = True
        return await self.db.run(fn, error=StoreError, operation=operation, single=True)

    async def _create(self, conn: AsyncConnection[Any]) -> None:
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute(
            self.db.sql(
                "CREATE TABLE IF NOT EXISTS {s}.plait_serve_runs (run_id text PRIMARY KEY, "
                "thread_id text NOT NULL, view jsonb NOT NULL, cancel boolean NOT NULL "
                "DEFAULT false, updated_at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        )

    async def publish(self, view: dict[str, Any], *, ended: bool = False) -> None:
        """Write a run's view (its owner calls this; one autocommitted statement); never
        raises (a failure is logged). Every :data:`PRUNE_EVERY` ended runs, old rows go."""
        sql = self.db.sql

        async def upsert(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                sql(
                    "INSERT INTO {s}.plait_serve_runs (run_id, thread_id, view) VALUES "
                    "(%s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET view = EXCLUDED.view, "
                    "updated_at = clock_timestamp()"
                ),
                (view["run_id"], view["thread_id"], json.dumps(view, default=str)),
            )

        async def prune(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                sql(
                    "DELETE FROM {s}.plait_serve_runs "
                    "WHERE updated_at < clock_timestamp() - make_interval(secs => %s)"
                ),
                (KEEP_S,),
            )

        try:
            await self._run(upsert, "publish run")
            if ended:
                self._ended += 1
                if self._ended % PRUNE_EVERY == 1:
                    await self._run(prune, "prune runs")
        except (StoreError, OSError) as exc:
            logger.warning("run %s not shared with other workers: %s", view["run_id"], exc)

    async def fetch(self, run_id: str) -> dict[str, Any] | None:
        """The view of ``run_id`` as its owner last wrote it, or ``None``."""

        async def select(conn: AsyncConnection[Any]) -> dict[str, Any] | None:
            cur = await conn.execute(
                self.db.sql("SELECT view FROM {s}.plait_serve_runs WHERE run_id = %s"), (run_id,)
            )
            row = await cur.fetchone()
            return None if row is None else dict(row[0])

        found: dict[str, Any] | None = await self._run(select, "read run")
        return found

    async def request_cancel(self, run_id: str) -> None:
        async def flag(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                self.db.sql("UPDATE {s}.plait_serve_runs SET cancel = true WHERE run_id = %s"),
                (run_id,),
            )

        await self._run(flag, "cancel run")

    async def cancel_requests(self, run_ids: list[str]) -> list[str]:
        """Which of ``run_ids`` another worker asked to cancel."""

        async def select(conn: AsyncConnection[Any]) -> list[str]:
            cur = await conn.execute(
                self.db.sql(
                    "SELECT run_id FROM {s}.plait_serve_runs WHERE cancel AND run_id = ANY(%s)"
                ),
                (run_ids,),
            )
            return [row[0] for row in await cur.fetchall()]

        found: list[str] = await self._run(select, "read cancel requests")
        return found


def board_of(store: ThreadStore) -> RunBoard | None:
    """The board for ``store``: one for a Postgres store, ``None`` otherwise."""
    from plait.stores.postgres import PostgresThreadStore

    return RunBoard(store.db) if isinstance(store, PostgresThreadStore) else None
