"""Every tool call keeps exactly one result, whatever its tool or middleware does (raises
``CancelledError``, returns a non-result, returns non-JSON data, ends the turn)."""

from __future__ import annotations

import asyncio

import pytest

from plait import (
    Agent,
    AssistantMessage,
    DispatchContext,
    Message,
    Middleware,
    ScriptedModel,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnAborted,
    tool,
)
from plait.errors import ToolExecutionError
from plait.messages import ToolResult
from plait.middleware import ToolHandler
from plait.runtime import ErrorOccurred, ToolCallFinished
from plait.stores.memory import MemoryThreadStore
from plait.tools import Tool


def _paired(messages: list[Message]) -> bool:
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    return sorted(calls) == sorted(results)


@tool
async def cancels_itself() -> str:
    """Raise CancelledError from inside the tool (e.g. awaiting a future someone cancelled)."""
    raise asyncio.CancelledError()


@tool
async def fine() -> str:
    """Succeed."""
    return "ok"


@pytest.mark.parametrize(
    "calls",
    [
        [ToolCall("c1", "cancels_itself")],
        [ToolCall("c1", "cancels_itself"), ToolCall("c2", "fine")],
    ],
    ids=["alone", "with-a-sibling"],
)
async def test_tool_raising_cancelled_error_gets_an_error_result_not_an_orphan(
    calls: list[ToolCall],
) -> None:
    store = MemoryThreadStore()
    agent = Agent(ScriptedModel([calls, "done"]), tools=[cancels_itself, fine], store=store)
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    snap = await store.load("t")
    assert _paired(snap.messages)
    by_id = {m.tool_call_id: m for m in snap.messages if isinstance(m, ToolMessage)}
    assert by_id["c1"].is_error and "CancelledError" in by_id["c1"].text
    if "c2" in by_id:
        assert by_id["c2"].data == "ok"


