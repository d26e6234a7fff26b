"""``agent.run(on_event=...)`` and ``agent.resume(on_event=...)``: the events of a stream,
delivered live in the turn's own task, and the same in ``result.events``."""

from __future__ import annotations

import asyncio

import pytest

from plait import Agent, tool
from plait.messages import ToolCall
from plait.middleware.context import Event
from plait.models import ScriptedModel
from plait.runtime import Approve
from plait.runtime import events as ev


@tool
def double(n: int) -> int:
    """Twice ``n``."""
    return 2 * n


@tool(requires_approval=True)
def delete(name: str) -> str:
    """Delete a file (needs approval)."""
    return f"deleted {name}"


def script() -> ScriptedModel:
    return ScriptedModel([ToolCall("c1", "double", {"n": 2}), "four it is"])


async def test_on_event_gets_the_events_a_stream_yields_in_order_and_live() -> None:
    seen: list[tuple[Event, asyncio.Task[object] | None]] = []
    result = await Agent(script(), tools=[double]).run(
        "go", thread_id="t", on_event=lambda e: seen.append((e, asyncio.current_task()))
    )
    streamed = [e async for e in Agent(script(), tools=[double]).stream("go", thread_id="t")]
    events = [e for e, _ in seen]
    assert [type(e) for e in events] == [type(e) for e in streamed]
    assert type(events[0]) is ev.TurnStarted and type(events[-1]) is ev.TurnFinished
    kinds = [type(e) for e in events]
    assert kinds.index(ev.ToolCallStarted) < kinds.index(ev.ToolCallFinished)
    text = "".join(e.text for e in events if isinstance(e, ev.TextDeltaReceived))
    assert text == "four it is"  # the model is streamed: its text arrives as deltas
    assert result.events == events and result.output == "four it is"
    assert {task for _, task in seen} == {asyncio.current_task()}  # the caller's task


async def test_without_on_event_a_run_is_not_streamed() -> None:
    result = await Agent(script(), tools=[double]).run("go", thread_id="t")
    assert not [e for e in result.events if isinstance(e, ev.TextDeltaReceived)]
    assert result.output == "four it is"


async def test_a_failed_turn_reports_its_error_event_before_raising() -> None:
    seen: list[Event] = []
    agent = Agent(ScriptedModel([]))  # nothing scripted: the model call fails
    with pytest.raises(Exception) as raised:
        await agent.run("go", thread_id="t", on_event=seen.append)
    errors = [e for e in seen if isinstance(e, ev.ErrorOccurred) and e.fatal]
    assert errors and errors[-1].error is raised.value


async def test_a_callback_that_raises_fails_the_turn_with_its_error() -> None:
    def broken(event: Event) -> None:
        if isinstance(event, ev.ToolCallStarted):
            raise RuntimeError("the sink broke")

    with pytest.raises(RuntimeError, match="the sink broke"):
        await Agent(script(), tools=[double]).run("go", thread_id="t", on_event=broken)


async def test_resume_delivers_the_resumed_turns_events() -> None:
    agent = Agent(ScriptedModel([ToolCall("c1", "delete", {"name": "a"}), "gone"]), tools=[delete])
    paused = await agent.run("delete a", thread_id="t")
    assert paused.paused
    seen: list[Event] = []
    result = await agent.resume("t", {"c1": Approve()}, on_event=seen.append)
    finished = [e for e in seen if isinstance(e, ev.ToolCallFinished)]
    assert [e.result.data for e in finished] == ["deleted a"]
    assert result.output == "gone" and result.events == seen
