"""``ToolCallValidator``: check every tool call of a response before any of them runs.

Checked against the tools advertised in the request that produced the response:

* an unknown name → the standard unknown-tool error, listing the tools advertised;
* arguments that are not a JSON object → the error quotes them (or, with ``repair_json=True``,
  trivially broken JSON — trailing commas, single quotes — is repaired once and reported);
* arguments that fail the tool's schema → the error names each failing field and why.

An invalid call is rejected (``ctx.reject_tool_call``): it does not run and the model reads the
error as its result; valid siblings in the same response still run. A call that comes after a
*sequential* tool in the same response (one that may register tools, such as ``load_skill``) is
left to the runtime's late resolution, so a tool loaded earlier in the response still resolves.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from plait.errors import ToolArgumentsError, ToolResolutionError
from plait.messages import ToolCall
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.events import ToolCallRejected, ToolCallRepaired
from plait.tools import Tool

__all__ = ["ToolCallValidator", "repair_json_object"]

_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_MAX_REPAIR_CHARS = 100_000


def repair_json_object(text: str) -> dict[str, Any] | None:
    """Parse ``text`` as a JSON object, forgiving trailing commas and single quotes.

    Returns ``None`` when it is not trivially repairable (or not an object). Python literals are
    read with :func:`ast.literal_eval`, which evaluates no code.
    """
    if len(text) > _MAX_REPAIR_CHARS:
        return None
    candidate = _TRAILING_COMMA.sub(r"\1", text.strip())
    try:
        value = json.loads(candidate)
    except ValueError:
        try:
            value = ast.literal_eval(candidate)
            json.dumps(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


class ToolCallValidator(Middleware):
    """A default guard: an ``after_model_call`` middleware pinned outermost, so it checks the
    response every other middleware produced. ``repair_json`` enables the one-shot repair."""

    placement = Placement(position="outermost")

    def __init__(self, *, repair_json: bool = True) -> None:
        self.repair_json = repair_json

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        if not response.tool_calls:
            return response
        advertised: set[str] = set()
        for definition in request.tools:  # a loop, not a comprehension: no extra frame
            advertised.add(definition.name)
        registry = ctx.registry
        late_bound = changed = False
        calls: list[ToolCall] = []
        for call in response.tool_calls:
            tool = registry.get(call.name)
            checked = self._check(call, tool, advertised, late_bound, ctx)
            changed = changed or checked is not call
            calls.append(checked)
            if tool is not None and tool.definition.metadata.get("sequential"):
                late_bound = True
        return response.replace(tool_calls=calls) if changed else response

    def _check(
        self,
        call: ToolCall,
        tool: Tool | None,
        advertised: set[str],
        late_bound: bool,
        ctx: DispatchContext,
    ) -> ToolCall:
        if call.raw_args is not None:
            repaired = repair_json_object(call.raw_args) if self.repair_json else None
            if repaired is None:
                error = ToolArgumentsError.not_an_object(call.name, call.raw_args)
                self._reject(ctx, call, str(error))
                return call
            ctx.turn.emit(ToolCallRepaired(dispatch=ctx.index, call=call, original=call.raw_args))
            call = ToolCall(call.id, call.name, repaired)
        if call.name not in advertised:
            if not late_bound:
                self._reject(ctx, call, str(ToolResolutionError(call.name, list(advertised))))
            return call
        if tool is not None:
            try:
                tool.validate(call.args)
            except ToolArgumentsError as exc:
                self._reject(ctx, call, str(exc))
        return call

    @staticmethod
    def _reject(ctx: DispatchContext, call: ToolCall, reason: str) -> None:
        ctx.reject_tool_call(call.id, reason)
        ctx.turn.emit(ToolCallRejected(dispatch=ctx.index, call=call, reason=reason))
