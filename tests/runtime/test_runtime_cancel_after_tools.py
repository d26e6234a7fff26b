"""A dispatch whose tools ran is persisted, also when the turn is cancelled after the tools
finished, while ``dispatch_output`` middleware is still running (issue 11 §1)."""

from __future__ import annotations

import asyncio

import pytest

from plait import Agent, tool
from plait.messages import AssistantMessage, ToolCall, ToolMessage
from plait.middleware import DispatchContext, Middleware
from plait.middleware.base import Next
from plait.models import ScriptedModel
from plait.stores import MemoryThreadStore


class SlowOutput(Middleware):
    """Holds ``dispatch_output`` open until the test cancels the turn."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        self.entered.set()
        await asyncio.sleep(3600)
        await next()


async def test_a_cancellation_during_dispatch_output_keeps_the_calls_and_their_results() -> None:
    ran: list[str] = []

    @tool
    def side_effect(x: str) -> str:
        """Do a side effect."""
        ran.append(x)
        return f"did {x}"

    store = MemoryThreadStore()
    slow = SlowOutput()
    model = ScriptedModel([ToolCall("c1", "side_effect", {"x": "a"}), "done"])
    agent = Agent(model, tools=[side_effect], middleware=[slow], store=store)
    run = asyncio.create_task(agent.run("go", thread_id="t"))
    await asyncio.wait_for(slow.entered.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert ran == ["a"]
    messages = (await store.load("t")).messages
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
    ]
    call, result = messages[1], messages[2]
    assert isinstance(call, AssistantMessage) and call.tool_calls[0].id == "c1"
    assert isinstance(result, ToolMessage) and result.tool_call_id == "c1"
    assert result.data == "did a" and not result.is_error
