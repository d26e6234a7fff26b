"""A turn leaves no reference cycles: everything it made is freed by reference counting when
the turn's result goes, not left to the garbage collector (whose pauses every request in flight
waits out, and whose full collections walk everything that survived)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator

import pytest

from plait import Agent, ModelRequest, ModelResponse, ToolCall, UserMessage, tool
from plait.messages import ToolMessage
from plait.models.base import StreamEvent
from plait.models.scripted import stream_response
from plait.serve.limits import ServeLimits
from plait.serve.runs import RunManager


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Adder:
    """A model that keeps nothing it is sent (the scripted models record every request):
    ``add N`` calls ``add(N, 1)`` (with ``tools``) then answers ``sum: N+1``."""

    name = "adder"

    def __init__(self, tools: bool) -> None:
        self.tools = tools

    async def generate(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return ModelResponse(content=f"sum: {last.data}", finish_reason="stop")
        n = int(last.text.split()[-1]) if isinstance(last, UserMessage) else 0
        if self.tools:
            call = ToolCall(f"c{n}", "add", {"a": n, "b": 1})
            return ModelResponse(tool_calls=[call], finish_reason="tool_calls")
        return ModelResponse(content=f"sum: {n + 1}", finish_reason="stop")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in stream_response(await self.generate(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release."""


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("tools", [False, True], ids=["answers", "tool calls"])
async def test_turns_on_a_long_thread_leave_no_cyclic_garbage(
    no_collector: None, tools: bool
) -> None:
    agent = Agent(Adder(tools), tools=[add], system_prompt="Be brief.")
    for n in range(20):  # a thread of 40 or 80 messages
        await agent.run(f"add {n}", thread_id="long")
    gc.collect()
    for n in range(20, 40):
        result = await agent.run(f"add {n}", thread_id="long")
        assert result.output == f"sum: {n + 1}"
        del result
    assert gc.collect() == 0


async def test_served_runs_leave_no_cyclic_garbage(no_collector: None) -> None:
    agent = Agent(Adder(tools=True), tools=[add])
    manager = RunManager(ServeLimits())
    for n in range(20):
        run = manager.start(agent, "plait", f"t{n % 3}", [UserMessage(f"add {n}")])
        assert run.task is not None
        await run.task
        assert run.view()["output"] == f"sum: {n + 1}"
    del run
    manager._runs.clear()  # forget the runs (and their events) as a busy worker does
    assert gc.collect() == 0
