"""DBOS's SQLite system database: write-ahead logging, and a SQLite older than 3.42 under
Python 3.12 or later.

Every DBOS step is a committed write; in SQLite's default rollback-journal mode with
``synchronous=FULL`` each commit syncs the journal and the database file. The system database's
connections are opened in WAL mode with ``synchronous=NORMAL`` (the setting SQLite documents for
WAL): a commit is one append to the log and no sync, and a committed step survives the process
dying (``kill -9``, an OOM); only a power loss or an OS crash can lose the last commits (the
step then runs again on recovery, as the step in flight does). ``synchronous="FULL"`` syncs
every commit, for journals that must survive a power loss too.

DBOS writes its timestamps with ``unixepoch('subsec')`` on Python >= 3.12, a modifier SQLite
gained in 3.42; older libraries (Debian 12 ships 3.40) return NULL, and DBOS's first insert fails
with ``NOT NULL constraint failed: application_versions.version_timestamp``. On such a library
the system database's connections get an application-defined ``unixepoch`` (SQLite lets one
stand in for a built-in function) that answers what 3.42 would for the forms DBOS uses.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["sqlite_engine_kwargs"]


def _unixepoch(*args: Any) -> float | int | None:
    """SQLite's ``unixepoch`` for the current time: ``unixepoch()``, ``unixepoch('now')``,
    with ``'subsec'`` for a fraction; anything else is NULL, as an unknown form is in SQLite."""
    subsec = "subsec" in args or "subsecond" in args
    rest = [a for a in args if a not in ("subsec", "subsecond")]
    if rest and rest != ["now"]:
        return None
    now = time.time()
    return now if subsec else int(now)


SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def sqlite_engine_kwargs(url: str, synchronous: str = "NORMAL") -> dict[str, Any]:
    """The ``db_engine_kwargs`` for the SQLite system database at ``url``: a ``creator`` whose
    connections are in WAL mode with ``synchronous`` (``"NORMAL"`` by default, see above) and,
    where SQLite lacks ``unixepoch('subsec')`` (before 3.42) and DBOS uses it (Python 3.12+),
    carry the stand-in. ``{}`` for an in-memory database on a library that needs nothing."""
    if synchronous.upper() not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, not {synchronous!r}")
    from sqlalchemy.engine import make_url

    database = make_url(url).database or ":memory:"
    compat = sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42)
    in_memory = database == ":memory:" or database.startswith("file::memory:")
    if in_memory and not compat:
        return {}

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(database, check_same_thread=False)
        if compat:
            conn.create_function("unixepoch", -1, _unixepoch)
        if not in_memory:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent in the file; cheap once set
            conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        return conn

    creator: Callable[[], sqlite3.Connection] = connect
    return {"creator": creator}
