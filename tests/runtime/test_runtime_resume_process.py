"""A turn paused in one process is resumed in another, on SQLite and on Postgres, with each
decision kind; a schema migration between pause and resume does not lose the pending calls
(issue 26). Tools record each real execution in a side file, so "exactly once" is counted, not
assumed."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from postgres_server import fresh_schema, postgres_url

from plait.messages import ToolMessage
from plait.stores import SQLiteThreadStore, ThreadStore
from plait.stores.postgres import PostgresThreadStore

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from plait import Agent, tool
    from plait.messages import ToolCall
    from plait.models import ScriptedModel
    from plait.runtime import Answer, Approve, Reject

    kind, where, schema, phase, decision, side = sys.argv[1:7]

    def record(line):
        with open(side, "a") as f:
            f.write(line + "\\n")

    @tool
    def read(name: str) -> str:
        "Read."
        record(f"read {name}")
        return f"note {name}"

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        "Delete."
        record(f"delete {name}")
        return f"deleted {name}"

    def store():
        if kind == "sqlite":
            from plait.stores import SQLiteThreadStore
            return SQLiteThreadStore(where)
        from plait.stores.postgres import PostgresThreadStore
        return PostgresThreadStore(where, schema=schema)

    async def main():
        s = store()
        if kind == "postgres":
            await s.setup()
        calls = [ToolCall("c1", "read", {"name": "a"}), ToolCall("c2", "delete", {"name": "b"})]
        script = [calls, "done"] if phase == "pause" else ["done"]
        agent = Agent(ScriptedModel(script), tools=[read, delete], store=s)
        if phase == "pause":
            result = await agent.run("tidy", thread_id="t")
            print(json.dumps([p.to_json() for p in result.pending]))
        else:
            chosen = {
                "approve": Approve(by="cli"),
                "edit": Approve(args={"name": "z"}),
                "reject": Reject("no, keep it"),
                "answer": Answer("pretend deleted"),
            }[decision]
            try:
                result = await agent.resume("t", {"c2": chosen})
            except Exception as exc:
                print(json.dumps({"error": type(exc).__name__}))
            else:
                print(json.dumps({"output": result.output, "paused": result.paused}))
        await s.aclose()

    asyncio.run(main())
    """
)

EXPECTED = {
    "approve": ("deleted b", ["delete b"]),
    "edit": ("deleted z", ["delete z"]),
    "reject": ("no, keep it", []),
    "answer": ("pretend deleted", []),
}


def _executions(side: str) -> list[str]:
    """What the tools recorded, one line per real execution."""
    return Path(side).read_text().splitlines()


def _run(tmp_path: Path, *args: str) -> str:
    script = tmp_path / "turn.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(params=["sqlite", "postgres"])
async def where(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, str, str]]:
    if request.param == "sqlite":
        yield "sqlite", str(tmp_path / "threads.db"), "-"
        return
    async with fresh_schema(postgres_url()) as schema:
        yield "postgres", postgres_url(), schema


@pytest.mark.parametrize("decision", list(EXPECTED))
async def test_a_turn_paused_in_one_process_is_resumed_in_another(
    where: tuple[str, str, str], decision: str, tmp_path: Path
) -> None:
    kind, url, schema = where
    side = str(tmp_path / "executions.txt")
    pending = json.loads(_run(tmp_path, kind, url, schema, "pause", decision, side))
    assert [p["id"] for p in pending] == ["c2"]
    assert _executions(side) == ["read a"]

    outcome = json.loads(_run(tmp_path, kind, url, schema, "resume", decision, side))

    assert outcome == {"output": "done", "paused": False}
    result_text, executions = EXPECTED[decision]
    assert _executions(side) == ["read a", *executions]
    store = await _open(kind, url, schema)
    messages = (await store.load("t")).messages
    await store.aclose()
    results = {m.tool_call_id: m.data for m in messages if isinstance(m, ToolMessage)}
    assert results == {"c1": "note a", "c2": result_text}


async def _open(kind: str, url: str, schema: str) -> ThreadStore:
    if kind == "sqlite":
        return SQLiteThreadStore(url)
    store = PostgresThreadStore(url, schema=schema)
    await store.setup()
    return store


