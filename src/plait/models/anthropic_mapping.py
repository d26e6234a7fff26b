"""The Anthropic Messages wire mapping: pure functions from plait's data to the request body and
from the API's answers (whole or streamed) back to plait's, shared by
:class:`~plait.models.anthropic.AnthropicModel` and ``bench/providers.py``:
:func:`to_anthropic_request`, :func:`from_anthropic_message` and
:class:`AnthropicStreamAssembler` (raw stream events to plait stream events). It imports the SDK
only for type checking.

==========================  ================================================================
plait                       Messages API
==========================  ================================================================
``system_prompt``           the first block of the top-level ``system``
``SystemMessage``           folded into ``system``, in order (they leave the message list)
``AssistantMessage``        ``assistant``: a text block (if any text), then ``tool_use`` blocks
``ToolMessage``             a ``tool_result`` block (``is_error`` when it failed) in a ``user``
                            message; consecutive results share one message, results first
consecutive same role       merged into one message (empty messages are dropped)
empty or blank text         left out: no text block (the API rejects one of only whitespace),
                            no ``tool_result`` content
``tools``                   ``{name, description, input_schema}``
``tool_choice``             ``auto``/``none``, ``required`` as ``any``, a name as ``tool``;
                            dropped when there are no tools
``max_tokens``              required by the API: the request's, else the model's default
``temperature``             sent through ``extra_body`` (the SDK no longer declares it)
finish reason               ``end_turn``/``stop_sequence`` → ``stop``, ``tool_use`` →
                            ``tool_calls``, ``max_tokens`` and ``model_context_window_exceeded``
                            → ``length``, ``refusal`` → ``content_filter``; others kept as-is
usage                       ``input_tokens`` counts cached tokens too (as OpenAI's does), so
                            context budgeting sees the real prompt size; thinking is billed in
                            ``output_tokens``, and ``output_tokens_details.thinking_tokens``
                            (when the API reports it, also on a stream's ``message_delta``)
                            becomes ``reasoning_tokens``; without it, 0
==========================  ================================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from plait.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
)
from plait.models.base import ModelRequest, ModelResponse, StreamEvent, TextDelta, ToolChoice
from plait.models.tool_call_assembly import ToolCallBuffer

if TYPE_CHECKING:
    from anthropic.types import (
        Message,
        MessageDeltaUsage,
        MessageParam,
        RawMessageStreamEvent,
        TextBlockParam,
        ToolChoiceParam,
        ToolParam,
        ToolResultBlockParam,
        ToolUseBlockParam,
    )
    from anthropic.types import Usage as AnthropicUsage
    from anthropic.types.message_create_params import MessageCreateParamsBase

    _Block: TypeAlias = TextBlockParam | ToolUseBlockParam | ToolResultBlockParam

__all__ = [
    "AnthropicStreamAssembler",
    "from_anthropic_message",
    "to_anthropic_messages",
    "to_anthropic_request",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def to_anthropic_messages(
    request: ModelRequest,
) -> tuple[list[TextBlockParam], list[MessageParam]]:
    """``(system blocks, messages)``: system prompt and system messages folded into the first,
    consecutive same-role messages merged, tool results placed first in their user message."""
    system: list[TextBlockParam] = []
    if _sendable(request.system_prompt):
        system.append({"type": "text", "text": request.system_prompt})
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    for message in request.messages:
        if isinstance(message, SystemMessage):
            if _sendable(text := message.text):
                system.append({"type": "text", "text": text})
            continue
        role: Literal["user", "assistant"]
        blocks: list[_Block]
        if isinstance(message, ToolMessage):
            role, blocks = "user", [_tool_result(message)]
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        else:
            role = "user"
            text = message.text
            blocks = [{"type": "text", "text": text}] if _sendable(text) else []
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return system, [_turn(role, blocks) for role, blocks in turns]


def _sendable(text: str) -> bool:
    """Whether ``text`` may be sent as a text block: the API rejects one that is empty or only
    whitespace (and a thread that stored one would fail on every later request)."""
    return bool(text) and not text.isspace()


def _turn(role: Literal["user", "assistant"], blocks: list[_Block]) -> MessageParam:
    if role == "assistant":
        return {"role": "assistant", "content": blocks}
    if len(blocks) > 1:
        # The API wants a user message's tool results before any text in it (stable sort).
        blocks.sort(key=lambda block: block["type"] != "tool_result")
    return {"role": "user", "content": blocks}


def _tool_result(message: ToolMessage) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if _sendable(text := message.text):
        block["content"] = text
    if message.is_error:
        block["is_error"] = True
    return block


def _assistant_blocks(message: AssistantMessage) -> list[_Block]:
    blocks: list[_Block] = []
    if _sendable(text := message.text):
        blocks.append({"type": "text", "text": text})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.args})
    return blocks


def to_anthropic_tools(tools: Sequence[ToolDefinition]) -> list[ToolParam]:
    """Tool definitions as custom tools (an empty schema becomes an empty object schema)."""
    out: list[ToolParam] = []
    for tool in tools:
        param: ToolParam = {
            "name": tool.name,
            "input_schema": dict(tool.parameters) or {"type": "object", "properties": {}},
        }
        if tool.description:
            param["description"] = tool.description
        out.append(param)
    return out


def to_anthropic_tool_choice(choice: ToolChoice) -> ToolChoiceParam:
    """``auto``/``none`` as they are, ``required`` as ``any``, any other string forces that tool."""
    match choice:
        case "auto":
            return {"type": "auto"}
        case "none":
            return {"type": "none"}
        case "required":
            return {"type": "any"}
    return {"type": "tool", "name": choice}


def to_anthropic_request(
    request: ModelRequest, *, model: str, max_tokens: int = 4096
) -> tuple[MessageCreateParamsBase, dict[str, object]]:
    """The request body, without ``stream``, as ``(params, extra_body)``.

    ``extra_body`` holds fields the SDK no longer declares but the caller asked for
    (``temperature``); the SDK merges it into the JSON it sends. ``request.model`` overrides
    ``model`` and ``request.max_tokens`` overrides ``max_tokens``.
    """
    system, messages = to_anthropic_messages(request)
    params: MessageCreateParamsBase = {
        "model": request.model or model,
        "max_tokens": request.max_tokens or max_tokens,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = to_anthropic_tools(request.tools)
        if request.tool_choice is not None:
            params["tool_choice"] = to_anthropic_tool_choice(request.tool_choice)
    extra: dict[str, object] = {}
    if request.temperature is not None:
        extra["temperature"] = request.temperature
    return params, extra


def _finish_reason(reason: str | None) -> str:
    return _FINISH_REASONS.get(reason, reason) if reason else "stop"


def _usage(usage: AnthropicUsage | None) -> Usage:
    if usage is None:
        return Usage(requests=1)
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    details = usage.output_tokens_details
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        requests=1,
        reasoning_tokens=details.thinking_tokens if details else 0,
    )


def _input_args(value: object) -> tuple[dict[str, Any], str | None]:
    if isinstance(value, dict):
        return value, None
    return {}, json.dumps(value)


def from_anthropic_message(message: Message) -> ModelResponse:
    """A ``Message`` as a :class:`ModelResponse`: text blocks joined, ``tool_use`` blocks as
    calls; other block kinds (thinking, server tools) are left out."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args, raw = _input_args(block.input)
            calls.append(ToolCall(block.id, block.name, args, raw))
    return ModelResponse(
        content="".join(texts),
        tool_calls=calls,
        finish_reason=_finish_reason(message.stop_reason),
        usage=_usage(message.usage),
        model=message.model,
        metadata={"response_id": message.id},
    )


