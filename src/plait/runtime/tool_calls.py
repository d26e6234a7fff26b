"""Running the tool calls of one model response.

Each call goes ``before_tool_call`` → resolve in the registry *now* (late binding) → validate →
``wrap_tool_call`` around the tool → ``after_tool_call``. Whatever happens, the call gets exactly
one result message, in call order, so call/result pairs always stay intact:

==============================  =========================================================
situation                       result the model reads
==============================  =========================================================
rejected (reject_tool_call)     the message given (e.g. the tool-call validator's)
skipped by middleware           ``Tool call skipped by middleware <name>.`` (is_error)
unknown tool                    the standard unknown-tool error listing available tools
arguments not a JSON object     the raw text and what to send instead
arguments fail the schema       each failing field and why
the tool raises ``ToolError``   its message, word for word
the tool raises anything else   ``Tool '<name>' failed: <Type>: <message>``, also for
                                ``GeneratorExit``, ``StopIteration`` (not the ``RuntimeError``
                                Python turns it into in a coroutine) and ``StopAsyncIteration``
the tool runs past its timeout  ``Tool '<name>' timed out after <n> s and was cancelled. ...``
the turn ended before it ran    ``Tool call not run: the turn was ended ...`` (is_error)
held for a decision             none yet: the turn pauses (:mod:`plait.runtime.pause`);
                                also when the tool raises ``PauseTurn`` (a paused subagent)
==============================  =========================================================

A tool (or tool middleware) that raises ``CancelledError`` without its task being cancelled
counts as raising an error, not as cancelling the turn. Only ``KeyboardInterrupt`` and
``SystemExit`` are not caught: the process is being asked to stop, so they end the turn and
propagate out of ``agent.run`` (nothing of the dispatch is persisted, as for a crash).

Result data a store cannot encode (from the tool or from middleware) is made storable
(:mod:`plait.storable`: JSON-able types such as dataclasses, models and sets to JSON values,
lone surrogates to U+FFFD, ``nan`` to ``"NaN"``, anything else to its ``str``) and a
:class:`~plait.runtime.events.ValuesReplaced` event says what was replaced.

Calls run concurrently (bounded by ``max_concurrency``) except around *sequential* tools
(``metadata={"sequential": True}``, e.g. tools that load or unload other tools): such a call waits
for the calls before it and the calls after it wait for it, so a tool it registers resolves for
the calls that follow in the same response.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Coroutine, Sequence
from types import CoroutineType
from typing import Any

from plait.errors import (
    ToolArgumentsError,
    ToolError,
    ToolExecutionError,
    ToolResolutionError,
    ToolTimeoutError,
)
from plait.messages import ToolCall, ToolMessage, ToolResult, split_tool_output
from plait.middleware.base import SkipToolCall, ToolHandler
from plait.middleware.context import DispatchContext
from plait.middleware.stack import MiddlewareStack
from plait.models.timeouts import Resumed
from plait.runtime.events import (
    ErrorOccurred,
    ToolCallFinished,
    ToolCallStarted,
    ToolTimeoutReached,
    ValuesReplaced,
)
from plait.runtime.pause import PauseTurn, gate, hold
from plait.storable import Replacement, storable_value
from plait.tools import FunctionTool, Tool, ToolContext

__all__ = ["results_after_cancel", "run_tool_calls"]


def _cancelled_from_outside() -> bool:
    """Whether the running task was asked to cancel (a ``CancelledError`` is then ours to
    propagate), as opposed to code inside a tool raising one on its own."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _propagates(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a tool or tool middleware, ends the turn instead of becoming
    the call's error result: ``KeyboardInterrupt`` and ``SystemExit``, and a ``CancelledError``
    when the turn itself is being cancelled. Everything else (``GeneratorExit`` included) is the
    call's failure."""
    if isinstance(exc, Exception):
        return False
    if isinstance(exc, asyncio.CancelledError):
        return _cancelled_from_outside()
    return isinstance(exc, KeyboardInterrupt | SystemExit)


_CARRIED = (StopIteration, StopAsyncIteration, GeneratorExit)


def _raised(exc: BaseException) -> BaseException:
    """What the tool raised: the ``StopIteration`` (or ``StopAsyncIteration``) behind the
    ``RuntimeError`` Python raises in its place when one leaves a coroutine or generator
    (PEP 479), or the one a blocking tool's thread carried out the same way (see
    :class:`~plait.tools.FunctionTool`); else ``exc``."""
    cause = exc.__cause__
    if (
        type(exc) is RuntimeError
        and isinstance(cause, _CARRIED)
        and str(exc).endswith(f"raised {type(cause).__name__}")
    ):
        return cause
    return exc


def _not_run(call: ToolCall, d: DispatchContext) -> ToolResult:
    reason = d.error or d.turn.error
    why = f" ({type(reason).__name__}: {reason})" if reason is not None else ""
    return ToolResult(
        call.id, f"Tool call not run: the turn was ended before it started{why}.", is_error=True
    )


def _start(
    tool: Tool, args: dict[str, Any], call: ToolCall, d: DispatchContext, default: float
) -> tuple[Any, Awaitable[Any] | None]:
    """Start ``tool``: ``(result, None)`` if it finished without waiting (most calls do), else
    ``(None, awaitable)`` to await, under the tool's timeout (its own, else ``default``), which
    raises :class:`ToolTimeoutError` when that deadline, not the tool itself, raised the
    timeout. A plain function, not a coroutine: a call that finishes at once costs no extra
    coroutine, and only one that suspends gets a timer (a timer per call measured ~20 µs a
    dispatch)."""
    limit = tool.timeout if tool.timeout is not None else default
    running = tool.invoke(args, ToolContext(call, d.turn, d))
    waiting: Awaitable[Any] = running
    if type(running) is CoroutineType or isinstance(running, Coroutine):
        try:
            first = running.send(None)
        except StopIteration as done:
            return done.value, None
        waiting = Resumed(running, first)
    if math.isinf(limit) or (isinstance(tool, FunctionTool) and tool.runs_on_loop):
        return None, waiting
    return None, _under_deadline(waiting, limit, call, d)


