"""A run that fails outside a model call is closed with its error (through
``TurnContext.finalizers``): a limit, a thread-store conflict, middleware that aborts the turn, a
cancellation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, Limits, ScriptedModel, ToolCall
from plait.errors import LimitExceeded, ThreadConflictError
from plait.messages import UserMessage
from plait.middleware.base import Middleware, Next
from plait.middleware.context import TurnContext
from plait.middleware.ordering import Placement
from plait.stores.memory import MemoryThreadStore
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder, run_view


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


async def _only_run(recorder: TraceRecorder, store: SQLiteTraceStore) -> dict[str, Any]:
    await recorder.drain()
    (run,) = await store.runs()
    return run


async def test_a_limit_closes_the_run_with_its_error(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel([ToolCall("c1", "echo", {"text": "a"})]),
        tools=[echo],
        middleware=[recorder],
        limits=Limits(model_calls_per_turn=1),
    )
    with pytest.raises(LimitExceeded):
        await agent.run("loop", thread_id="t")
    run = await _only_run(recorder, store)
    assert run["status"] == "error" and run["finished"] is not None
    assert run["error"].startswith("LimitExceeded:")
    view = await run_view(store, run["id"])
    assert view is not None and view["model_calls"] == 1 and view["tool_calls"] == 1
    await recorder.aclose()


async def test_a_thread_store_conflict_closes_the_run_with_its_error(tmp_path: Path) -> None:
    threads = MemoryThreadStore()

    @tool
    async def meddle() -> str:
        """Write to the thread behind the turn's back (another worker would)."""
        snapshot = await threads.load("t")
        await threads.append(
            "t", [UserMessage("from elsewhere")], expected_version=snapshot.version
        )
        return "done"

    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel([ToolCall("c1", "meddle", {}), "never"]),
        tools=[meddle],
        store=threads,
        middleware=[recorder],
    )
    with pytest.raises(ThreadConflictError):
        await agent.run("go", thread_id="t")
    run = await _only_run(recorder, store)
    assert run["status"] == "error" and run["error"].startswith("ThreadConflictError:")
    await recorder.aclose()


class _Refuse(Middleware):
    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        raise ValueError("input refused by policy")


async def test_middleware_that_aborts_the_turn_closes_the_run(tmp_path: Path) -> None:
    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(ScriptedModel(["never"]), middleware=[recorder, _Refuse()])
    with pytest.raises(Exception, match="input refused by policy"):
        await agent.run("hi", thread_id="t")
    run = await _only_run(recorder, store)
    assert run["status"] == "error" and "input refused by policy" in run["error"]
    view = await run_view(store, run["id"])
    assert view is not None and view["model_calls"] == 0
    await recorder.aclose()


async def test_a_cancelled_turn_is_closed_as_cancelled(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Block until cancelled."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel([ToolCall("c1", "wait", {}), "never"]), tools=[wait], middleware=[recorder]
    )
    task = asyncio.create_task(agent.run("hi", thread_id="t"))
    await asyncio.wait_for(started.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    run = await _only_run(recorder, store)
    assert run["status"] == "cancelled" and run["error"].startswith("CancelledError")
    view = await run_view(store, run["id"])
    assert view is not None and view["model_calls"] == 1
    await recorder.aclose()


async def test_a_long_turn_shows_while_it_runs(tmp_path: Path) -> None:
    from plait.trace.recorder import FLUSH_EVERY

    store = SQLiteTraceStore(tmp_path / "t.sqlite3")
    recorder = TraceRecorder(store)
    seen: list[tuple[str, int]] = []

    @tool
    async def peek() -> str:
        """Look at the trace store from inside the turn."""
        if len(seen) == FLUSH_EVERY + 1:  # the first FLUSH_EVERY calls were queued by now
            await recorder.drain()
            (run,) = await store.runs()
            found = await store.run(run["id"])
            assert found is not None
            seen.append((run["status"], sum(s["kind"] == "model" for s in found[1])))
        else:
            seen.append(("", 0))
        return "again"

    calls = FLUSH_EVERY + 3
    script: list[object] = [ToolCall(f"c{i}", "peek", {}) for i in range(calls)] + ["done"]
    agent = Agent(ScriptedModel(script), tools=[peek], middleware=[recorder])  # type: ignore[arg-type]
    await agent.run("loop a while", thread_id="t")
    await recorder.drain()
    assert seen[FLUSH_EVERY + 1] == ("unfinished", FLUSH_EVERY)
    (run,) = await store.runs()
    view = await run_view(store, run["id"])
    assert run["status"] == "ok" and view is not None and view["model_calls"] == calls + 1
    await recorder.aclose()


class _RefuseOutput(Middleware):
    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        raise ValueError("output refused by policy")


async def test_middleware_that_fails_the_turn_output_closes_the_run_as_an_error(
    tmp_path: Path,
) -> None:
    # Inside the recorder (its turn_output's next() returns with the turn aborted) and outside
    # it (pinned outermost, after the recorder marked the run ok): either way the turn raised.
    for middleware in ([_RefuseOutput()], []):
        store = SQLiteTraceStore(tmp_path / f"t{len(middleware)}.sqlite3")
        recorder = TraceRecorder(store)
        outer = [] if middleware else [_RefuseOutputOutermost()]
        agent = Agent(ScriptedModel(["fine"]), middleware=[*outer, recorder, *middleware])
        with pytest.raises(Exception, match="output refused by policy"):
            await agent.run("hi", thread_id="t")
        run = await _only_run(recorder, store)
        assert run["status"] == "error" and "output refused by policy" in run["error"]
        await recorder.aclose()


class _RefuseOutputOutermost(_RefuseOutput):
    placement = Placement(position="outermost")
