"""The turn loop of DESIGN.md "One turn": persistence points, pipelines, limits, failures."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import pytest

from plait import (
    Agent,
    AssistantMessage,
    DispatchContext,
    DispatchRejected,
    FunctionModel,
    LimitExceeded,
    Limits,
    Message,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ThreadConflictError,
    ToolCall,
    ToolContext,
    ToolMessage,
    ToolResolutionError,
    TurnAborted,
    TurnContext,
    UserMessage,
    tool,
)
from plait.middleware import Next
from plait.runtime import (
    DispatchFinished,
    ErrorOccurred,
    ModelRequestSent,
    TextDeltaReceived,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from plait.stores.memory import MemoryThreadStore


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Boom(Exception):
    pass


def _roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


async def test_user_input_is_persisted_before_anything_runs() -> None:
    store = MemoryThreadStore()

    class Fail(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            raise Boom("no")

    agent = Agent(ScriptedModel(["never"]), middleware=[Fail()], store=store)
    with pytest.raises(TurnAborted) as info:
        await agent.run("keep me", thread_id="t")
    assert isinstance(info.value.error, Boom)
    snap = await store.load("t")
    assert [m.text for m in snap.messages if isinstance(m, UserMessage)] == ["keep me"]


async def test_turn_input_abort_skips_the_rest_and_ends_the_turn() -> None:
    seen: list[str] = []

    class Aborter(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            seen.append("aborter")
            ctx.abort(ValueError("projection failed"))
            await next()

    class After(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            seen.append("after")
            await next()

    model = ScriptedModel(["never"])
    with pytest.raises(TurnAborted, match="projection failed"):
        await Agent(model, middleware=[Aborter(), After()]).run("go")
    assert seen == ["aborter"]
    assert model.requests == []


async def test_dispatch_input_nack_rejects_the_dispatch() -> None:
    seen: list[str] = []

    class Nacker(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            if ctx.index == 1:
                ctx.nack(RuntimeError("integrity"))
            await next()

    class After(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            seen.append(f"after:{ctx.index}")
            await next()

    store = MemoryThreadStore()
    model = ScriptedModel([ToolCall("c1", "add", {"a": 1, "b": 2}), "never"])
    agent = Agent(model, tools=[add], middleware=[Nacker(), After()], store=store)
    with pytest.raises(DispatchRejected) as info:
        await agent.run("go", thread_id="t")
    assert info.value.dispatch_index == 1 and "integrity" in str(info.value)
    assert seen == ["after:0"]
    assert len(model.requests) == 1
    snap = await store.load("t")
    assert _roles(snap.messages) == ["user", "assistant", "tool"]


async def test_pipeline_hook_that_raises_is_turned_into_nack() -> None:
    class Raiser(Middleware):
        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            raise Boom("budget")

    with pytest.raises(DispatchRejected, match="budget"):
        await Agent(ScriptedModel(["x"]), middleware=[Raiser()]).run("go")


async def test_pipelines_run_in_registration_order_around_next() -> None:
    log: list[str] = []

    class P(Middleware):
        def __init__(self, label: str) -> None:
            self.label = label

        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            log.append(f"{self.label}:ti>")
            await next()
            log.append(f"{self.label}:ti<")

        async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
            log.append(f"{self.label}:di")
            await next()

        async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
            log.append(f"{self.label}:do")
            await next()

        async def turn_output(self, ctx: TurnContext, next: Next) -> None:
            log.append(f"{self.label}:to")
            await next()

    await Agent(ScriptedModel(["x"]), middleware=[P("a"), P("b")]).run("go")
    assert log == [
        "a:ti>",
        "b:ti>",
        "b:ti<",
        "a:ti<",
        "a:di",
        "b:di",
        "a:do",
        "b:do",
        "a:to",
        "b:to",
    ]


async def test_tool_registered_mid_dispatch_resolves_later_but_is_absent_from_payload() -> None:
    @tool
    def secret() -> str:
        """A tool that appears only after load."""
        return "secret value"

    @tool(metadata={"sequential": True})
    def load(ctx: ToolContext) -> str:
        """Register the secret tool."""
        ctx.turn.registry.register(secret)
        return "loaded"

    model = ScriptedModel(
        [
            [ToolCall("c1", "load", {}), ToolCall("c2", "secret", {})],
            "done",
        ]
    )
    result = await Agent(model, tools=[load]).run("go")
    first_payload = [t.name for t in model.requests[0].tools]
    assert first_payload == ["load"]  # the request already built does not advertise it
    results = {m.tool_call_id: m for m in result.new_messages if isinstance(m, ToolMessage)}
    assert (results["c2"].data, results["c2"].is_error) == ("secret value", False)
    assert "secret" in [t.name for t in model.requests[1].tools]
    model.assert_complete()


async def test_unregistered_tool_fails_resolution_with_the_standard_unknown_tool_error() -> None:
    @tool(metadata={"sequential": True})
    def drop(ctx: ToolContext) -> str:
        """Unregister add."""
        ctx.turn.registry.unregister(add)
        return "dropped"

    model = ScriptedModel(
        [
            [ToolCall("c1", "drop", {}), ToolCall("c2", "add", {"a": 1, "b": 1})],
            "done",
        ]
    )
    result = await Agent(model, tools=[add, drop]).run("go")
    msg = next(
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.tool_call_id == "c2"
    )
    assert msg.is_error
    assert msg.data == str(ToolResolutionError("add", ["drop"]))
    assert msg.data == "Unknown tool 'add'. Available tools: drop."
    model.assert_complete()


async def test_unknown_tool_never_raises_out_of_the_loop() -> None:
    model = ScriptedModel([ToolCall("c1", "nope", {}), "recovered"])
    result = await Agent(model, tools=[add]).run("go")
    assert result.output == "recovered"
    msg = result.new_messages[2]
    assert isinstance(msg, ToolMessage) and msg.is_error and "Unknown tool 'nope'" in msg.data
    model.assert_complete()


async def test_exception_in_dispatch_three_leaves_dispatches_one_and_two_persisted() -> None:
    calls = 0

    async def respond(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise Boom("provider down")
        return ModelResponse(tool_calls=[ToolCall(f"c{calls}", "add", {"a": calls, "b": 1})])

    store = MemoryThreadStore()
    agent = Agent(FunctionModel(respond), tools=[add], store=store)
    with pytest.raises(Boom):
        await agent.run("go", thread_id="t")
    snap = await store.load("t")
    assert _roles(snap.messages) == ["user", "assistant", "tool", "assistant", "tool"]
    assert [m.data for m in snap.messages if isinstance(m, ToolMessage)] == [2, 3]
    # the thread stays usable: the next turn continues from it
    agent.model = ScriptedModel(["fine"])
    assert (await agent.run("again", thread_id="t")).output == "fine"


class _LeaseWatchingStore(MemoryThreadStore):
    """A memory store that counts the leases asked for, so a test knows a turn is waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0
        self.second_asked = asyncio.Event()

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        self.asked += 1
        if self.asked == 2:
            self.second_asked.set()
        return super().lease(thread_id)