async def test_cancelling_the_turn_during_concurrent_tools_still_cancels_it() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take long."""
        started.set()
        await asyncio.sleep(10)
        return "late"

    store = MemoryThreadStore()
    agent = Agent(
        ScriptedModel([[ToolCall("a", "slow"), ToolCall("b", "slow")], "done"]),
        tools=[slow],
        store=store,
    )
    task = asyncio.create_task(agent.run("go", thread_id="t"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snap = await store.load("t")
    # the calls that were running are kept, each answered as cancelled (issue 11 §1)
    assert [m.role for m in snap.messages] == ["user", "assistant", "tool", "tool"]
    assert all(m.is_error and "cancelled" in m.text for m in snap.messages[2:])  # type: ignore[union-attr]


async def test_after_tool_call_returning_none_is_an_error_result_and_siblings_keep_theirs() -> None:
    class Forgetful(Middleware):
        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: DispatchContext
        ) -> ToolResult:
            return None if call.id == "c1" else result  # type: ignore[return-value]

    store = MemoryThreadStore()
    agent = Agent(
        ScriptedModel([[ToolCall("c1", "fine"), ToolCall("c2", "fine")], "done"]),
        tools=[fine],
        middleware=[Forgetful()],
        store=store,
    )
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    snap = await store.load("t")
    assert _paired(snap.messages)
    by_id = {m.tool_call_id: m for m in snap.messages if isinstance(m, ToolMessage)}
    assert by_id["c1"].is_error
    assert "Forgetful.after_tool_call returned NoneType" in by_id["c1"].text
    assert by_id["c2"].data == "ok"
    assert any(isinstance(e, ErrorOccurred) for e in result.events)


async def test_wrap_tool_call_returning_none_is_an_error_result() -> None:
    class Swallow(Middleware):
        async def wrap_tool_call(
            self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
        ) -> ToolResult:
            await call_next(call)
            return None  # type: ignore[return-value]

    agent = Agent(
        ScriptedModel([ToolCall("c1", "fine"), "done"]), tools=[fine], middleware=[Swallow()]
    )
    result = await agent.run("go")
    message = next(m for m in result.new_messages if isinstance(m, ToolMessage))
    assert message.is_error and "Swallow.wrap_tool_call returned NoneType" in message.text


async def test_calls_after_an_abort_do_not_run_and_do_not_bypass_before_tool_call() -> None:
    ran: list[str] = []

    @tool(metadata={"sequential": True})
    async def stop(ctx: ToolContext) -> str:
        """End the turn."""
        ctx.turn.abort(RuntimeError("enough"))
        return "stopping"

    @tool
    async def guarded() -> str:
        """Must never run: the gate forbids it."""
        ran.append("guarded")
        return "ran"

    class Gate(Middleware):
        async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
            return None if call.name == "guarded" else call

    store = MemoryThreadStore()
    agent = Agent(
        ScriptedModel([[ToolCall("c1", "stop"), ToolCall("c2", "guarded")], "never"]),
        tools=[stop, guarded],
        middleware=[Gate()],
        store=store,
    )
    events = []
    stream = agent.stream("go", thread_id="t")
    with pytest.raises(TurnAborted):
        async for event in stream:
            events.append(event)
    assert ran == []
    snap = await store.load("t")
    assert _paired(snap.messages)
    c2 = next(m for m in snap.messages if isinstance(m, ToolMessage) and m.tool_call_id == "c2")
    assert c2.is_error and "not run" in c2.text
    skipped = [e for e in events if isinstance(e, ToolCallFinished) and e.call.id == "c2"]
    assert [e.skipped_by for e in skipped] == ["stopped"]


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


async def test_middleware_returning_non_json_data_does_not_lose_the_dispatch() -> None:
    class Decorate(Middleware):
        async def after_tool_call(
            self, call: ToolCall, result: ToolResult, ctx: DispatchContext
        ) -> ToolResult:
            return ToolResult(
                result.tool_call_id, {"data": result.data, "tags": {"a"}, "o": _Opaque()}
            )

    store = MemoryThreadStore()
    agent = Agent(
        ScriptedModel([ToolCall("c1", "fine"), "done"]),
        tools=[fine],
        middleware=[Decorate()],
        store=store,
    )
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    snap = await store.load("t")
    assert [m.role for m in snap.messages] == ["user", "assistant", "tool", "assistant"]
    assert _paired(snap.messages)


def raising(kind: str, exc: type[BaseException]) -> Tool:
    """A tool named ``t`` raising ``exc("boom")``: sync on the loop, sync in a worker thread
    (``blocking``), async at once, or async after suspending."""
    if kind == "sync":

        def sync() -> str:
            """Raise."""
            raise exc("boom")

        return tool(name="t")(sync)
    if kind == "blocking":

        def blocking() -> str:
            """Raise in a worker thread."""
            raise exc("boom")

        return tool(name="t", blocking=True, timeout=60)(blocking)

    async def run() -> str:
        """Raise, maybe after suspending."""
        if kind == "suspended":
            await asyncio.sleep(0)
        raise exc("boom")

    return tool(name="t")(run)


@pytest.mark.parametrize("exc", [GeneratorExit, StopIteration, StopAsyncIteration])
@pytest.mark.parametrize("kind", ["sync", "blocking", "async", "suspended"])
@pytest.mark.parametrize("parallel", [1, 2], ids=["alone", "two-calls"])
async def test_a_tool_raising_a_generator_protocol_exception_gets_an_error_result(
    exc: type[BaseException], kind: str, parallel: int
) -> None:
    # Regression: GeneratorExit ended the whole turn with GeneratorExit; StopIteration read
    # "RuntimeError: coroutine raised StopIteration", and from a blocking tool it never reached
    # the turn at all (asyncio cannot put it in a future): the call hung until its timeout.
    store = MemoryThreadStore()
    calls = [ToolCall(f"c{i}", "t", {}) for i in range(parallel)]
    agent = Agent(ScriptedModel([calls, "done"]), tools=[raising(kind, exc)], store=store)
    result = await agent.run("go", thread_id="t")
    assert result.output == "done"
    results = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert [m.text for m in results] == [f"Tool 't' failed: {exc.__name__}: boom"] * parallel
    assert all(m.is_error for m in results)
    errors = [e for e in result.events if isinstance(e, ErrorOccurred)]
    assert all(isinstance(e.error, ToolExecutionError) for e in errors)
    assert [type(e.error.error) for e in errors if isinstance(e.error, ToolExecutionError)] == [
        exc
    ] * parallel
    assert _paired((await store.load("t")).messages)


@pytest.mark.parametrize("exc", [GeneratorExit, StopIteration])
async def test_tool_middleware_raising_a_generator_protocol_exception_gets_an_error_result(
    exc: type[BaseException],
) -> None:
    class Raises(Middleware):
        async def wrap_tool_call(
            self, call: ToolCall, ctx: DispatchContext, handler: ToolHandler
        ) -> ToolResult:
            raise exc("boom")

    agent = Agent(
        ScriptedModel([ToolCall("c1", "fine"), "done"]), tools=[fine], middleware=[Raises()]
    )
    result = await agent.run("go")
    message = next(m for m in result.new_messages if isinstance(m, ToolMessage))
    assert message.is_error
    assert message.text == f"Tool call failed in middleware: {exc.__name__}: boom"


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("kind", ["sync", "blocking", "async"])
def test_keyboard_interrupt_and_system_exit_from_a_tool_end_the_turn(
    exc: type[BaseException], kind: str
) -> None:
    # Documented in plait.runtime.tool_calls: the process is being asked to stop.
    agent = Agent(ScriptedModel([ToolCall("c1", "t"), "done"]), tools=[raising(kind, exc)])
    with pytest.raises(exc, match="boom"):
        agent.run_sync("go")
