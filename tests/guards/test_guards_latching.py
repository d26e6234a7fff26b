"""Review regressions for the guards: the repetition detector stays latched past its own note;
a tool-call limit ends the turn even when its ``dispatch_output`` hook is not reached."""

from __future__ import annotations

import pytest

from plait import Agent, DispatchContext, Middleware, ScriptedModel, ToolCall, UserMessage, tool
from plait.errors import LimitExceeded
from plait.guards import LimitsMiddleware, RepetitionDetected
from plait.middleware import Next


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_repetition_fires_once_per_run_even_after_its_own_note() -> None:
    script = [ToolCall(f"c{i}", "lookup", {"key": "k"}) for i in range(7)] + ["x"]
    result = await Agent(ScriptedModel(script), tools=[lookup]).run("go")
    fired = [e for e in result.events if isinstance(e, RepetitionDetected)]
    assert [(e.kind, e.dispatch) for e in fired] == [("tool_call", 2)]
    notes = [
        m
        for m in result.new_messages
        if isinstance(m, UserMessage) and m.metadata.get("source") == "repetition_guard"
    ]
    assert len(notes) == 1


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
