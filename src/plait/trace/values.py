"""How the trace recorder shapes the values it stores: bounded copies of event fields and tool
arguments, a tool output as text, the fields kept of a model response."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from plait.errors import clipped
from plait.messages import AssistantMessage, Message, ToolCall
from plait.models.base import ModelResponse
from plait.runtime.output import FINAL_RESULT_TOOL
from plait.trace.parts import part_refs

__all__: list[str] = []

_FIELD_CHARS = 500
_FIELD_ITEMS = 50
_FIELD_TOTAL = 200
_FIELD_DEPTH = 6


def field(value: Any) -> Any:
    """A bounded JSON-ready copy of one event field or tool call's arguments: strings clipped
    to 500 characters, at most 50 items of each list or dict and 200 in all (nested ones count:
    a 50 x 50 x 50 nesting does not become 125,000 rows), nesting below 6 levels and what is
    past the budget shown as its type and size."""
    return _bounded(value, [_FIELD_TOTAL], 0)


def _bounded(value: Any, budget: list[int], depth: int) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return clipped(value, _FIELD_CHARS)
    if isinstance(value, BaseException):
        return clipped(f"{type(value).__name__}: {value}", _FIELD_CHARS)
    if isinstance(value, ToolCall):
        return {"id": value.id, "name": value.name}
    if isinstance(value, list | tuple | set | frozenset | dict):
        if depth >= _FIELD_DEPTH or budget[0] <= 0:
            return f"<{type(value).__name__} of {len(value)} items>"
        items = value.items() if isinstance(value, dict) else value
        kept = list(itertools.islice(items, min(_FIELD_ITEMS, budget[0])))
        budget[0] -= len(kept)
        if isinstance(value, dict):
            return {str(k): _bounded(v, budget, depth + 1) for k, v in kept}
        return [_bounded(v, budget, depth + 1) for v in kept]
    return clipped(repr(value), _FIELD_CHARS)


def output_text(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data, default=str, ensure_ascii=False)


def response_data(response: ModelResponse, model: Any, max_chars: int) -> dict[str, Any]:
    """The fields a model span keeps of a response: model, finish reason, usage, answer, calls,
    and its reasoning parts if any (:func:`~plait.trace.parts.part_refs`: readable text only)."""
    usage = response.usage
    return {
        "model": response.model or model,
        "finish_reason": response.finish_reason,
        "usage": {
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "cache_read": usage.cache_read_tokens,
            "cache_write": usage.cache_write_tokens,
            "reasoning": usage.reasoning_tokens,
        },
        "content": clipped(response.content, max_chars),
        "tool_calls": [
            {"id": c.id, "name": c.name, "args": field(c.args)} for c in response.tool_calls
        ],
    } | ({"reasoning": part_refs(response.reasoning, max_chars)} if response.reasoning else {})


def next_answer(messages: Sequence[Message]) -> str:
    """The text of the last assistant message of ``messages`` (``""`` if none); a structured
    answer given through the final-answer tool is shown as its JSON (indented)."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.name == FINAL_RESULT_TOOL:
                    return json.dumps(call.args, indent=2, ensure_ascii=False)
            return message.text
    return ""
