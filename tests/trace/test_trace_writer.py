"""The recorder's background writer: ``drain`` waits for what was recorded before it was called
(not for turns that keep coming), a store that fails with an unexpected exception is reported
like a :class:`~plait.trace.TraceStoreError`, never lost silently, and the batches queued behind
a store that does not answer are bounded (the oldest dropped, with one warning and a count)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from plait import Agent, FunctionModel, ScriptedModel, ToolCall
from plait.errors import ConfigurationError, ProviderError
from plait.models.retrying import retry_listener
from plait.runtime.events import ErrorOccurred
from plait.telemetry import GenAITelemetry
from plait.tools import tool
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


class SpanningStore(SQLiteTraceStore):
    """A SQLite trace store whose writes open a span under the current one, as an instrumented
    database driver does, and note the retry listener they run with."""

    def __init__(self, path: Path, tracer: Tracer) -> None:
        super().__init__(path)
        self.tracer = tracer
        self.listeners: list[object] = []

    async def write(self, batch: TraceBatch) -> None:
        self.listeners.append(retry_listener.get())
        with self.tracer.start_as_current_span("db write"):
            await super().write(batch)


async def test_the_writer_does_not_run_in_the_context_of_the_turn_that_started_it(
    tmp_path: Path,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = SpanningStore(tmp_path / "traces.sqlite3", provider.get_tracer("db"))
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel(["one", "two"]),
        middleware=[GenAITelemetry(tracer_provider=provider), recorder],
    )
    await agent.run("a", thread_id="t1")
    await agent.run("b", thread_id="t2")
    await recorder.aclose()
    writes = [s for s in exporter.get_finished_spans() if s.name == "db write"]
    # Each a root span: not a child of whichever turn's invoke_agent span started the writer,
    # and no turn's retry listener (a closure over that turn's context) kept alive by it.
    assert len(writes) == 2 and [w.parent for w in writes] == [None, None]
    assert store.listeners == [None, None]
    provider.shutdown()


async def test_nested_tool_arguments_are_recorded_within_a_bound(tmp_path: Path) -> None:
    # 50 x 50 x 50 strings (125,000) and a 30-deep nesting: the span keeps a bounded copy.
    wide = [[["x" * 600] * 50] * 50] * 50
    deep: object = "bottom"
    for _ in range(30):
        deep = [deep]
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    recorder = TraceRecorder(store)
    agent = Agent(
        ScriptedModel([ToolCall("c1", "take", {"deep": deep, "wide": wide}), "done"]),
        tools=[take],
        middleware=[recorder],
    )
    await agent.run("a", thread_id="t")
    await recorder.aclose()
    (run,) = await store.runs()
    found = await store.run(run["id"])
    assert found is not None
    (span,) = [s for s in found[1] if s["kind"] == "tool"]
    args = span["data"]["args"]
    text = json.dumps(args)
    assert 0 < text.count('"' + "x" * 500) <= 200 and len(text) < 200 * 600
    assert args["wide"][0][0][0].startswith("x" * 500) and len(args["wide"][0][0]) == 50
    level = args["deep"]
    for _ in range(5):
        level = level[0]
    assert level == "<list of 1 items>"


@tool
def take(wide: list[Any], deep: list[Any]) -> str:
    """Take nested arguments."""
    return "ok"


def provider_down(request: object) -> str:
    raise ProviderError("the provider is down", provider="test")


async def test_failing_turns_queue_a_bounded_backlog_dropping_the_oldest_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = GatedStore(tmp_path / "traces.sqlite3")
    gate = asyncio.Event()
    store.gates.append(gate)  # the store hangs on the first write: nothing drains the queue
    recorder = TraceRecorder(store, max_queued=3)
    agent = Agent(FunctionModel(provider_down), middleware=[recorder])
    with caplog.at_level(logging.WARNING, logger="plait.trace"):
        for turn in range(10):
            with pytest.raises(ProviderError):
                await agent.run(f"turn {turn}", thread_id=f"t{turn}")
            if turn == 0:
                await store.writing.wait()  # turn 0's batch is being written, held at the gate
    # Queued behind the held write: at most 3 batches; the 6 oldest of turns 1-9 were dropped.
    assert recorder.dropped_batches == 6
    warnings = [r for r in caplog.records if r.name == "plait.trace"]
    assert len(warnings) == 1
    assert "dropped the oldest" in warnings[0].getMessage()
    assert "max_queued=3" in warnings[0].getMessage()
    gate.set()
    await recorder.drain()
    inputs = sorted(r["input"] for r in await store.runs())
    assert inputs == ["turn 0", "turn 7", "turn 8", "turn 9"]
    assert {r["status"] for r in await store.runs()} == {"error"}
    await recorder.aclose()


@pytest.mark.parametrize("bound", [0, -1, 1.5, True])
def test_max_queued_must_be_a_positive_integer(tmp_path: Path, bound: object) -> None:
    with pytest.raises(ConfigurationError, match="max_queued must be an integer >= 1"):
        TraceRecorder(SQLiteTraceStore(tmp_path / "t.sqlite3"), max_queued=bound)  # type: ignore[arg-type]


async def test_a_successful_turn_waits_for_a_slow_store_before_its_trace_could_be_dropped(
    tmp_path: Path,
) -> None:
    # max_queued below MAX_PENDING_WRITES: a successful turn must wait (as it does past
    # MAX_PENDING_WRITES) rather than queue a batch that pushes out an unwritten one
    store = GatedStore(tmp_path / "traces.sqlite3")
    gate = asyncio.Event()
    store.gates.append(gate)
    recorder = TraceRecorder(store, max_queued=2)
    agent = Agent(ScriptedModel(["r0", "r1", "r2", "r3"]), middleware=[recorder])
    await agent.run("turn 0", thread_id="t0")
    await store.writing.wait()  # turn 0's batch is being written, held at the gate

    async def three_more() -> None:
        for turn in (1, 2, 3):
            await agent.run(f"turn {turn}", thread_id=f"t{turn}")

    turns = asyncio.create_task(three_more())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while not recorder._writes.draining and not turns.done():  # until a turn waits in drain()
        assert loop.time() < deadline, "no turn ever waited"
        await asyncio.sleep(0.01)
    gate.set()
    await turns
    await recorder.aclose()
    assert recorder.dropped_batches == 0
    assert sorted(r["input"] for r in await store.runs()) == [f"turn {n}" for n in range(4)]
