"""Pausing a turn on gated tool calls and resuming it (issue 26): which calls run at once, what
the thread holds while paused, each decision kind, and the typed errors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from plait import Agent, tool
from plait.errors import DecisionError, ResumeConflict, ThreadNotPaused, ThreadPaused
from plait.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from plait.middleware import DispatchContext, Middleware
from plait.models import ScriptedModel
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel
from plait.runtime import (
    Answer,
    ApprovalMiddleware,
    Approve,
    PauseTurn,
    PendingCall,
    Reject,
    ToolCallFinished,
    TurnPaused,
    TurnResumed,
)
from plait.runtime.pause import PENDING_KEY
from plait.stores import MemoryThreadStore


def _tools(ran: list[str]) -> list[Any]:
    @tool
    def read(name: str) -> str:
        """Read a note."""
        ran.append(f"read {name}")
        return f"note {name}"

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete a note."""
        ran.append(f"delete {name}")
        return f"deleted {name}"

    @tool(requires_approval=lambda args: args["amount"] > 10)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(f"pay {amount}")
        return f"paid {amount}"

    return [read, delete, pay]


FIVE = [
    ToolCall("c1", "read", {"name": "a"}),
    ToolCall("c2", "delete", {"name": "b"}),
    ToolCall("c3", "pay", {"amount": 5}),
    ToolCall("c4", "pay", {"amount": 50}),
    ToolCall("c5", "read", {"name": "c"}),
]


def _pairs_valid(messages: Sequence[Any]) -> bool:
    """Every tool call has exactly one result right after its assistant message."""
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, AssistantMessage):
            if open_calls:
                return False
            open_calls = {c.id for c in m.tool_calls}
        elif isinstance(m, ToolMessage):
            if m.tool_call_id not in open_calls:
                return False
            open_calls.discard(m.tool_call_id)
        elif open_calls:
            return False
    return not open_calls


async def test_two_of_five_parallel_calls_are_held_and_the_other_three_run_at_once() -> None:
    ran: list[str] = []
    store = MemoryThreadStore()
    model = ScriptedModel([FIVE, "all done"])
    agent = Agent(model, tools=_tools(ran), store=store)

    result = await agent.run("tidy up", thread_id="t")

    assert result.paused and result.output == ""
    assert [p.id for p in result.pending] == ["c2", "c4"]
    assert result.pending[0] == PendingCall(
        "c2", "delete", {"name": "b"}, "delete requires approval"
    )
    assert sorted(ran) == ["pay 5", "read a", "read c"]
    assert any(isinstance(e, TurnPaused) for e in result.events)
    snapshot = await store.load("t")
    assert [type(m) for m in snapshot.messages] == [UserMessage]  # valid, no unanswered call
    assert _pairs_valid(snapshot.messages)
    assert snapshot.state[PENDING_KEY]["pending"][1]["id"] == "c4"

    resumed = await agent.resume("t", {"c2": Approve(by="ana"), "c4": Reject("too much")})

    assert not resumed.paused and resumed.output == "all done"
    assert sorted(ran) == ["delete b", "pay 5", "read a", "read c"]
    messages = (await store.load("t")).messages
    assert _pairs_valid(messages)
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == ["c1", "c2", "c3", "c4", "c5"]
    assert results[1].data == "deleted b"
    assert results[3].data == "too much" and results[3].is_error
    # The model's second request carries the whole dispatch, pairs intact.
    assert _pairs_valid(model.requests[-1].messages)
    resumed_event = next(e for e in resumed.events if isinstance(e, TurnResumed))
    assert resumed_event.decisions["c2"] == {"kind": "approve", "by": "ana"}
    assert PENDING_KEY not in (await store.load("t")).state


async def test_approve_with_edited_args_and_answer_are_recorded_as_they_ran() -> None:
    ran: list[str] = []
    agent = Agent(ScriptedModel([FIVE, "ok"]), tools=_tools(ran))
    await agent.run("go", thread_id="t")

    result = await agent.resume("t", {"c2": Answer("kept it"), "c4": Approve(args={"amount": 9})})

    assert "pay 9" in ran and "delete b" not in ran
    messages = (await agent.store.load("t")).messages
    assistant = next(m for m in messages if isinstance(m, AssistantMessage))
    assert assistant.tool_calls[3].args == {"amount": 9}
    data = {m.tool_call_id: m.data for m in messages if isinstance(m, ToolMessage)}
    assert data["c2"] == "kept it" and data["c4"] == "paid 9"
    finished = [e for e in result.events if isinstance(e, ToolCallFinished)]
    assert {e.call.id: e.skipped_by for e in finished}["c2"] == "answered"


async def test_a_paused_thread_refuses_a_plain_run_with_the_way_to_resume() -> None:
    agent = Agent(ScriptedModel([FIVE, "never"]), tools=_tools([]))
    await agent.run("go", thread_id="t")

    with pytest.raises(ThreadPaused, match=r"agent\.resume") as caught:
        await agent.run("something else", thread_id="t")

    assert caught.value.call_ids == ["c2", "c4"]
    assert [type(m) for m in (await agent.store.load("t")).messages] == [UserMessage]


