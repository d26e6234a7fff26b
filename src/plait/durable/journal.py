"""``Journal``: the middleware that makes each model call and each tool call a DBOS step.

It sits innermost (``Placement(position="innermost")``), so every other middleware's hooks run
again on replay, and only the call itself is answered from the journal:

=====================  ==================================  =====================================
step (DBOS name)       runs                                on replay
=====================  ==================================  =====================================
``plait.model:N``      the model call of dispatch ``N``    the recorded response; the request's
                       (streamed deltas reach the caller   tool names must equal the recorded
                       live, as without durability)        ones, else :class:`ReplayDivergence`
``plait.tool:NAME:ID`` one tool call (function tools, MCP  the recorded result; a different call
                       tools, skill scripts alike)         at that step → ``ReplayDivergence``
``plait.started:ID``   before a call of a tool with        recorded but its tool step not: the
                       ``idempotent=False``                call was in flight at the crash; it is
                                                           not run again: the turn pauses on it
                                                           (``in_flight="pause"``, the default),
                                                           or it gets an error result
                                                           (``in_flight="error"``)
=====================  ==================================  =====================================

Steps are keyed by their position in the workflow (DBOS's step id) and named as above; DBOS
checks the name at each recorded position, which is how a different call is caught.
"""

from __future__ import annotations

import json
from typing import Literal

from plait.durable.codec import dump_response, dump_result, load_response, load_result
from plait.durable.errors import ReplayDivergence
from plait.errors import ToolResolutionError
from plait.messages import ToolCall, ToolResult
from plait.middleware.base import Middleware, ModelHandler, ToolHandler
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.pause import PauseTurn

__all__ = ["InFlight", "Journal", "in_flight_reason", "not_rerun_message"]

InFlight = Literal["pause", "error"]
"""What a recovered turn does with a non-idempotent call that was in flight at the crash."""


def in_flight_reason(name: str) -> str:
    return (
        f"{name} was running when the worker executing this turn stopped (idempotent=False, "
        "so it was not run again): it may or may not have taken effect. Approve to run it "
        "again, answer with what it did, or reject."
    )


def not_rerun_message(name: str) -> str:
    return (
        f"Tool {name!r} was running when the worker executing this turn stopped, and it is "
        "marked idempotent=False, so it was not run again: it may or may not have taken "
        "effect. Check its effect before calling it again."
    )


def _diverged(error: Exception) -> ReplayDivergence | None:
    from dbos._error import DBOSUnexpectedStepError

    if isinstance(error, DBOSUnexpectedStepError):
        workflow_id, step_id, expected, recorded = error.inputs
        return ReplayDivergence(workflow_id, f"step {step_id}", recorded, expected)
    return None


class Journal(Middleware):
    """Journals the turn's model and tool calls as DBOS steps (a no-op outside a workflow).
    :class:`~plait.durable.DurableAgent` installs it; you do not add it yourself."""

    placement = Placement(position="innermost")

    def __init__(self, in_flight: InFlight = "pause") -> None:
        if in_flight not in ("pause", "error"):
            raise ValueError(f"in_flight must be 'pause' or 'error', not {in_flight!r}")
        self.in_flight = in_flight

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        from dbos import DBOS

        if DBOS.workflow_id is None:
            return await call_next(request)
        tools = [t.name for t in request.tools]

        async def model_step() -> str:
            return dump_response(await call_next(request), tools)

        try:
            text = await DBOS.run_step_async({"name": f"plait.model:{ctx.index}"}, model_step)
        except Exception as exc:
            raise _diverged(exc) or exc from None
        response, recorded = load_response(text)
        if recorded != tools:
            raise ReplayDivergence(
                DBOS.workflow_id,
                f"the model call of dispatch {ctx.index}",
                f"tools {recorded}",
                f"tools {tools}",
            )
        return response

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        from dbos import DBOS

        if DBOS.workflow_id is None:
            return await call_next(call)
        try:
            idempotent = ctx.registry.resolve(call.name).idempotent
        except ToolResolutionError:
            idempotent = True  # the handler answers with the unknown-tool error
        fresh = True
        if not idempotent:
            fresh = False

            async def started_step() -> str:
                nonlocal fresh
                fresh = True
                return '"started"'

            try:
                await DBOS.run_step_async({"name": f"plait.started:{call.id}"}, started_step)
            except Exception as exc:
                raise _diverged(exc) or exc from None

        async def tool_step() -> str:
            if not fresh:  # started in a run that died before the call's result was recorded
                if self.in_flight == "pause":  # recorded as held: every replay holds it again
                    return json.dumps({"name": call.name, "held": in_flight_reason(call.name)})
                return dump_result(
                    call.name, ToolResult(call.id, not_rerun_message(call.name), True)
                )
            return dump_result(call.name, await call_next(call))

        try:
            text = await DBOS.run_step_async(
                {"name": f"plait.tool:{call.name}:{call.id}"}, tool_step
            )
        except Exception as exc:
            raise _diverged(exc) or exc from None
        held = json.loads(text).get("held")
        if held is not None:  # a resume (another workflow) that approves it runs it afresh
            raise PauseTurn(held)
        return load_result(text)[1]
