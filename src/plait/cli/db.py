"""Where the CLI keeps threads (``--store`` / ``PLAIT_STORE``) and ``plait db upgrade``.

``--store`` (or ``$PLAIT_STORE``) is a SQLite file path or a ``postgresql://`` URL. With a URL,
threads and offloaded results live in that Postgres database (one pool for both); run
``plait db upgrade --store URL`` once first (any number of workers may run it at once).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from plait.cli.console import fail
from plait.errors import PlaitError

__all__ = [
    "StoreTarget",
    "aclose_store",
    "db_app",
    "is_postgres_url",
    "open_backend",
    "open_thread_store",
    "store_target",
]

StoreTarget = str | Path

STORE_HELP = (
    "SQLite file or postgresql:// URL for threads (default: $PLAIT_STORE, else a SQLite file in "
    "the user data directory)."
)

db_app = typer.Typer(help="Set up the Postgres database a store URL names.", no_args_is_help=True)


def is_postgres_url(target: object) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def store_target(option: str | None) -> StoreTarget:
    """``--store`` if given, else ``$PLAIT_STORE``, else the default SQLite file; a path stays a
    :class:`Path`, a ``postgresql://`` URL a ``str``."""
    from plait.cli.agents import default_store

    value = option or os.environ.get("PLAIT_STORE")
    if not value:
        return default_store()
    return value if is_postgres_url(value) else Path(value)


def open_thread_store(target: StoreTarget) -> Any:
    """The thread store for ``target`` (Postgres for a URL, else SQLite)."""
    if is_postgres_url(target):
        from plait.stores.postgres import PostgresThreadStore

        return PostgresThreadStore(str(target))
    from plait.stores.sqlite import SQLiteThreadStore

    return SQLiteThreadStore(target)


def open_backend(store: Any, target: StoreTarget) -> Any:
    """The results backend next to ``store``: the same Postgres database, or the SQLite file
    beside the threads file."""
    if is_postgres_url(target):
        from plait.backends.postgres import PostgresBackend

        return PostgresBackend(store.db)
    from plait.backends.sqlite import SQLiteBackend
    from plait.cli.agents import blob_path

    return SQLiteBackend(blob_path(Path(target)))


async def aclose_store(store: Any) -> None:
    """Close a store or backend, whichever spelling it has (``aclose`` or ``close``)."""
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
        return
    close = getattr(store, "close", None)
    if close is not None:
        close()


@db_app.command("upgrade")
def upgrade(
    store: Annotated[
        str | None, typer.Option("--store", help="postgresql:// URL (default: $PLAIT_STORE).")
    ] = None,
) -> None:
    """Apply every schema migration the database lacks (safe from several workers at once)."""
    target = store_target(store)
    if not is_postgres_url(target):
        fail(
            f"plait db upgrade needs a postgresql:// URL (got {target}); SQLite files set "
            "themselves up on first use.",
            2,
        )
    threads = open_thread_store(target)

    async def run() -> list[int]:
        try:
            return list(await threads.setup())
        finally:
            await threads.aclose()

    try:
        applied = asyncio.run(run())
    except PlaitError as exc:
        fail(str(exc), 1)
    done = ", ".join(map(str, applied)) if applied else "none (already up to date)"
    typer.echo(f"Applied migrations: {done}.")
