"""``plait db upgrade`` and ``plait threads`` on Postgres (``--store URL``, ``PLAIT_STORE``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest
from cli_inprocess import Completed, run_plait
from postgres_server import postgres_url
from test_cli_run import FIXTURES, sse_text
from test_cli_ui import _env as ui_env
from test_cli_ui import _get_with_retry as get_with_retry
from test_cli_ui import _start_ui as start_ui
from wire_server import WireServer

from plait.backends.postgres import PostgresBackend
from plait.messages import UserMessage
from plait.stores.postgres import PostgresThreadStore


def plait(*args: str, home: Path, store: str | None = None) -> Completed:
    return run_plait(*args, home=home, env={} if store is None else {"PLAIT_STORE": store})


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """The URL of a new, empty database, dropped afterwards."""
    server = postgres_url()
    name = f"plait_cli_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    yield server.rsplit("/", 1)[0] + "/" + name
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


async def test_db_upgrade_applies_migrations_once(database: str, tmp_path: Path) -> None:
    first = plait("db", "upgrade", "--store", database, home=tmp_path)
    assert first.returncode == 0, first.stderr
    from plait.backends.postgres_db import MIGRATIONS

    numbers = ", ".join(str(n) for n in range(1, len(MIGRATIONS) + 1))
    assert numbers.startswith("1, 2, 3")  # threads, traces, message blobs
    assert f"Applied migrations: {numbers}." in first.stdout
    again = plait("db", "upgrade", home=tmp_path, store=database)
    assert again.returncode == 0, again.stderr
    assert "already up to date" in again.stdout


def test_db_upgrade_refuses_a_sqlite_path(tmp_path: Path) -> None:
    result = plait("db", "upgrade", "--store", str(tmp_path / "x.sqlite3"), home=tmp_path)
    assert result.returncode == 2
    assert "postgresql://" in result.stderr


async def test_threads_list_show_delete_against_postgres(database: str, tmp_path: Path) -> None:
    store = PostgresThreadStore(database)
    await store.setup()
    await store.append("chat-1", [UserMessage("hello from postgres")], expected_version=0)
    await PostgresBackend(store.db).write("results/chat-1/big.txt", "evicted")
    await store.aclose()

    listed = plait("threads", "list", home=tmp_path, store=database)
    assert listed.returncode == 0, listed.stderr
    assert "chat-1" in listed.stdout
    assert "hello from postgres" in listed.stdout
    shown = plait("threads", "show", "chat-1", "--store", database, home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "hello from postgres" in shown.stdout
    deleted = plait("threads", "delete", "chat-1", home=tmp_path, store=database)
    assert deleted.returncode == 0, deleted.stderr
    assert "Deleted thread chat-1" in deleted.stdout
    after = PostgresThreadStore(database)
    assert await after.list_threads() == []
    await after.aclose()


async def test_threads_before_db_upgrade_says_to_run_it(database: str, tmp_path: Path) -> None:
    result = plait("threads", "list", home=tmp_path, store=database)
    assert result.returncode == 1
    assert "plait db upgrade" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_keeps_its_thread_in_postgres_and_continues_it(database: str, tmp_path: Path) -> None:
    with WireServer(FIXTURES) as server:
        _run_twice(database, server, tmp_path)


def _run_twice(database: str, server: WireServer, tmp_path: Path) -> None:
    assert plait("db", "upgrade", "--store", database, home=tmp_path).returncode == 0
    spec = f"openai-compatible:test-model@{server.url}/v1"
    server._replies.append(sse_text("Stored in Postgres."))
    first = plait("run", "first", "--model", spec, home=tmp_path, store=database)
    assert first.returncode == 0, first.stdout + first.stderr
    thread = first.stderr.split("thread: ")[1].split()[0]
    assert not (tmp_path / "threads.sqlite3").exists()
    server._replies.append(sse_text("Continued."))
    second = plait(
        "run", "second", "--model", spec, "--thread", thread, "--store", database, home=tmp_path
    )
    assert second.returncode == 0, second.stdout + second.stderr
    sent = [(m["role"], m.get("content")) for m in server.bodies()[1]["messages"]]
    assert [m for m in sent if m[0] != "system"] == [
        ("user", "first"),
        ("assistant", "Stored in Postgres."),
        ("user", "second"),
    ]
    # The traces went to the same database, and the hint names the store (no password).
    assert not list(tmp_path.glob("*traces*"))
    assert f"plait ui --store {database}" in second.stderr
    with psycopg.connect(database) as conn:
        rows = conn.execute(
            "SELECT thread_id, input, status FROM plait_trace_runs ORDER BY started"
        ).fetchall()
    assert rows == [(thread, "first", "ok"), (thread, "second", "ok")]
    _ui_reads_postgres(database, tmp_path)


def _ui_reads_postgres(database: str, home: Path) -> None:
    """``plait ui`` with a Postgres store serves that database's traces."""
    server, url = start_ui({**ui_env(home), "PLAIT_STORE": database})
    try:
        base, _, token = url.partition("?token=")
        runs = get_with_retry(f"{base}api/runs?token={token}")
        assert [r["input"] for r in runs] == ["second", "first"]
    finally:
        server.terminate()
        server.wait(timeout=20)