async def test_two_processes_resume_the_same_pause_and_the_tool_runs_once(
    where: tuple[str, str, str], tmp_path: Path
) -> None:
    kind, url, schema = where
    side = str(tmp_path / "executions.txt")
    _run(tmp_path, kind, url, schema, "pause", "approve", side)
    script = tmp_path / "turn.py"
    racers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            *(kind, url, schema, "resume", "approve", side),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(2)
    ]
    outcomes = []
    for racer in racers:
        out, err = await asyncio.wait_for(racer.communicate(), timeout=120)
        assert racer.returncode == 0, err.decode()
        outcomes.append(json.loads(out.decode().strip().splitlines()[-1]))

    assert sorted(json.dumps(o) for o in outcomes) == sorted(
        [json.dumps({"output": "done", "paused": False}), json.dumps({"error": "ResumeConflict"})]
    )
    assert _executions(side).count("delete b") == 1


async def test_a_thread_paused_before_a_schema_migration_resumes_after_it() -> None:
    import psycopg

    from plait import Agent, tool
    from plait.backends.postgres_db import MIGRATIONS
    from plait.messages import ToolCall
    from plait.models import ScriptedModel
    from plait.runtime import Approve
    from plait.stores import MemoryThreadStore
    from plait.stores.base import messages_to_json, state_to_json

    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete."""
        ran.append(name)
        return f"deleted {name}"

    memory = MemoryThreadStore()
    calls = [ToolCall("c1", "delete", {"name": "b"})]
    await Agent(ScriptedModel([calls]), tools=[delete], store=memory).run("go", thread_id="t")
    paused = await memory.load("t")
    async with fresh_schema(postgres_url()) as schema:
        async with await psycopg.AsyncConnection.connect(postgres_url(), autocommit=True) as pg:
            # The thread as a store from before migrations 3+ held it.
            await pg.execute(f'CREATE SCHEMA "{schema}"')
            await pg.execute(f'CREATE TABLE "{schema}".plait_migrations (v integer PRIMARY KEY)')
            for number, statement in enumerate(MIGRATIONS[:2], start=1):
                await pg.execute(statement.replace("{s}", f'"{schema}"'))
                await pg.execute(f'INSERT INTO "{schema}".plait_migrations VALUES ({number})')
            await pg.execute(
                f'INSERT INTO "{schema}".plait_threads (thread_id, version, state, write_token) '
                "VALUES ('t', 1, %s, 'old')",
                (state_to_json("t", paused.state),),
            )
            for i, (m, row) in enumerate(
                zip(paused.messages, messages_to_json("t", paused.messages), strict=True)
            ):
                await pg.execute(
                    f'INSERT INTO "{schema}".plait_messages VALUES (%s, %s, %s, %s)',
                    ("t", i, m.id, row),
                )
        store = PostgresThreadStore(postgres_url(), schema=schema)
        assert await store.setup() == list(range(3, len(MIGRATIONS) + 1))
        agent = Agent(ScriptedModel(["done"]), tools=[delete], store=store)

        result = await agent.resume("t", {"c1": Approve()})

        assert result.output == "done" and ran == ["b"]
        messages = (await store.load("t")).messages
        assert [m.data for m in messages if isinstance(m, ToolMessage)] == ["deleted b"]
        await store.aclose()


async def test_a_sqlite_file_from_before_the_blob_and_lease_tables_resumes(tmp_path: Path) -> None:
    import sqlite3

    from plait import Agent, tool
    from plait.messages import ToolCall
    from plait.models import ScriptedModel
    from plait.runtime import Reject
    from plait.stores import MemoryThreadStore
    from plait.stores.base import messages_to_json, state_to_json

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete."""
        raise AssertionError("a rejected call never runs")

    memory = MemoryThreadStore()
    calls = [ToolCall("c1", "delete", {"name": "b"})]
    await Agent(ScriptedModel([calls]), tools=[delete], store=memory).run("go", thread_id="t")
    paused = await memory.load("t")
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the first schema: threads and messages only
        db.execute(
            "CREATE TABLE threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, "
            "state TEXT NOT NULL, updated_at REAL NOT NULL)"
        )
        db.execute(
            "CREATE TABLE messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "id TEXT NOT NULL, json TEXT NOT NULL, PRIMARY KEY (thread_id, seq))"
        )
        db.execute("INSERT INTO threads VALUES ('t', 1, ?, 0)", (state_to_json("t", paused.state),))
        rows = messages_to_json("t", paused.messages)
        for i, (m, row) in enumerate(zip(paused.messages, rows, strict=True)):
            db.execute("INSERT INTO messages VALUES ('t', ?, ?, ?)", (i, m.id, row))
    db.close()
    store = SQLiteThreadStore(path)
    agent = Agent(ScriptedModel(["fine"]), tools=[delete], store=store)

    result = await agent.resume("t", {"c1": Reject("not today")})

    assert result.output == "fine"
    messages = (await store.load("t")).messages
    assert [m.data for m in messages if isinstance(m, ToolMessage)] == ["not today"]
    await store.aclose()
