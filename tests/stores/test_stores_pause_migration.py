"""A turn paused by a real Postgres store at the previous schema version (every migration but
the last one applied) is resumed, in another process, after ``setup()`` migrated the schema to
the current version: the pending calls, the decision and the tool's single execution survive
the migration (issue 26)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from postgres_server import fresh_schema, postgres_url

from plait.backends.postgres_db import MIGRATIONS
from plait.messages import ToolMessage
from plait.stores.postgres import PostgresThreadStore

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import plait.backends.postgres_schema as schema_module
    from plait import Agent, tool
    from plait.messages import ToolCall
    from plait.models import ScriptedModel
    from plait.runtime import Answer, Approve
    from plait.stores.postgres import PostgresThreadStore
    from plait.stores.base import StoreError

    url, schema, phase, decision, side = sys.argv[1:6]
    if phase == "pause":  # the plait of the previous schema version: its last migration unknown
        schema_module.MIGRATIONS = schema_module.MIGRATIONS[:-1]

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        "Delete."
        with open(side, "a") as f:
            f.write(name + "\\n")
        return f"deleted {name}"

    async def main():
        store = PostgresThreadStore(url, schema=schema)
        applied = await store.setup()
        version = await store.db.schema_version(error=StoreError)
        calls = [ToolCall("c1", "delete", {"name": "b"})]
        script = [calls] if phase == "pause" else ["done"]
        agent = Agent(ScriptedModel(script), tools=[delete], store=store)
        if phase == "pause":
            result = await agent.run("tidy", thread_id="t")
            out = {"pending": [p.id for p in result.pending]}
        else:
            chosen = Approve(args={"name": "z"}) if decision == "edit" else Answer("kept")
            result = await agent.resume("t", {"c1": chosen})
            out = {"output": result.output}
        print(json.dumps({**out, "applied": applied, "version": version}))
        await store.aclose()

    asyncio.run(main())
    """
)


def _run(tmp_path: Path, *args: str) -> dict[str, object]:
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
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize(
    ("decision", "result", "ran"), [("edit", "deleted z", ["z"]), ("answer", "kept", [])]
)
async def test_a_pause_under_the_previous_schema_version_resumes_after_the_migration(
    tmp_path: Path, decision: str, result: str, ran: list[str]
) -> None:
    side = tmp_path / "executions.txt"
    side.touch()
    current = len(MIGRATIONS)
    async with fresh_schema(postgres_url()) as schema:
        paused = _run(tmp_path, postgres_url(), schema, "pause", decision, str(side))
        assert paused == {
            "pending": ["c1"],
            "applied": list(range(1, current)),
            "version": current - 1,
        }

        resumed = _run(tmp_path, postgres_url(), schema, "resume", decision, str(side))

        assert resumed == {"output": "done", "applied": [current], "version": current}
        assert side.read_text().splitlines() == ran
        store = PostgresThreadStore(postgres_url(), schema=schema)
        snapshot = await store.load("t")
        await store.aclose()
        assert "plait.pending" not in snapshot.state
        data = [m.data for m in snapshot.messages if isinstance(m, ToolMessage)]
        assert data == [result]
