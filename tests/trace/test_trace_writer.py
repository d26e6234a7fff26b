"""The recorder's background writer: ``drain`` waits for what was recorded before it was called
(not for turns that keep coming), and a store that fails with an unexpected exception is reported
like a :class:`~plait.trace.TraceStoreError`, never lost silently."""

from __future__ import annotations

import asyncio
from pathlib import Path

from plait import Agent, ScriptedModel
from plait.runtime.events import ErrorOccurred
from plait.trace import SQLiteTraceStore, TraceRecorder, TraceStoreError
from plait.trace.store import TraceBatch


class GatedStore(SQLiteTraceStore):
    """A real SQLite trace store whose writes each wait for the next gate in ``gates`` (a write
    with no gate left goes straight through); ``writing`` is set once a write waits."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gates: list[asyncio.Event] = []
        self.writing = asyncio.Event()

    async def write(self, batch: TraceBatch) -> None:
        if self.gates:
            gate = self.gates.pop(0)
            self.writing.set()
            await gate.wait()
        await super().write(batch)


async def test_drain_waits_for_earlier_writes_only(tmp_path: Path) -> None:
    store = GatedStore(tmp_path / "traces.sqlite3")
    first, second = asyncio.Event(), asyncio.Event()
    store.gates += [first, second]
    recorder = TraceRecorder(store)
    agent = Agent(ScriptedModel(["one", "two"]), middleware=[recorder])
    await agent.run("a", thread_id="t1")
    await store.writing.wait()  # the first turn's write is under way, held at its gate
    drained = asyncio.ensure_future(recorder.drain())
    await asyncio.sleep(0)
    await agent.run("b", thread_id="t2")  # queued after drain() was called: held at the second
    first.set()
    # drain() returns once the first turn's trace landed, though the writer still holds the
    # second turn's batch (before, it waited for the writer to run dry: up to CLOSE_TIMEOUT).
    await asyncio.wait_for(drained, timeout=10)
    assert [r["input"] for r in await store.runs()] == ["a"]
    second.set()
    await recorder.aclose()
    assert [r["input"] for r in await store.runs()] == ["b", "a"]


class BrokenStore(SQLiteTraceStore):
    """A trace store whose writes fail with an exception that is not a ``PlaitError``."""

    async def write(self, batch: TraceBatch) -> None:
        raise RuntimeError("disk on fire")


async def test_an_unexpected_store_failure_is_reported_not_lost(tmp_path: Path) -> None:
    recorder = TraceRecorder(BrokenStore(tmp_path / "traces.sqlite3"), background=False)
    agent = Agent(ScriptedModel(["one"]), middleware=[recorder])
    result = await agent.run("a", thread_id="t")
    assert result.output == "one"
    errors = [e for e in result.events if isinstance(e, ErrorOccurred) and e.where == "trace"]
    assert len(errors) == 1 and isinstance(errors[0].error, TraceStoreError)
    assert "RuntimeError: disk on fire" in str(errors[0].error)
    assert recorder.write_error is errors[0].error
    await recorder.aclose()
