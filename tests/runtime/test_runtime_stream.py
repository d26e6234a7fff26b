"""``RunStream``: one stream, one turn (iterating it again is an error, not a second turn);
leaving early after a failure does not leak an unretrieved task exception."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from plait import Agent, Middleware, ScriptedModel, ToolCall, TurnContext, tool
from plait.errors import ConfigurationError, ThreadBusyError, TurnAborted
from plait.middleware import Next
from plait.middleware.context import Event
from plait.models import FunctionModel
from plait.models.base import ModelRequest
from plait.runtime import storing
from plait.runtime.agent import RunStream
from plait.runtime.events import ErrorOccurred
from plait.stores.base import ThreadStore
from plait.stores.lease import thread_lease
from plait.stores.memory import MemoryThreadStore
from plait.stores.sqlite import SQLiteThreadStore


async def test_iterating_a_stream_twice_is_an_error_not_a_second_turn() -> None:
    store = MemoryThreadStore()
    agent = Agent(ScriptedModel(["a", "b"]), store=store)
    stream = agent.stream("hi", thread_id="t")
    async for _ in stream:
        pass
    with pytest.raises(ConfigurationError, match="already iterated"):
        async for _ in stream:
            pass
    snap = await store.load("t")
    assert [m.role for m in snap.messages] == ["user", "assistant"]


async def test_breaking_out_after_the_error_event_leaves_no_unretrieved_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Fails(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            raise RuntimeError("late failure")

    agent = Agent(ScriptedModel(["a"]), middleware=[Fails()])

    async def consume() -> None:
        async for event in agent.stream("hi"):
            if event.type == "error_occurred":
                await asyncio.sleep(0.01)  # the turn task finishes meanwhile
                break

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await consume()
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()
        await asyncio.sleep(0)
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def stubborn_model(release: asyncio.Event, started: asyncio.Event) -> FunctionModel:
    """A model that never answers and, once cancelled, holds on until ``release`` is set (at
    most 5 s): an abandoned turn that takes long to settle."""

    async def answer(request: ModelRequest) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(release.wait()), 5)
            raise
        return "never"

    return FunctionModel(answer)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_after_a_break_the_next_turn_waits_once_in_all_not_settle_then_lease(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str
) -> None:
    # Regression: the wait used to be SETTLE_TIMEOUT, then the store's lease_wait again.
    monkeypatch.setattr(storing, "SETTLE_TIMEOUT", 0.2)  # the documented knob
    release, started = asyncio.Event(), asyncio.Event()
    # Both with lease_wait 30 s.
    store = MemoryThreadStore() if kind == "memory" else SQLiteThreadStore(tmp_path / "t.db")
    agent = Agent(stubborn_model(release, started), store=store)
    async for _event in agent.stream("hi", thread_id="t"):
        break
    # The iterator is dropped: the turn is cancelled but holds on (the model) and keeps the lease.
    with pytest.raises(ThreadBusyError, match=r"stayed busy for 0\.2 s") as caught:
        await agent.run("again", thread_id="t")
    assert caught.value.waited == 0.2
    release.set()
    agent.model = ScriptedModel(["done"])
    assert (await agent.run("again", thread_id="t")).output == "done"
    await store.aclose()


async def test_a_stream_that_cannot_start_yields_the_error_event_then_raises() -> None:
    # Regression: a ThreadBusyError from the lease ended the stream with no event at all.
    release, started = asyncio.Event(), asyncio.Event()
    store = MemoryThreadStore(lease_wait=0)
    agent = Agent(stubborn_model(release, started), store=store)
    busy = asyncio.ensure_future(agent.run("first", thread_id="t"))
    await started.wait()
    seen: list[Event] = []
    with pytest.raises(ThreadBusyError, match="'t' is running a turn") as caught:
        async for event in agent.stream("second", thread_id="t"):
            seen.append(event)
    assert [type(e) for e in seen] == [ErrorOccurred]
    error = seen[0]
    assert isinstance(error, ErrorOccurred)
    assert (error.error, error.where, error.fatal) == (caught.value, "turn", True)
    release.set()
    busy.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await busy


# Leaving a stream early, at every kind of event a turn yields, on every store: the lease is
# released as the turn settles, so the next turn on the thread starts at once. Each store has
# ``lease_wait=0``: a lease still held fails the next turn at once with ThreadBusyError.


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(timeout=0.05)
async def stall() -> str:
    """Never answers (timed out)."""
    await asyncio.Event().wait()
    return "never"


def rich_turn() -> ScriptedModel:
    """A turn yielding every kind of event in ``KINDS``: a good call, an unknown tool, arguments
    repaired, a timed-out call; then a streamed answer (and the input needs a value replaced)."""
    return ScriptedModel(
        [
            [
                ToolCall("c1", "add", {"a": 1, "b": 2}),
                ToolCall("c2", "nope", {}),
                ToolCall("c3", "add", {}, '{"a": 1, "b": 2,}'),
                ToolCall("c4", "stall", {}),
            ],
            "The answer is three.",
        ]
    )


RICH_INPUT = "hi \ud800"
KINDS = {  # each kind of event the rich turn yields, and how many times
    "turn_started": 1,
    "values_replaced": 1,
    "model_request_sent": 2,
    "tool_call_rejected": 1,
    "tool_call_repaired": 1,
    "model_response_received": 2,
    "tool_call_started": 4,
    "tool_timeout_reached": 1,
    "tool_call_finished": 4,
    "dispatch_finished": 2,
    "text_delta_received": 4,
    "turn_finished": 1,
}
BREAKS = [
    *(pytest.param(kind, 1, id=f"{kind}-first") for kind, n in KINDS.items() if n > 1),
    *(pytest.param(kind, n, id=f"{kind}-last") for kind, n in KINDS.items()),
]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def fails_fast(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """Each store, with ``lease_wait=0``."""
    if request.param == "memory":
        yield MemoryThreadStore(lease_wait=0)
    elif request.param == "sqlite":
        sqlite_store = SQLiteThreadStore(tmp_path / "t.db", lease_wait=0)
        yield sqlite_store
        await sqlite_store.aclose()
    else:
        from postgres_server import fresh_schema, postgres_url

        from plait.stores.postgres import PostgresThreadStore

        async with fresh_schema(postgres_url()) as schema:
            pg_store = PostgresThreadStore(postgres_url(), schema=schema, max_size=4, lease_wait=0)
            await pg_store.setup()
            yield pg_store
            await pg_store.aclose()


async def test_the_rich_turn_yields_each_kind_the_break_tests_break_at() -> None:
    agent = Agent(rich_turn(), tools=[add, stall])
    kinds = [event.type async for event in agent.stream(RICH_INPUT, thread_id="t")]
    assert {kind: kinds.count(kind) for kind in kinds} == KINDS


async def break_at(stream: RunStream, kind: str, nth: int) -> None:
    """Iterate ``stream`` until its ``nth`` event of ``kind``, then ``break``."""
    seen = 0
    async for event in stream:
        seen += event.type == kind
        if seen == nth:
            break
    assert seen == nth, f"the turn yielded {seen} {kind} events, not {nth}"


@pytest.mark.parametrize(("kind", "nth"), BREAKS)
async def test_after_a_break_at_any_event_the_next_turn_starts_at_once(
    monkeypatch: pytest.MonkeyPatch, fails_fast: ThreadStore, kind: str, nth: int
) -> None:
    # Regression: a break on turn_finished or the last dispatch_finished cancelled the turn while
    # its end waited for the lease's renewals to stop, and the release never ran: on a table
    # lease the next turn waited out the 30 s lease, then raised ThreadBusyError.
    monkeypatch.setattr(storing, "SETTLE_TIMEOUT", 5.0)  # a short settle deadline
    agent = Agent(rich_turn(), tools=[add, stall], store=fails_fast)
    await break_at(agent.stream(RICH_INPUT, thread_id="t"), kind, nth)
    # The iterator is dropped: the turn is cancelled and the next turn waits for it to settle.
    agent.model = ScriptedModel(["done"])
    assert (await agent.run("next", thread_id="t")).output == "done"
    snapshot = await fails_fast.load("t")
    assert snapshot.messages[-1].text == "done"


@pytest.mark.parametrize("kind", list(KINDS))
async def test_after_aclose_at_any_event_the_lease_is_free(
    fails_fast: ThreadStore, kind: str
) -> None:
    agent = Agent(rich_turn(), tools=[add, stall], store=fails_fast)
    stream = agent.stream(RICH_INPUT, thread_id="t")
    async with contextlib.aclosing(stream):
        await break_at(stream, kind, KINDS[kind])
    # aclose() returned: the turn has settled and its lease is released, not left to expire.
    async with thread_lease(fails_fast, "t"):
        pass


async def test_after_a_break_at_the_error_event_the_next_turn_starts_at_once(
    monkeypatch: pytest.MonkeyPatch, fails_fast: ThreadStore
) -> None:
    class Fails(Middleware):
        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            raise RuntimeError("late failure")

    monkeypatch.setattr(storing, "SETTLE_TIMEOUT", 5.0)
    agent = Agent(ScriptedModel(["a", "b"]), middleware=[Fails()], store=fails_fast)
    async for event in agent.stream("hi", thread_id="t"):
        if isinstance(event, ErrorOccurred):
            break
    with pytest.raises(TurnAborted, match="late failure"):
        await agent.run("next", thread_id="t")  # the same failure, not ThreadBusyError
