"""``RunStream``: one stream, one turn (iterating it again is an error, not a second turn);
leaving early after a failure does not leak an unretrieved task exception."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from pathlib import Path

import pytest

import plait.runtime.agent as agent_module
import plait.runtime.turn as turn_module
from plait import Agent, Middleware, ScriptedModel, TurnContext
from plait.errors import ConfigurationError, ThreadBusyError
from plait.middleware import Next
from plait.middleware.context import Event
from plait.models import FunctionModel
from plait.models.base import ModelRequest
from plait.runtime.events import ErrorOccurred
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
    monkeypatch.setattr(agent_module, "SETTLE_TIMEOUT", 0.2)
    monkeypatch.setattr(turn_module, "SETTLE_TIMEOUT", 0.2)
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