async def test_on_paused_reject_answers_the_held_calls_and_goes_on() -> None:
    ran: list[str] = []
    agent = Agent(ScriptedModel([FIVE, "new answer"]), tools=_tools(ran))
    await agent.run("go", thread_id="t")

    result = await agent.run("never mind", thread_id="t", on_paused="reject")

    assert result.output == "new answer"
    messages = (await agent.store.load("t")).messages
    assert _pairs_valid(messages)
    rejected = [m for m in messages if isinstance(m, ToolMessage) and m.is_error]
    assert [m.tool_call_id for m in rejected] == ["c2", "c4"]
    assert "delete b" not in ran
    assert isinstance(messages[-2], UserMessage) and messages[-2].text == "never mind"


async def test_decisions_must_name_every_held_call_and_nothing_else() -> None:
    agent = Agent(ScriptedModel([FIVE, "x"]), tools=_tools([]))
    await agent.run("go", thread_id="t")

    with pytest.raises(DecisionError, match="c4") as caught:
        await agent.resume("t", {"c2": Approve(), "c9": Approve()})

    assert caught.value.missing == ["c4"] and caught.value.unknown == ["c9"]
    assert PENDING_KEY in (await agent.store.load("t")).state  # nothing claimed


async def test_a_second_resume_is_a_typed_conflict_and_runs_nothing() -> None:
    ran: list[str] = []
    agent = Agent(ScriptedModel([FIVE, "done"]), tools=_tools(ran))
    await agent.run("go", thread_id="t")
    decisions = {"c2": Approve(), "c4": Approve()}

    outcomes = await asyncio.gather(
        agent.resume("t", decisions), agent.resume("t", decisions), return_exceptions=True
    )

    assert sum(isinstance(o, ResumeConflict) for o in outcomes) == 1
    assert ran.count("delete b") == 1 and ran.count("pay 50") == 1
    with pytest.raises(ResumeConflict, match="already resumed"):
        await agent.resume("t", decisions)


async def test_resuming_a_thread_that_never_paused_says_so() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    await agent.run("hello", thread_id="t")
    with pytest.raises(ThreadNotPaused, match=r"agent\.run"):
        await agent.resume("t", {})


async def test_approval_middleware_holds_tools_by_name_pattern() -> None:
    @tool
    def mcp_send(to: str) -> str:
        """Send mail."""
        return f"sent to {to}"

    @tool
    def lookup() -> str:
        """Look up."""
        return "found"

    calls = [ToolCall("m1", "mcp_send", {"to": "bo"}), ToolCall("l1", "lookup", {})]
    agent = Agent(
        ScriptedModel([calls, "ok"]),
        tools=[mcp_send, lookup],
        middleware=[ApprovalMiddleware(["mcp_*"])],
    )
    result = await agent.run("mail bo", thread_id="t")
    assert [p.id for p in result.pending] == ["m1"]
    assert result.pending[0].reason == "mcp_send: needs approval"

    done = await agent.resume("t", {"m1": Approve()})
    data = {m.tool_call_id: m.data for m in done.new_messages if isinstance(m, ToolMessage)}
    assert data == {"m1": "sent to bo", "l1": "found"}


async def test_approval_middleware_when_decides_per_call_among_the_matched_tools() -> None:
    @tool
    def mcp_pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    calls = [
        ToolCall("small", "mcp_pay", {"amount": 5}),
        ToolCall("big", "mcp_pay", {"amount": 500}),
    ]
    agent = Agent(
        ScriptedModel([calls, "ok"]),
        tools=[mcp_pay],
        middleware=[ApprovalMiddleware(["mcp_*"], when=lambda c: c.args["amount"] > 100)],
    )
    result = await agent.run("pay", thread_id="t")
    assert [p.id for p in result.pending] == ["big"]
    done = await agent.resume("t", {"big": Approve()})
    data = {m.tool_call_id: m.data for m in done.new_messages if isinstance(m, ToolMessage)}
    assert data == {"small": "paid 5", "big": "paid 500"}


def test_approval_middleware_without_patterns_or_a_rule_says_what_it_needs() -> None:
    from plait.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"tools=\[name patterns\] or when="):
        ApprovalMiddleware()


class Budget(Middleware):
    """Pauses a turn for its own reason: a question for the user after the first call."""

    def __init__(self) -> None:
        self.seen = 0

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        self.seen += 1
        if call.name == "pay":
            raise PauseTurn("budget: ask the user before paying")
        return call