async def test_concurrent_turns_on_one_thread_are_serialized_by_the_lease() -> None:
    store = _LeaseWatchingStore()
    gate, called = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        called.set()
        await gate.wait()
        return ModelResponse(content="first")

    first = asyncio.create_task(Agent(FunctionModel(slow), store=store).run("one", thread_id="t"))
    await called.wait()  # the first turn holds the lease
    second = Agent(ScriptedModel(["second"]), store=store)
    second_task = asyncio.create_task(second.run("two", thread_id="t"))
    await store.second_asked.wait()  # the second turn waits for the lease the first holds
    assert not second_task.done()
    gate.set()
    results = await asyncio.gather(first, second_task, return_exceptions=True)
    assert [r.output for r in results if not isinstance(r, BaseException)] == ["first", "second"]
    snap = await store.load("t")
    ids = [m.id for m in snap.messages]
    assert len(ids) == len(set(ids))  # nothing duplicated
    texts = [m.text for m in snap.messages if isinstance(m, UserMessage | AssistantMessage)]
    assert texts == ["one", "first", "two", "second"]


async def test_concurrent_writer_conflict_on_dispatch_write() -> None:
    store = MemoryThreadStore()
    gate, called = asyncio.Event(), asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        called.set()
        await gate.wait()
        return ModelResponse(content="late")

    slow_run = asyncio.create_task(Agent(FunctionModel(slow), store=store).run("a", thread_id="t"))
    await called.wait()
    # while the first run waits on its model, another writer appends to the thread
    await store.append("t", [UserMessage("b")], expected_version=1)
    gate.set()
    with pytest.raises(ThreadConflictError):
        await slow_run
    snap = await store.load("t")
    assert [m.text for m in snap.messages] == ["a", "b"]


async def test_invalid_tool_arguments_become_an_error_result_the_model_reads() -> None:
    model = ScriptedModel(
        [
            [
                ToolCall("c1", "add", {"a": "not a number", "b": 1}),
                ToolCall("c2", "add", {"a": 1}),
                ToolCall("c3", "add", {}, raw_args="{a: 1,"),
                ToolCall("c4", "add", {"a": 1, "b": 2}),
            ],
            "done",
        ]
    )
    result = await Agent(model, tools=[add]).run("go")
    msgs = {m.tool_call_id: m for m in result.new_messages if isinstance(m, ToolMessage)}
    assert msgs["c1"].is_error and "a: Input should be a valid integer" in msgs["c1"].data
    assert msgs["c2"].is_error and "b: Field required" in msgs["c2"].data
    assert msgs["c3"].is_error and "not a JSON object" in msgs["c3"].data
    assert (msgs["c4"].data, msgs["c4"].is_error) == (3, False)
    assert result.output == "done"
    model.assert_complete()