async def _under_deadline(
    waiting: Awaitable[Any], limit: float, call: ToolCall, d: DispatchContext
) -> Any:
    deadline = asyncio.timeout(limit)
    try:
        async with deadline:
            return await waiting
    except TimeoutError:
        if deadline.expired():
            d.turn.emit(ToolTimeoutReached(dispatch=d.index, call=call, timeout=limit))
            raise ToolTimeoutError(call.name, limit) from None
        raise


def _executor(d: DispatchContext, default_timeout: float) -> ToolHandler:
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
            data, pending = _start(tool, args, call, d, default_timeout)
            if pending is not None:
                data = await pending
        except (ToolError, ToolTimeoutError) as exc:
            return ToolResult(call.id, str(exc), is_error=True)
        except PauseTurn:  # the tool holds its own call (a paused subagent's)
            raise
        except BaseException as exc:
            if _propagates(exc):
                raise
            error = ToolExecutionError(call.name, _raised(exc))
            d.turn.emit(ErrorOccurred(error=error, where=f"tool:{call.name}"))
            return ToolResult(call.id, str(error), is_error=True)
        if type(data) is str:
            return ToolResult(call.id, data)
        data, parts = split_tool_output(data)
        return ToolResult(call.id, data, parts=parts)

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
        if d._error is not None or d.turn._error is not None:  # d.stopped, inline
            decided: ToolCall | SkipToolCall | None = None
        elif stack.has_before_tool_call:
            decided = await stack.run_before_tool_call(call, d)
        else:
            decided = call
        if isinstance(decided, ToolCall):
            reason = gate(decided, d)
            if reason is not None:
                return hold(decided, reason, d)
        if isinstance(decided, SkipToolCall):
            skipped_by = decided.by
            result = ToolResult(call.id, decided.message, is_error=True)
        elif decided is None or d._error is not None or d.turn._error is not None:
            # The turn ended (abort or nack) before this call started: the stack skipped the
            # remaining before_tool_call hooks, so running the tool would bypass them.
            skipped_by = "stopped"
            result = _not_run(call, d)
        else:
            result = await handler(decided)
            if stack.has_after_tool_call:
                result = await stack.run_after_tool_call(decided, result, d)
    except PauseTurn as pause:  # a before_tool_call holds the call for a decision
        return hold(call, pause.reason, d, pause.pending)
    except BaseException as exc:
        if _propagates(exc):
            raise
        exc = _raised(exc)
        emit(ErrorOccurred(error=exc, where=f"tool_middleware:{call.name}"))
        result = ToolResult(
            call.id, f"Tool call failed in middleware: {type(exc).__name__}: {exc}", is_error=True
        )
    # The tool or middleware may return data the store cannot hold (a model object, a set, a
    # lone surrogate, nan); make it storable here, so the dispatch can still be persisted.
    data = result.data
    if type(data) is not str or not data.isascii():  # ASCII text is storable as it is
        replaced: list[Replacement] = []
        data = storable_value(data, "data", replaced)
        if replaced:
            emit(ValuesReplaced(source=f"tool:{call.name}", replacements=replaced))
    if result.tool_call_id != call.id or data is not result.data:
        result = ToolResult(call.id, data, result.is_error, result.parts)
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
    calls: Sequence[ToolCall],
    d: DispatchContext,
    stack: MiddlewareStack,
    max_concurrency: int,
    *,
    tool_timeout: float = math.inf,
    finished: dict[str, ToolMessage] | None = None,
) -> list[ToolMessage]:
    """Run ``calls``; return one result message per call, in call order. A tool without its own
    ``timeout`` is cancelled after ``tool_timeout`` seconds. Each result is also put in
    ``finished`` (by call id) as soon as it is ready, so a cancelled caller knows which calls
    ran (see :func:`results_after_cancel`)."""
    handler = _executor(d, tool_timeout)
    if stack.has_wrap_tool_call:
        handler = stack.wrap_tool(handler, d)
    done: dict[str, ToolMessage] = {} if finished is None else finished
    if len(calls) == 1:
        done[calls[0].id] = await _run_one(calls[0], d, stack, handler)
        return [done[calls[0].id]]
    results: list[ToolMessage | None] = [None] * len(calls)
    limit = asyncio.Semaphore(max(1, max_concurrency))

    async def bounded(i: int) -> None:
        async with limit:
            results[i] = done[calls[i].id] = await _run_one(calls[i], d, stack, handler)

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


def results_after_cancel(
    calls: Sequence[ToolCall], finished: dict[str, ToolMessage]
) -> list[ToolMessage]:
    """One result per call after the turn was cancelled mid-dispatch: the finished ones as they
    are, every other one an error saying it was cancelled (it may have had side effects)."""
    return [
        finished.get(call.id)
        or ToolMessage.from_result(
            ToolResult(
                call.id,
                "Tool call cancelled: the turn was cancelled before it finished; it may have "
                "had side effects.",
                is_error=True,
            ),
            call.name,
        )
        for call in calls
    ]
