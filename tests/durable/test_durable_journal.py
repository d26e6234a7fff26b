"""Durable turns in one process on a real DBOS SQLite system database: events reach the caller
live, a replay that offers other tools raises ``ReplayDivergence``, the journal is JSON, and a
workflow id runs its turn once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS, PortableWorkflowError

from plait import Agent, FunctionModel, ToolCall, tool
from plait.durable import DurableAgent, ReplayDivergence, dbos_config
from plait.durable.agent import _workflow
from plait.errors import ResumeConflict
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    ResponseComplete,
    StreamEvent,
    TextDelta,
)
from plait.runtime.events import ModelResponseReceived, TextDeltaReceived, TurnFinished
from plait.runtime.pause import Approve
from plait.stores.sqlite import SQLiteThreadStore


@pytest.fixture(scope="module")
def system_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("dbos") / "system.sqlite"
    _workflow()  # registered before launch, as a recovering worker must
    DBOS(config=dbos_config("plait-durable-journal", f"sqlite:///{path}", log_level="WARNING"))
    DBOS.launch()
    yield path
    DBOS.destroy()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def sub(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


def _adder(request: ModelRequest) -> Any:
    if any(m.role == "tool" for m in request.messages):
        return "5"
    return ToolCall("c1", "add", {"a": 2, "b": 3})


class GatedModel:
    """Streams one delta, then waits until the caller has seen it: buffered events would hang."""

    name = "gated"

    def __init__(self) -> None:
        self.seen = asyncio.Event()

    async def generate(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streamed turn calls stream()")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta("hel")
        await asyncio.wait_for(self.seen.wait(), timeout=30)
        yield TextDelta("lo")
        yield ResponseComplete(ModelResponse("hello"))

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_streamed_events_reach_the_caller_while_the_model_step_runs(
    system_db: Path, tmp_path: Path
) -> None:
    store = SQLiteThreadStore(tmp_path / "threads.db")
    model = GatedModel()
    durable = DurableAgent(Agent(model, store=store), name="live")
    kinds: list[str] = []
    try:
        async for event in durable.stream("hi", thread_id="t"):
            if isinstance(event, TextDeltaReceived):
                model.seen.set()  # the step is still running: it waits for this
            kinds.append(type(event).__name__)
    finally:
        durable.close()
        await store.aclose()
    assert kinds.index("TextDeltaReceived") < kinds.index("ModelResponseReceived")
    assert kinds[-1] == TurnFinished.__name__
    assert ModelResponseReceived.__name__ in kinds


async def test_a_workflow_id_runs_its_turn_once_and_the_journal_is_json(
    system_db: Path, tmp_path: Path
) -> None:
    store = SQLiteThreadStore(tmp_path / "threads.db")
    model = FunctionModel(_adder)
    durable = DurableAgent(Agent(model, tools=[add], store=store), name="once")
    try:
        first = await durable.run("2+3?", thread_id="t", workflow_id="wf-once")
        again = await durable.run("2+3?", thread_id="t", workflow_id="wf-once")
        snapshot = await store.load("t")
    finally:
        durable.close()
        await store.aclose()
    assert first.output == again.output == "5"
    assert len(model.requests) == 2  # the second run returned the recorded result
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "assistant"]
    steps = await DBOS.list_workflow_steps_async("wf-once")
    names = [s["function_name"] for s in steps]
    assert names == [
        "plait.load",
        "plait.append:0",
        "plait.model:0",
        "plait.tool:add:c1",
        "plait.append:1",
        "plait.model:1",
        "plait.append:2",
    ]
    with sqlite3.connect(system_db) as db:
        rows = db.execute(
            "SELECT output, serialization FROM operation_outputs WHERE workflow_uuid = ?",
            ("wf-once",),
        ).fetchall()
    assert rows and all(kind == "portable_json" for _, kind in rows)
    recorded = json.loads(json.loads(next(o for o, _ in rows if "tool_call_id" in o)))
    assert recorded == {
        "name": "add",
        "result": {"tool_call_id": "c1", "data": 5, "is_error": False, "parts": []},
    }


async def test_a_replay_whose_request_offers_other_tools_raises_replay_divergence(
    system_db: Path, tmp_path: Path
) -> None:
    store = SQLiteThreadStore(tmp_path / "threads.db")
    durable = DurableAgent(Agent(FunctionModel(_adder), tools=[add], store=store), name="div")
    await durable.run("2+3?", thread_id="t", workflow_id="wf-div")
    durable.close()
    # The same name now with another tool list: a recovered turn would replay against it.
    changed = DurableAgent(Agent(FunctionModel(_adder), tools=[add, sub], store=store), name="div")
    try:
        steps = await DBOS.list_workflow_steps_async("wf-div")
        after_model = next(s["function_id"] for s in steps if s["function_name"] == "plait.model:0")
        handle = await DBOS.fork_workflow_async("wf-div", after_model + 1)
        with pytest.raises((ReplayDivergence, PortableWorkflowError)) as raised:
            await handle.get_result()
    finally:
        changed.close()
        await store.aclose()
    assert "diverged from its journal at the model call of dispatch 0" in str(raised.value)
    assert "tools ['add', 'sub']" in str(raised.value)


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a path (needs approval)."""
    return f"wiped {path}"


def _wiper(request: ModelRequest) -> Any:
    if any(m.role == "tool" for m in request.messages):
        return "wiped"
    return ToolCall("w1", "wipe", {"path": "/tmp/x"})


async def test_a_paused_durable_turn_resumes_as_a_workflow_with_live_events_once(
    system_db: Path, tmp_path: Path
) -> None:
    store = SQLiteThreadStore(tmp_path / "threads.db")
    durable = DurableAgent(Agent(FunctionModel(_wiper), tools=[wipe], store=store), name="wipe")
    try:
        paused = await durable.run("wipe it", thread_id="t", workflow_id="wf-wipe")
        kinds = [
            type(e).__name__ async for e in durable.stream_resume("t", {"w1": Approve(by="ana")})
        ]
        with pytest.raises(ResumeConflict):
            await durable.resume("t", {"w1": Approve()})
        snapshot = await store.load("t")
    finally:
        durable.close()
        await store.aclose()
    assert paused.paused and [p.id for p in paused.pending] == ["w1"]
    status = await DBOS.get_workflow_status_async("wf-wipe")
    assert status is not None and status.status == "SUCCESS"  # the pause holds no workflow
    assert (
        kinds.index("TurnResumed") < kinds.index("ToolCallFinished") < kinds.index("TurnFinished")
    )
    (resume,) = await DBOS.list_workflows_async(name="plait.durable.resume")
    steps = [s["function_name"] for s in await DBOS.list_workflow_steps_async(resume.workflow_id)]
    assert "plait.tool:wipe:w1" in steps and "plait.model:1" in steps
    assert [m.role for m in snapshot.messages] == ["user", "assistant", "tool", "assistant"]