async def test_tool_that_raises_becomes_an_error_result_and_an_event() -> None:
    @tool
    async def broken() -> str:
        """Always fails."""
        raise Boom("disk on fire")

    model = ScriptedModel([ToolCall("c1", "broken", {}), "sorry"])
    result = await Agent(model, tools=[broken]).run("go")
    msg = result.new_messages[2]
    assert isinstance(msg, ToolMessage) and msg.is_error
    assert msg.data == "Tool 'broken' failed: Boom: disk on fire"
    errors = [e for e in result.events if isinstance(e, ErrorOccurred)]
    assert [(e.where, e.fatal) for e in errors] == [("tool:broken", False)]
    model.assert_complete()


async def test_dispatch_limit_ends_the_turn_with_a_clear_error_and_a_valid_thread() -> None:
    store = MemoryThreadStore()
    model = FunctionModel(
        lambda r: ToolCall(f"c{len(r.messages)}", "add", {"a": len(r.messages), "b": 1})
    )
    agent = Agent(model, tools=[add], store=store, limits=Limits(model_calls_per_turn=3))
    with pytest.raises(LimitExceeded, match="limit of 3 model calls") as info:
        await agent.run("loop", thread_id="t")
    assert (info.value.kind, info.value.limit) == ("model_calls_per_turn", 3)
    snap = await store.load("t")
    assert _roles(snap.messages) == ["user"] + ["assistant", "tool"] * 3


async def test_cancellation_aborts_the_turn_and_keeps_persisted_messages() -> None:
    store = MemoryThreadStore()
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(3600)
        return "unreachable"

    model = ScriptedModel([ToolCall("c1", "add", {"a": 1, "b": 1}), ToolCall("c2", "hang", {})])
    task = asyncio.create_task(
        Agent(model, tools=[add, hang], store=store).run("go", thread_id="t")
    )
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snap = await store.load("t")
    # dispatch 1 is intact; dispatch 2 (interrupted while its tool ran) is kept with its call
    # answered as cancelled, so no orphan call and no forgotten side effect (issue 11 §1)
    assert _roles(snap.messages) == ["user", "assistant", "tool", "assistant", "tool"]
    last = snap.messages[-1]
    assert isinstance(last, ToolMessage) and last.is_error and "cancelled" in last.text
    model.assert_complete()


