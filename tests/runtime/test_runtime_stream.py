"""``RunStream``: one stream, one turn (iterating it again is an error, not a second turn);
leaving early after a failure does not leak an unretrieved task exception."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from plait import Agent, Middleware, ScriptedModel, TurnContext
from plait.errors import ConfigurationError
from plait.middleware import Next
from plait.stores.memory import MemoryThreadStore


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
