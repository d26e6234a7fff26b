"""Running the tool calls of one model response.

Each call goes ``before_tool_call`` → resolve in the registry *now* (late binding) → validate →
``wrap_tool_call`` around the tool → ``after_tool_call``. Whatever happens, the call gets exactly
one result message, in call order, so call/result pairs always stay intact:

==============================  =========================================================
situation                       result the model reads
==============================  =========================================================
rejected by a model hook        the hook's message (e.g. the tool-call validator's)
skipped by middleware           ``Tool call skipped by middleware <name>.`` (is_error)
unknown tool                    the standard unknown-tool error listing available tools
arguments not a JSON object     the raw text and what to send instead
arguments fail the schema       each failing field and why
the tool raises ``ToolError``   its message, word for word
the tool raises anything else   ``Tool '<name>' failed: <Type>: <message>``
the turn ended before it ran    ``Tool call not run: the turn was ended ...`` (is_error)
==============================  =========================================================

A tool (or tool middleware) that raises ``CancelledError`` without its task being cancelled
counts as raising an error, not as cancelling the turn. Result data that is not JSON (from the
tool or from middleware) is converted the same way: JSON-able types (dataclasses, models, sets)
to JSON values, anything else to its ``str``.

Calls run concurrently (bounded by ``max_concurrency``) except around *sequential* tools
(``metadata={"sequential": True}``, e.g. tools that load or unload other tools): such a call waits
for the calls before it and the calls after it wait for it, so a tool it registers resolves for
the calls that follow in the same response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from plait.errors import (
    ToolArgumentsError,
    ToolError,
    ToolExecutionError,
    ToolResolutionError,
)
from plait.messages import ToolCall, ToolMessage, ToolResult
from plait.middleware.base import SkipToolCall, ToolHandler
from plait.middleware.context import DispatchContext
from plait.middleware.stack import MiddlewareStack
from plait.runtime.events import ErrorOccurred, ToolCallFinished, ToolCallStarted
from plait.tools import ToolContext

__all__ = ["run_tool_calls"]

_SCALARS = (str, int, float, bool, type(None))


def _jsonable(data: Any) -> Any:
    if isinstance(data, _SCALARS):
        return data
    from pydantic_core import to_jsonable_python  # not at import: pydantic_core costs ~30 ms

    try:
        return to_jsonable_python(data)
    except Exception:
        return str(data)


def _cancelled_from_outside() -> bool:
    """Whether the running task was asked to cancel (a ``CancelledError`` is then ours to
    propagate), as opposed to code inside a tool raising one on its own."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _not_run(call: ToolCall, d: DispatchContext) -> ToolResult:
    reason = d.error or d.turn.error
    why = f" ({type(reason).__name__}: {reason})" if reason is not None else ""
    return ToolResult(
        call.id, f"Tool call not run: the turn was ended before it started{why}.", is_error=True
    )


def _executor(d: DispatchContext) -> ToolHandler:
    async def execute(call: ToolCall) -> ToolResult:
        try:
            tool = d.registry.resolve(call.name)
        except ToolResolutionError as exc:
            return ToolResult(call.id, str(exc), is_error=True)
        if call.raw_args is not None:
            bad_args = ToolArgumentsError.not_an_object(call.name, call.raw_args)
            return ToolResult(call.id, str(bad_args), is_error=True)
        try:
            args = tool.validate(call.args)
        except ToolArgumentsError as exc:
            return ToolResult(call.id, str(exc), is_error=True)
        try:
            data = await tool.invoke(args, ToolContext(call, d.turn, d))
        except ToolError as exc:
            return ToolResult(call.id, str(exc), is_error=True)
        except (Exception, asyncio.CancelledError) as exc:
            if not isinstance(exc, Exception) and _cancelled_from_outside():
                raise
            error = ToolExecutionError(call.name, exc)
            d.turn.emit(ErrorOccurred(error=error, where=f"tool:{call.name}"))
            return ToolResult(call.id, str(error), is_error=True)
        return ToolResult(call.id, _jsonable(data))

    return execute


async def _run_one(
    call: ToolCall, d: DispatchContext, stack: MiddlewareStack, handler: ToolHandler
) -> ToolMessage:
    emit = d.turn.emit
    emit(ToolCallStarted(dispatch=d.index, call=call))
    skipped_by: str | None = None
    rejection = d.rejected_calls.get(call.id)
    if rejection is not None:
        result = ToolResult(call.id, rejection, is_error=True)
        emit(ToolCallFinished(dispatch=d.index, call=call, result=result, skipped_by="rejected"))
        return ToolMessage.from_result(result, call.name)
    try:
        decided = await stack.run_before_tool_call(call, d) if not d.stopped else None
        if isinstance(decided, SkipToolCall):
            skipped_by = decided.by
            result = ToolResult(call.id, decided.message, is_error=True)
        elif decided is None or d.stopped:
            # The turn ended (abort or nack) before this call started: the stack skipped the
            # remaining before_tool_call hooks, so running the tool would bypass them.
            skipped_by = "stopped"
            result = _not_run(call, d)
        else:
            result = await handler(decided)
            result = await stack.run_after_tool_call(decided, result, d)
    except (Exception, asyncio.CancelledError) as exc:
        if not isinstance(exc, Exception) and _cancelled_from_outside():
            raise
        emit(ErrorOccurred(error=exc, where=f"tool_middleware:{call.name}"))
        result = ToolResult(
            call.id, f"Tool call failed in middleware: {type(exc).__name__}: {exc}", is_error=True
        )
    # Middleware may return data the store cannot hold (a model object, a set); convert it as
    # the executor converts a tool's return value, so the dispatch can still be persisted.
    data = _jsonable(result.data)
    if result.tool_call_id != call.id or data is not result.data:
        result = ToolResult(call.id, data, result.is_error)
    emit(ToolCallFinished(dispatch=d.index, call=call, result=result, skipped_by=skipped_by))
    return ToolMessage.from_result(result, call.name)


def _groups(calls: Sequence[ToolCall], d: DispatchContext) -> list[list[int]]:
    """Split call indexes into groups that may run concurrently (sequential tools alone)."""
    groups: list[list[int]] = [[]]
    for i, call in enumerate(calls):
        tool = d.registry.get(call.name)
        if tool is not None and tool.definition.metadata.get("sequential"):
            groups.extend(([i], []))
        else:
            groups[-1].append(i)
    return [g for g in groups if g]


async def run_tool_calls(
    calls: Sequence[ToolCall], d: DispatchContext, stack: MiddlewareStack, max_concurrency: int
) -> list[ToolMessage]:
    """Run ``calls``; return one result message per call, in call order."""
    handler = stack.wrap_tool(_executor(d), d)
    if len(calls) == 1:
        return [await _run_one(calls[0], d, stack, handler)]
    results: list[ToolMessage | None] = [None] * len(calls)
    limit = asyncio.Semaphore(max(1, max_concurrency))

    async def bounded(i: int) -> None:
        async with limit:
            results[i] = await _run_one(calls[i], d, stack, handler)

    for group in _groups(calls, d):
        if len(group) == 1:
            await bounded(group[0])
        else:
            async with asyncio.TaskGroup() as tg:
                for i in group:
                    tg.create_task(bounded(i))
    # Every slot is filled unless a call's task ended without returning; never drop the call
    # (that would leave it without a result in the thread), answer it with an error instead.
    return [
        r
        if r is not None
        else ToolMessage.from_result(
            ToolResult(calls[i].id, "Tool call ended without a result.", is_error=True),
            calls[i].name,
        )
        for i, r in enumerate(results)
    ]
