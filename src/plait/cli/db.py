"""Where the CLI keeps threads (``--store`` / ``PLAIT_STORE``) and ``plait db upgrade``.

``--store`` (or ``$PLAIT_STORE``) is a SQLite file path or a ``postgresql://`` URL. With a URL,
threads and offloaded results live in that Postgres database (one pool for both); run
``plait db upgrade --store URL`` once first (any number of workers may run it at once).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plait.cli.console import fail
from plait.errors import PlaitError

if TYPE_CHECKING:
    from plait.backends.base import Backend
    from plait.stores.base import ThreadStore

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

    return SQLiteBackend(blob_path(Path(target)))


def data_dir() -> Path:
    """Where the CLI keeps threads and offloaded results: ``$PLAIT_HOME``, else the platform's
    user data directory (``$XDG_DATA_HOME/plait`` or ``~/.local/share/plait``;
    ``%LOCALAPPDATA%\\plait`` on Windows)."""
    if home := os.environ.get("PLAIT_HOME"):
        return Path(home)
    if sys.platform == "win32" and (local := os.environ.get("LOCALAPPDATA")):
        return Path(local) / "plait"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "plait"


def default_store() -> Path:
    """The SQLite file ``run``/``chat`` keep threads in unless ``--store`` says otherwise."""
    return data_dir() / "threads.sqlite3"


def blob_path(store: Path) -> Path:
    """Where evicted results and offloaded history of the threads in ``store`` go."""
    return store.with_name(store.stem + "-blobs.sqlite3")


async def aclose_store(store: ThreadStore | Backend) -> None:
    """Close a store or backend (``aclose()``, the one lifecycle spelling)."""
    await store.aclose()


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