class AnthropicStreamAssembler:
    """Turns raw Messages stream events into plait stream events and, at the end, the whole
    response. ``ToolCallDelta.index`` counts tool calls only (0, 1, ...), not content blocks."""

    __slots__ = ("_finish", "_id", "_model", "_stopped", "_text", "_tool_keys", "_tools", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._tools = ToolCallBuffer()
        self._tool_keys: set[int] = set()
        self._finish: str | None = None
        self._stopped = False
        self._usage: AnthropicUsage | None = None
        self._model: str | None = None
        self._id: str | None = None

    def feed(self, event: RawMessageStreamEvent) -> list[StreamEvent]:
        if event.type == "message_start":
            self._usage = event.message.usage.model_copy()
            self._model = event.message.model
            self._id = event.message.id
        elif event.type == "content_block_start":
            block = event.content_block
            if block.type == "text" and block.text:
                self._text.append(block.text)
                return [TextDelta(block.text)]
            if block.type == "tool_use":
                self._tool_keys.add(event.index)
                # Anthropic starts with `input: {}` and streams the JSON; a proxy that sends
                # the whole input up front must not lose it.
                seed = json.dumps(block.input) if block.input else ""
                return [self._tools.add(event.index, id=block.id, name=block.name, fragment=seed)]
        elif event.type == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self._text.append(delta.text)
                return [TextDelta(delta.text)]
            if delta.type == "input_json_delta" and event.index in self._tool_keys:
                return [self._tools.add(event.index, fragment=delta.partial_json)]
        elif event.type == "message_stop":
            self._stopped = True
        elif event.type == "message_delta":
            self._finish = event.delta.stop_reason or self._finish
            self._merge_usage(event.usage)
        return []

    def _merge_usage(self, delta: MessageDeltaUsage) -> None:
        # message_delta usage is cumulative; fields it leaves out keep message_start's values.
        if self._usage is None:
            return
        self._usage.output_tokens = delta.output_tokens
        if delta.input_tokens is not None:
            self._usage.input_tokens = delta.input_tokens
        if delta.cache_read_input_tokens is not None:
            self._usage.cache_read_input_tokens = delta.cache_read_input_tokens
        if delta.cache_creation_input_tokens is not None:
            self._usage.cache_creation_input_tokens = delta.cache_creation_input_tokens
        if delta.output_tokens_details is not None:
            self._usage.output_tokens_details = delta.output_tokens_details

    @property
    def finished(self) -> bool:
        """Whether the stream reached its end: a ``stop_reason`` or the ``message_stop`` event
        (a stream without either was cut short)."""
        return self._finish is not None or self._stopped

    def response(self) -> ModelResponse:
        return ModelResponse(
            content="".join(self._text),
            tool_calls=self._tools.calls(),
            finish_reason=_finish_reason(self._finish),
            usage=_usage(self._usage),
            model=self._model,
            metadata={"response_id": self._id} if self._id else {},
        )
