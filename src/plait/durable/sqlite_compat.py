"""DBOS's SQLite system database on a SQLite older than 3.42 under Python 3.12 or later.

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


def sqlite_engine_kwargs(url: str) -> dict[str, Any]:
    """The ``db_engine_kwargs`` DBOS needs for the SQLite system database at ``url`` on this
    interpreter and library: ``{}`` where SQLite has ``unixepoch('subsec')`` (3.42+) or DBOS does
    not use it (Python 3.11), else a ``creator`` whose connections carry the stand-in."""
    if sys.version_info < (3, 12) or sqlite3.sqlite_version_info >= (3, 42):
        return {}
    from sqlalchemy.engine import make_url

    database = make_url(url).database or ":memory:"

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(database, check_same_thread=False)
        conn.create_function("unixepoch", -1, _unixepoch)
        return conn

    creator: Callable[[], sqlite3.Connection] = connect
    return {"creator": creator}
