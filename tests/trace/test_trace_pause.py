"""The trace of a paused turn and its resume (issue 26): the paused run ends ``paused`` with a
``turn_paused`` action naming the held calls; the resume's run has a ``turn_resumed`` action
saying who decided what, and when."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from plait import Agent, ScriptedModel, ToolCall, tool
from plait.runtime import Approve
from plait.trace import SQLiteTraceStore, TraceRecorder


@tool(requires_approval=True)
def send(to: str) -> str:
    """Send."""
    return f"sent to {to}"


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


async def test_a_pause_and_its_resume_are_on_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "traces.sqlite3"
    recorder = TraceRecorder(SQLiteTraceStore(path))
    agent = Agent(
        ScriptedModel([ToolCall("s1", "send", {"to": "bo"}), "sent"]),
        tools=[send],
        middleware=[recorder],
    )
    await agent.run("mail bo", thread_id="t")
    await agent.resume("t", {"s1": Approve(by="ana")})
    await recorder.aclose()

    statuses = _rows(path, "SELECT status FROM trace_runs ORDER BY started")
    assert statuses == [("paused",), ("ok",)]
    rows = _rows(path, "SELECT name, data FROM trace_spans WHERE kind = 'action' ORDER BY started")
    actions: dict[str, object] = {str(name): data for name, data in rows}
    paused = json.loads(str(actions["turn_paused"]))
    assert "s1" in json.dumps(paused["pending"]) and "send requires approval" in json.dumps(paused)
    resumed = json.loads(str(actions["turn_resumed"]))
    assert "ana" in json.dumps(resumed["decisions"])
    assert resumed["resumed_at"] >= resumed["paused_at"] > 0
