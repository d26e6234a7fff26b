"""LimitsMiddleware: each limit, its typed outcome, a thread that replays cleanly, and a tool-call
limit that ends the turn even when its ``dispatch_output`` hook is not reached."""

from __future__ import annotations

import pytest

from plait import (
    Agent,
    AssistantMessage,
    DispatchContext,
    LimitExceeded,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    Usage,
    tool,
)
from plait.context.pairs import find_orphans
from plait.guards import LimitReached, LimitsMiddleware
from plait.guards.limits import THREAD_MODEL_CALLS_KEY
from plait.middleware import Next
from plait.models import FunctionModel


@tool
def step(n: int) -> int:
    """Take a step."""
    return n


def stepping(request: ModelRequest) -> ModelResponse:
    n = len(request.messages)
    return ModelResponse(tool_calls=[ToolCall(f"c{n}", "step", {"n": n})])


async def assert_replays_cleanly(agent: Agent, thread_id: str) -> None:
    """The persisted thread becomes a valid provider request: no orphan call or result."""
    snap = await agent.store.load(thread_id)
    assert not find_orphans(snap.messages)
    probe = ScriptedModel(["resumed"])
    resumed = Agent(probe, tools=[step], store=agent.store)
    assert (await resumed.run("continue", thread_id=thread_id)).output == "resumed"
    assert not find_orphans(probe.requests[0].messages)


async def test_model_calls_per_turn() -> None:
    agent = Agent(
        FunctionModel(stepping), tools=[step], middleware=[LimitsMiddleware(model_calls_per_turn=2)]
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("go", thread_id="t")
    assert (info.value.kind, info.value.limit) == ("model_calls_per_turn", 2)
    assert "2 of 2 model calls in one turn" in str(info.value)
    await assert_replays_cleanly(agent, "t")


async def test_model_calls_per_thread_counts_across_turns() -> None:
    model = ScriptedModel(["one", "two", "never"])
    agent = Agent(model, middleware=[LimitsMiddleware(model_calls_per_thread=2)])
    await agent.run("a", thread_id="t")
    await agent.run("b", thread_id="t")
    with pytest.raises(LimitExceeded) as info:
        await agent.run("c", thread_id="t")
    assert info.value.kind == "model_calls_per_thread"
    assert (await agent.store.load("t")).state[THREAD_MODEL_CALLS_KEY] == 2


async def test_tool_calls_per_tool_refuses_the_call_then_ends_the_turn() -> None:
    calls = [ToolCall(f"c{i}", "step", {"n": i}) for i in range(3)]
    agent = Agent(
        ScriptedModel([calls, "never"]),
        tools=[step],
        middleware=[LimitsMiddleware(tool_calls_per_tool={"step": 2})],
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("go", thread_id="t")
    assert info.value.kind == "tool_calls_per_tool"
    snap = await agent.store.load("t")
    tool_msgs = [m for m in snap.messages if isinstance(m, ToolMessage)]
    assert [m.is_error for m in tool_msgs] == [False, False, True]
    assert "may be called 2 times per turn" in tool_msgs[2].data
    await assert_replays_cleanly(agent, "t")


async def test_tool_calls_total() -> None:
    agent = Agent(
        FunctionModel(stepping), tools=[step], middleware=[LimitsMiddleware(tool_calls_total=3)]
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("go", thread_id="t")
    assert info.value.kind == "tool_calls_total"
    events = [e for e in (await agent.store.load("t")).messages if isinstance(e, AssistantMessage)]
    assert len(events) == 4
    await assert_replays_cleanly(agent, "t")


async def test_token_budget_per_turn_from_provider_usage() -> None:
    def respond(request: ModelRequest) -> ModelResponse:
        n = len(request.messages)
        return ModelResponse(
            tool_calls=[ToolCall(f"c{n}", "step", {"n": n})], usage=Usage(400, 100)
        )

    agent = Agent(
        FunctionModel(respond), tools=[step], middleware=[LimitsMiddleware(tokens_per_turn=1200)]
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("go", thread_id="t")
    assert info.value.kind == "tokens_per_turn"
    snap = await agent.store.load("t")
    assert len([m for m in snap.messages if isinstance(m, AssistantMessage)]) == 3
    await assert_replays_cleanly(agent, "t")


async def test_token_budget_estimated_when_the_provider_reports_none() -> None:
    agent = Agent(
        FunctionModel(stepping), tools=[step], middleware=[LimitsMiddleware(tokens_per_turn=50)]
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("x" * 400, thread_id="t")
    # the estimate (~100 tokens of input) ends the turn after the first call, not the
    # dispatch limit after fifty
    assert info.value.kind == "tokens_per_turn"
    stored = await agent.store.load("t")
    assert len([m for m in stored.messages if isinstance(m, AssistantMessage)]) == 1
    await assert_replays_cleanly(agent, "t")


async def test_limit_events_are_emitted() -> None:
    events = []
    with pytest.raises(LimitExceeded):
        async for event in Agent(
            FunctionModel(stepping),
            tools=[step],
            middleware=[LimitsMiddleware(model_calls_per_turn=1)],
        ).stream("go"):
            events.append(event)
    assert [(e.kind, e.limit) for e in events if isinstance(e, LimitReached)] == [
        ("model_calls_per_turn", 1)
    ]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_tool_call_limit_ends_the_turn_when_dispatch_output_is_cut_short() -> None:
    class ObserveOnly(Middleware):
        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            return  # ends the pipeline there, as documented

    model = ScriptedModel([ToolCall(f"c{i}", "lookup", {"key": str(i)}) for i in range(6)] + ["x"])
    agent = Agent(
        model,
        tools=[lookup],
        middleware=[ObserveOnly(), LimitsMiddleware(tool_calls_total=1)],
        default_guards=False,
    )
    with pytest.raises(LimitExceeded) as info:
        await agent.run("go", thread_id="t")
    assert info.value.kind == "tool_calls_total"
    assert len(model.requests) == 2  # the second dispatch's call was refused, then the turn ended
    snap = await agent.store.load("t")
    assert [m.role for m in snap.messages] == ["user", "assistant", "tool", "assistant", "tool"]
