"""Whose a SQLite file is: plait's ``application_id`` stamp, the tables plait made before it
stamped its files, and the check :class:`~plait.backends.sqlite_file.SQLiteFile` runs before it
writes anything to a file (split from that module to keep it one page of concerns)."""

from __future__ import annotations

import sqlite3

from plait.errors import PlaitError

__all__ = ["APPLICATION_ID", "check_ownership", "statements", "tables_of"]

APPLICATION_ID = 0x706C6169
"""``PRAGMA application_id`` of every SQLite file plait creates (the bytes ``b"plai"``)."""

UNSTAMPED_TABLES = {
    "threads": {"thread_id", "version", "state", "updated_at"},
    "messages": {"thread_id", "seq", "id", "json"},
    "blobs": {"path", "content", "updated_at"},
    "leases": {"thread_id", "owner", "expires_at"},
}
"""The tables (with their columns) of the files plait made before it stamped them: a thread
store's, a blob backend's, or both in one file. Later tables (leases, traces) came with the
stamp."""


def check_ownership(
    conn: sqlite3.Connection, path: str, tables: dict[str, set[str]], error: type[PlaitError]
) -> None:
    """Raise ``error`` unless the file is empty, stamped by plait (and this component's
    tables in it have their columns), or unstamped with nothing but the tables plait made
    before the stamp, each with its columns."""
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    names = [
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    if app_id == 0 and not names:
        return
    present = {name: columns(conn, name) for name in names if name in tables}
    mismatched = [t for t, cols in present.items() if not tables[t] <= cols]
    if app_id == APPLICATION_ID and not mismatched:
        return
    if (
        app_id == 0
        and names
        and all(
            name in UNSTAMPED_TABLES and UNSTAMPED_TABLES[name] <= columns(conn, name)
            for name in names
        )
    ):
        return  # made before the stamp; it is stamped and tables added since are created
    found = ", ".join(sorted(names)[:20]) or "(no tables)"
    raise error(
        f"{path!r} is not a plait SQLite database (application_id {app_id}, tables: "
        f"{found}); plait left it unchanged. Point plait at a new file or at one it created."
    )


def statements(schema: str) -> list[str]:
    """The statements of a schema script (``;``-separated; plait's schemas hold no literals)."""
    return [part.strip() for part in schema.split(";") if part.strip()]


def columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def tables_of(schema: str) -> dict[str, set[str]]:
    """Each table the schema creates, with its columns (read from a scratch in-memory
    database, so the schema text stays the one source of truth)."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(schema)
        rows = scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(name): columns(scratch, str(name)) for (name,) in rows}
    finally:
        scratch.close()