async def test_tools_run_concurrently_with_a_bound() -> None:
    running = 0
    peak = 0

    @tool
    async def work(n: int) -> int:
        """Pretend to work."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return n

    calls = [ToolCall(f"c{i}", "work", {"n": i}) for i in range(6)]
    model = ScriptedModel([calls, "done"])
    result = await Agent(model, tools=[work], limits=Limits(max_concurrent_tools=3)).run("go")
    assert peak == 3
    # results are in call order whatever the completion order
    assert [m.data for m in result.new_messages if isinstance(m, ToolMessage)] == list(range(6))
    model.assert_complete()


async def test_registry_is_rebuilt_every_turn() -> None:
    @tool
    def extra() -> str:
        """Added mid-turn."""
        return "x"

    @tool
    def adder(ctx: ToolContext) -> str:
        """Registers extra."""
        ctx.turn.registry.register(extra)
        return "ok"

    model = ScriptedModel([ToolCall("c1", "adder", {}), "one", "two"])
    agent = Agent(model, tools=[adder])
    await agent.run("a", thread_id="t")
    await agent.run("b", thread_id="t")
    assert [t.name for t in model.requests[1].tools] == ["adder", "extra"]
    assert [t.name for t in model.requests[2].tools] == ["adder"]
    model.assert_complete()


async def test_stream_yields_typed_events_live_in_order() -> None:
    model = ScriptedModel([ToolCall("c1", "add", {"a": 2, "b": 2}), "four it is"])
    stream = Agent(model, tools=[add]).stream("go", thread_id="t")
    events = [e async for e in stream]
    kinds = [type(e) for e in events]
    assert kinds[0] is TurnStarted and kinds[-1] is TurnFinished
    assert kinds.count(ModelRequestSent) == 2 and kinds.count(DispatchFinished) == 2
    assert kinds.index(ToolCallStarted) < kinds.index(ToolCallFinished)
    text = "".join(e.text for e in events if isinstance(e, TextDeltaReceived))
    assert text == "four it is"
    assert stream.result is not None and stream.result.output == "four it is"
    model.assert_complete()


async def test_stream_raises_the_turn_error_after_the_error_event() -> None:
    events = []
    with pytest.raises(LimitExceeded):
        async for e in Agent(
            ScriptedModel([ToolCall("c", "add", {"a": 1, "b": 1})]),
            tools=[add],
            limits=Limits(model_calls_per_turn=1),
        ).stream("go"):
            events.append(e)
    assert isinstance(events[-1], ErrorOccurred) and events[-1].fatal


async def test_breaking_out_of_a_stream_cancels_the_turn() -> None:
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(3600)
        return "x"

    stream = Agent(ScriptedModel([ToolCall("c", "hang", {})]), tools=[hang]).stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    assert stream.result is None


def test_run_sync_from_synchronous_code() -> None:
    result = Agent(ScriptedModel(["sync ok"])).run_sync("go")
    assert result.output == "sync ok"


async def test_run_sync_inside_a_loop_is_a_clear_error() -> None:
    from plait import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"await agent\.run"):
        Agent(ScriptedModel(["x"])).run_sync("go")


async def test_state_update_in_run_input_is_persisted_with_the_thread() -> None:
    store = MemoryThreadStore()
    agent = Agent(ScriptedModel(["a", "b"]), store=store)
    await agent.run("one", thread_id="t", state={"k": 1})
    result = await agent.run("two", thread_id="t", state={"j": 2})
    assert result.state == {"k": 1, "j": 2}
    assert (await store.load("t")).state == {"k": 1, "j": 2}


async def test_usage_is_summed_over_dispatches() -> None:
    from plait import Usage

    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall("c", "add", {"a": 1, "b": 1})], usage=Usage(10, 2, requests=1)
            ),
            ModelResponse(content="x", usage=Usage(15, 3, requests=1)),
        ]
    )
    result = await Agent(model, tools=[add]).run("go")
    assert (result.usage.input_tokens, result.usage.output_tokens, result.usage.requests) == (
        25,
        5,
        2,
    )
    model.assert_complete()


async def test_persist_filters_apply_even_when_the_dispatch_was_stopped() -> None:
    @tool
    def secret() -> str:
        """Return projected content."""
        return "SECRET BODY"

    @tool
    def stop(ctx: ToolContext) -> str:
        """Abort the turn from inside a tool."""
        ctx.turn.abort(RuntimeError("stop here"))
        return "stopping"

    class Redact(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            def redact(messages: list[Message]) -> list[Message]:
                return [
                    ToolMessage(m.tool_call_id, m.name, "[redacted]", id=m.id)
                    if isinstance(m, ToolMessage) and m.data == "SECRET BODY"
                    else m
                    for m in messages
                ]

            ctx.persist_filters.append(redact)
            await next()

    store = MemoryThreadStore()
    model = ScriptedModel([[ToolCall("c1", "secret", {}), ToolCall("c2", "stop", {})], "never"])
    agent = Agent(model, tools=[secret, stop], middleware=[Redact()], store=store)
    with pytest.raises(TurnAborted, match="stop here"):
        await agent.run("go", thread_id="t")
    stored = await store.load("t")
    assert [m.data for m in stored.messages if isinstance(m, ToolMessage)] == [
        "[redacted]",
        "stopping",
    ]


async def test_turn_input_abort_is_reported_as_an_error_event_in_the_stream() -> None:
    class Fail(Middleware):
        async def turn_input(self, ctx: TurnContext, next: Next) -> None:
            ctx.abort(ValueError("no projection"))

    events = []
    with pytest.raises(TurnAborted):
        async for event in Agent(ScriptedModel([]), middleware=[Fail()]).stream("go"):
            events.append(event)
    assert isinstance(events[0], TurnStarted)
    assert isinstance(events[-1], ErrorOccurred) and events[-1].fatal


async def test_empty_or_repeated_tool_call_ids_are_made_unique_before_anything_runs() -> None:
    model = ScriptedModel(
        [
            [
                ToolCall("", "add", {"a": 1, "b": 1}),
                ToolCall("dup", "add", {"a": 2, "b": 2}),
                ToolCall("dup", "add", {"a": 3, "b": 3}),
            ],
            "done",
        ]
    )
    result = await Agent(model, tools=[add]).run("go", thread_id="t")
    calls = result.new_messages[1].tool_calls  # type: ignore[union-attr]
    ids = [c.id for c in calls]
    assert ids[1] == "dup" and len(set(ids)) == 3 and all(ids)
    results = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert [results[i] for i in ids] == [2, 4, 6]
    model.assert_complete()
