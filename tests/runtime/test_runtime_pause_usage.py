"""A paused turn is one turn (issue 26): its usage adds up across the pause and every resume, a
middleware can pause it on a real budget of that usage through ``PauseTurn``, and the calls that
need no approval run at once, concurrently, while the gated ones wait."""

from __future__ import annotations

import asyncio
from pathlib import Path

from plait import Agent, tool
from plait.messages import ToolCall, ToolMessage, Usage
from plait.middleware import DispatchContext, Middleware
from plait.models import ScriptedModel
from plait.models.base import ModelResponse
from plait.runtime import Approve, PauseTurn, Reject, TurnFinished
from plait.runtime.pause import PENDING_KEY, was_approved
from plait.stores import SQLiteThreadStore


@tool(requires_approval=True)
def delete(name: str) -> str:
    """Delete a note."""
    return f"deleted {name}"


def _reply(calls: list[ToolCall] | str, tokens_in: int, tokens_out: int) -> ModelResponse:
    usage = Usage(tokens_in, tokens_out, cache_read_tokens=tokens_in // 10, requests=1)
    if isinstance(calls, str):
        return ModelResponse(content=calls, usage=usage)
    return ModelResponse(tool_calls=calls, usage=usage)


async def test_the_resumed_result_reports_the_usage_of_the_whole_turn(tmp_path: Path) -> None:
    script = [
        _reply([ToolCall("d1", "delete", {"name": "a"})], 100, 10),
        _reply([ToolCall("d2", "delete", {"name": "b"})], 200, 20),
        _reply("both done", 400, 40),
    ]
    store = SQLiteThreadStore(tmp_path / "t.db")
    first = await Agent(ScriptedModel(script[:1]), tools=[delete], store=store).run(
        "go", thread_id="t"
    )
    assert first.paused and first.usage == Usage(100, 10, 10, requests=1)

    # Each resume in a fresh agent (as in another process): the usage comes from the store.
    second = await Agent(ScriptedModel(script[1:2]), tools=[delete], store=store).resume(
        "t", {"d1": Approve()}
    )
    assert second.paused and second.usage == Usage(300, 30, 30, requests=2)
    final = await Agent(ScriptedModel(script[2:]), tools=[delete], store=store).resume(
        "t", {"d2": Reject("no")}
    )

    assert not final.paused and final.output == "both done"
    assert final.usage == Usage(700, 70, 70, requests=3)
    [finished] = [e for e in final.events if isinstance(e, TurnFinished)]
    assert finished.usage == final.usage  # what the CLI's usage line shows
    await store.aclose()


class TokenBudget(Middleware):
    """Pauses the turn before a tool call once the turn has used ``limit`` tokens: the user
    decides whether it may go on. An approved call is not asked about again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        used = ctx.turn.usage.total_tokens
        if used >= self.limit and not was_approved(ctx.turn, call.id):
            raise PauseTurn(f"budget: {used} of {self.limit} tokens used; go on?")
        return call


async def test_a_budget_middleware_pauses_the_turn_once_its_budget_is_reached() -> None:
    ran: list[str] = []

    @tool
    def search(q: str) -> str:
        """Search."""
        ran.append(q)
        return f"found {q}"

    script = [
        _reply([ToolCall("s1", "search", {"q": "one"})], 300, 50),  # 350 < 500: runs
        _reply([ToolCall("s2", "search", {"q": "two"})], 300, 50),  # 700 >= 500: paused
        _reply("summary", 100, 10),
    ]
    agent = Agent(ScriptedModel(script), tools=[search], middleware=[TokenBudget(500)])

    paused = await agent.run("research", thread_id="t")

    assert ran == ["one"]
    assert [(p.id, p.reason) for p in paused.pending] == [
        ("s2", "budget: 700 of 500 tokens used; go on?")
    ]
    assert PENDING_KEY in (await agent.store.load("t")).state
    result = await agent.resume("t", {"s2": Approve(by="ana")})

    assert result.output == "summary" and ran == ["one", "two"]
    assert result.usage.total_tokens == 810


async def test_the_calls_needing_no_approval_run_concurrently_while_the_gated_ones_wait() -> None:
    started: list[str] = []
    all_started = asyncio.Event()

    @tool
    async def read(name: str) -> str:
        """Read a note."""
        started.append(name)
        if len(started) == 3:
            all_started.set()
        # Each read finishes only once all three are running: they must run at the same time.
        await asyncio.wait_for(all_started.wait(), timeout=10)
        return f"note {name}"

    calls = [
        ToolCall("c1", "read", {"name": "a"}),
        ToolCall("c2", "delete", {"name": "x"}),
        ToolCall("c3", "read", {"name": "b"}),
        ToolCall("c4", "delete", {"name": "y"}),
        ToolCall("c5", "read", {"name": "c"}),
    ]
    agent = Agent(ScriptedModel([calls, "ok"]), tools=[read, delete])

    paused = await agent.run("tidy", thread_id="t")

    assert sorted(started) == ["a", "b", "c"]
    assert [p.id for p in paused.pending] == ["c2", "c4"]
    result = await agent.resume("t", {"c2": Approve(), "c4": Approve()})
    data = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert data == {
        "c1": "note a",
        "c2": "deleted x",
        "c3": "note b",
        "c4": "deleted y",
        "c5": "note c",
    }
    assert len(started) == 3  # the siblings ran once, before the pause; not again on resume
