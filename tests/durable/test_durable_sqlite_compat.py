"""DBOS's timestamps on a SQLite older than 3.42 under Python 3.12+ (plait.durable.sqlite_compat):
the stand-in ``unixepoch`` answers the forms DBOS uses, on a real sqlite3 connection."""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import pytest

from plait.durable.sqlite_compat import _unixepoch, sqlite_engine_kwargs


def test_the_stand_in_answers_unixepoch_subsec_on_a_real_connection() -> None:
    conn = sqlite3.connect(":memory:")
    conn.create_function("unixepoch", -1, _unixepoch)
    before = time.time()
    (ms,) = conn.execute("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)").fetchone()
    (seconds,) = conn.execute("SELECT unixepoch()").fetchone()
    (unknown,) = conn.execute("SELECT unixepoch('2024-01-01', 'subsec')").fetchone()
    conn.close()
    assert int(before * 1000) <= ms <= int(time.time() * 1000)
    assert isinstance(seconds, int) and abs(seconds - before) <= 2
    assert unknown is None  # a form it does not know is NULL, never a wrong time


def test_the_engine_gets_the_stand_in_only_where_dbos_needs_it() -> None:
    kwargs = sqlite_engine_kwargs("sqlite://")  # in memory: no file left behind
    needed = sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42)
    assert ("creator" in kwargs) == needed
    if needed:
        conn = kwargs["creator"]()
        (value,) = conn.execute("SELECT unixepoch('subsec')").fetchone()
        conn.close()
        assert value is not None


def test_a_file_system_database_runs_in_wal_with_the_chosen_synchronous(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    for level, code in (("NORMAL", 1), ("FULL", 2)):
        conn = sqlite_engine_kwargs(url, level)["creator"]()
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        (synchronous,) = conn.execute("PRAGMA synchronous").fetchone()
        conn.close()
        assert (mode, synchronous) == ("wal", code)
    with pytest.raises(ValueError, match="synchronous must be one of"):
        sqlite_engine_kwargs(url, "SOMETIMES")