async def test_a_middleware_pauses_the_turn_for_its_own_reason_and_is_not_asked_again() -> None:
    ran: list[str] = []
    budget = Budget()
    agent = Agent(
        ScriptedModel([[ToolCall("p1", "pay", {"amount": 3})], "paid"]),
        tools=_tools(ran),
        middleware=[budget],
    )
    result = await agent.run("pay", thread_id="t")
    assert result.pending[0].reason == "budget: ask the user before paying"
    assert ran == []
    with pytest.raises(ThreadPaused):
        await agent.run("again", thread_id="t")
    # an approved call still passes before_tool_call; Budget raises again, so the turn
    # would pause again: the resume holds it once more, exactly as the first time
    again = await agent.resume("t", {"p1": Approve()})
    assert again.paused and [p.id for p in again.pending] == ["p1"]
    final = await agent.resume("t", {"p1": Answer("paid by hand")})
    assert final.output == "paid"


async def test_stream_resume_yields_the_resumed_turn_live() -> None:
    ran: list[str] = []

    def answer(request: ModelRequest) -> ModelResponse:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return ModelResponse(tool_calls=[ToolCall("d1", "delete", {"name": "x"})])
        return ModelResponse(content="gone")

    agent = Agent(FunctionModel(answer), tools=_tools(ran))
    types = [e.type async for e in agent.stream("delete x", thread_id="t")]
    assert "turn_paused" in types and "turn_finished" not in types

    stream = agent.stream_resume("t", {"d1": Approve()})
    resumed = [e.type async for e in stream]

    assert resumed[:2] == ["turn_started", "turn_resumed"] or "turn_resumed" in resumed
    assert resumed[-1] == "turn_finished"
    assert stream.result is not None and stream.result.output == "gone"
    assert ran == ["delete x"]


async def test_a_claimed_pause_whose_resume_died_is_rejected_as_maybe_run() -> None:
    agent = Agent(ScriptedModel([FIVE, "moved on"]), tools=_tools([]))
    await agent.run("go", thread_id="t")
    snapshot = await agent.store.load("t")
    state = dict(snapshot.state)
    state[PENDING_KEY] = {**state[PENDING_KEY], "claimed": {"at": 1.0}}  # as a dead resume left it
    await agent.store.append("t", [], expected_version=snapshot.version, state=state)

    with pytest.raises(ResumeConflict, match="did not finish"):
        await agent.resume("t", {"c2": Approve(), "c4": Approve()})
    result = await agent.run("next", thread_id="t", on_paused="reject")

    assert result.output == "moved on"
    messages = (await agent.store.load("t")).messages
    held = [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in ("c2", "c4")]
    assert all("may have run" in str(m.data) for m in held) and len(held) == 2


async def test_a_pause_from_a_newer_format_is_refused_not_misread() -> None:
    from plait.errors import ConfigurationError

    agent = Agent(ScriptedModel([FIVE]), tools=_tools([]))
    await agent.run("go", thread_id="t")
    snapshot = await agent.store.load("t")
    state = dict(snapshot.state)
    state[PENDING_KEY] = {**state[PENDING_KEY], "format": 99}
    await agent.store.append("t", [], expected_version=snapshot.version, state=state)

    with pytest.raises(ConfigurationError, match="newer plait"):
        await agent.resume("t", {"c2": Approve(), "c4": Approve()})


async def test_an_approval_never_carries_over_to_a_later_call_reusing_its_id() -> None:
    # Some OpenAI-compatible servers number calls per response ("call_1" every time): the
    # approval of one dispatch's call must not let the next dispatch's call run unasked.
    ran: list[str] = []
    script: list[Any] = [
        ToolCall("call_1", "delete", {"name": "a"}),
        ToolCall("call_1", "delete", {"name": "b"}),
        "done",
    ]
    agent = Agent(ScriptedModel(script), tools=_tools(ran))
    first = await agent.run("delete a, then b", thread_id="t")
    assert [p.args for p in first.pending] == [{"name": "a"}]
    second = await agent.resume("t", {"call_1": Approve()})
    assert ran == ["delete a"]
    assert [p.args for p in second.pending] == [{"name": "b"}]  # asked again, not run
    third = await agent.resume("t", {"call_1": Reject("no")})
    assert ran == ["delete a"] and third.output == "done"


async def test_a_resume_stopped_while_its_approved_call_ran_is_never_resumed_again() -> None:
    """The claim: a resume cancelled while the approved call runs (its effect may have
    happened) leaves the pause claimed; a second resume is a ResumeConflict, and the call
    never runs twice."""
    store = MemoryThreadStore()
    started, runs = asyncio.Event(), []

    @tool(requires_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        runs.append(amount)
        started.set()
        await asyncio.Event().wait()  # stopped here by the cancellation
        return "paid"

    def agent(*script: object) -> Agent:
        return Agent(ScriptedModel(list(script)), tools=[pay], store=store)  # type: ignore[arg-type]

    paused = await agent(ToolCall("p1", "pay", {"amount": 5})).run("pay 5", thread_id="t")
    assert paused.paused and runs == []
    first = asyncio.create_task(agent("never").resume("t", {"p1": Approve()}))
    await asyncio.wait_for(started.wait(), 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    with pytest.raises(ResumeConflict, match="did not finish"):
        await agent("never").resume("t", {"p1": Approve()})
    assert runs == [5]
