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
``SystemMessage``           its text folded into ``system``, in order; ``system`` takes text
                            only, so its images and files go user-side, as blocks of a
                            ``user`` message at the system message's place (merged with the
                            user content around it)
``UserMessage``             text as one text block; with images or files, each part a block
                            in order (:mod:`plait.models.anthropic_content`)
``AssistantMessage``        ``assistant``: its Anthropic reasoning parts first, each payload
                            verbatim and in order (``thinking`` with ``signature``,
                            ``redacted_thinking``), then a text block (if any text), then
                            ``tool_use`` blocks; reasoning parts of another provider dropped
``ToolMessage``             a ``tool_result`` block (``is_error`` when it failed) in a ``user``
                            message; consecutive results share one message, results first;
                            with ``parts``, its ``content`` is the text block then image and
                            document blocks
``ImagePart``/``FilePart``  image and document blocks, checked against the API's limits
                            (5 MiB an image, 100 images, 32 MiB and 100 pages of PDF) before
                            any request: :mod:`plait.models.anthropic_content`
``reasoning``               ``thinking`` (and the interleaved-thinking beta header):
                            :mod:`plait.models.anthropic_thinking`
``extra``                   merged into ``extra_body`` last (wins over plait's own fields)
consecutive same role       merged into one message (empty messages are dropped)
empty or blank text         left out: no text block (the API rejects one of only whitespace),
                            no ``tool_result`` content
``tools``                   ``{name, description, input_schema}``
``tool_choice``             ``auto``/``none``, ``required`` as ``any``, a name as ``tool``;
                            dropped when there are no tools
``max_tokens``              required by the API: the request's, else the model's default
``temperature``             sent through ``extra_body`` (the SDK no longer declares it)
``thinking`` blocks         answers: ``ReasoningPart(provider="anthropic", text, payload=the
                            block)`` on ``ModelResponse.reasoning``, in order; streamed
                            ``thinking_delta`` text as ``ReasoningDelta`` (``index`` counts
                            reasoning blocks), ``signature_delta`` into the payload;
                            ``redacted_thinking`` kept with its ``data`` (no text)
finish reason               ``end_turn``/``stop_sequence`` → ``stop``, ``tool_use`` →
                            ``tool_calls``, ``max_tokens`` and ``model_context_window_exceeded``
                            → ``length``, ``refusal`` → ``content_filter``; others kept as-is
usage                       ``input_tokens`` counts cached tokens too (as OpenAI's does), so
                            context budgeting sees the real prompt size; thinking is billed in
                            ``output_tokens``, and ``output_tokens_details.thinking_tokens``
                            (when the API reports it, also on a stream's ``message_delta``)
                            becomes ``reasoning_tokens``; without it, 0; cache reads
                            and writes as ``cache_read_tokens`` / ``cache_write_tokens``,
                            ``cache_creation.ephemeral_1h_input_tokens`` as
                            ``cache_write_1h_tokens``
``cache_control``           breakpoints placed by :mod:`plait.models.anthropic_cache`
==========================  ================================================================
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

from plait.messages import (
    AssistantMessage,
    Part,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
)
from plait.models.anthropic_content import ContentBudget
from plait.models.anthropic_thinking import INTERLEAVED_BETA, thinking_settings
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolChoice,
)
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
    "PROVIDER",
    "AnthropicStreamAssembler",
    "from_anthropic_message",
    "reasoning_part",
    "to_anthropic_headers",
    "to_anthropic_messages",
    "to_anthropic_request",
    "to_anthropic_tool_choice",
    "to_anthropic_tools",
]

PROVIDER = "anthropic"
"""The ``provider`` of the :class:`~plait.messages.ReasoningPart` this mapping makes and
replays; reasoning parts of any other provider are not sent."""

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def to_anthropic_messages(
    request: ModelRequest, budget: ContentBudget | None = None
) -> tuple[list[TextBlockParam], list[MessageParam]]:
    """``(system blocks, messages)``: system prompt and system messages' text folded into the
    first, consecutive same-role messages merged, tool results placed first in their user
    message. Images and files are checked against the API's limits as they are mapped
    (``budget`` counts them across the request; :mod:`plait.models.anthropic_content`)."""
    budget = budget or ContentBudget()
    system: list[TextBlockParam] = []
    if _sendable(request.system_prompt):
        system.append({"type": "text", "text": request.system_prompt})
    turns: list[tuple[Literal["user", "assistant"], list[_Block]]] = []
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        role: Literal["user", "assistant"] = "user"
        blocks: list[_Block]
        if isinstance(message, SystemMessage):
            if _sendable(text := message.text):
                system.append({"type": "text", "text": text})
            # `system` takes text only: a system message's images and files go user-side.
            blocks = budget.blocks(message.content, where)
        elif isinstance(message, ToolMessage):
            blocks = [_tool_result(message, budget, where)]
        elif isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif any(not isinstance(part, TextPart) for part in message.content):
            blocks = _user_blocks(message.content, budget, where)
        else:
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


def _user_blocks(parts: Sequence[Part], budget: ContentBudget, where: str) -> list[_Block]:
    """A user message's parts in order: text parts as text blocks, images and files as
    theirs; reasoning parts (which belong to assistant messages) are left out."""
    blocks: list[_Block] = []
    for part in parts:
        if isinstance(part, TextPart):
            if _sendable(part.text):
                blocks.append({"type": "text", "text": part.text})
        elif not isinstance(part, ReasoningPart):
            blocks.extend(budget.blocks((part,), where))
    return blocks


def _turn(role: Literal["user", "assistant"], blocks: list[_Block]) -> MessageParam:
    if role == "assistant":
        return {"role": "assistant", "content": blocks}
    if len(blocks) > 1:
        # The API wants a user message's tool results before any text in it (stable sort).
        blocks.sort(key=lambda block: block["type"] != "tool_result")
    return {"role": "user", "content": blocks}


def _tool_result(message: ToolMessage, budget: ContentBudget, where: str) -> ToolResultBlockParam:
    block: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    text = message.text
    if message.parts:
        content: list[Any] = [{"type": "text", "text": text}] if _sendable(text) else []
        content.extend(_user_blocks(message.parts, budget, where))
        if content:
            block["content"] = content
    elif _sendable(text):
        block["content"] = text
    if message.is_error:
        block["is_error"] = True
    return block


def _assistant_blocks(message: AssistantMessage) -> list[_Block]:
    """Anthropic's reasoning blocks first, verbatim and in their order (the API checks their
    signatures and wants them before the text and ``tool_use`` they preceded), then the text,
    then the calls. Reasoning from another provider is dropped (the text stays)."""
    blocks: list[_Block] = []
    for part in message.content:
        if isinstance(part, ReasoningPart) and part.provider == PROVIDER and part.payload:
            blocks.append(cast("_Block", part.payload))
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
    (``temperature``), then ``request.extra`` on top; the SDK merges it into the JSON it sends.
    ``request.model`` overrides ``model`` and ``request.max_tokens`` overrides ``max_tokens``.
    ``request.reasoning`` becomes ``thinking`` (:mod:`plait.models.anthropic_thinking`; the
    headers it needs are :func:`to_anthropic_headers`). Raises ``ConfigurationError`` for
    settings the API refuses and ``ContentError`` for content over its limits.
    """
    thinking, max_tokens, _ = thinking_settings(request, max_tokens)
    system, messages = to_anthropic_messages(request)
    params: MessageCreateParamsBase = {
        "model": request.model or model,
        "max_tokens": max_tokens,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = to_anthropic_tools(request.tools)
        if request.tool_choice is not None:
            params["tool_choice"] = to_anthropic_tool_choice(request.tool_choice)
    if thinking is not None:
        params["thinking"] = cast("Any", thinking)
    extra: dict[str, object] = {}
    if (output := request.output_schema) is not None:
        # In the body as JSON (extra_body), so SDKs that predate output_config send it too.
        extra["output_config"] = {"format": {"type": "json_schema", "schema": _schema(output)}}
    if request.temperature is not None:
        extra["temperature"] = request.temperature
    if request.extra:
        extra.update(request.extra)
    return params, extra


def _schema(output: OutputSchema) -> dict[str, Any]:
    """The schema as structured outputs take it: constraints the API lacks (``minimum``,
    ``maxLength`` …) move into descriptions with the SDK's ``transform_schema`` where the
    installed SDK has it (the answer is still validated against them)."""
    try:
        from anthropic import transform_schema
    except ImportError:  # an SDK before structured outputs
        return dict(output.schema)
    return transform_schema(dict(output.schema))


def to_anthropic_headers(request: ModelRequest) -> dict[str, str]:
    """Extra HTTP headers ``request`` needs (the interleaved-thinking beta), else ``{}``."""
    reasoning = request.reasoning
    if reasoning is None or not reasoning.interleaved or not reasoning.enabled:
        return {}
    return {"anthropic-beta": INTERLEAVED_BETA}


def reasoning_part(block: Any) -> ReasoningPart | None:
    """A ``thinking`` or ``redacted_thinking`` block (an SDK object or a dict) as a
    :class:`ReasoningPart` whose payload is the block as the API sent it; else ``None``."""
    kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
    if kind not in ("thinking", "redacted_thinking"):
        return None
    # Every field the API sent, as it sent it (SDK objects keep unknown fields too).
    payload: dict[str, Any] = dict(block) if isinstance(block, dict) else block.to_dict()
    if kind == "redacted_thinking":
        return ReasoningPart(PROVIDER, "", payload)
    payload.setdefault("thinking", "")
    payload.setdefault("signature", "")
    return ReasoningPart(PROVIDER, payload["thinking"], payload)


def _finish_reason(reason: str | None) -> str:
    return _FINISH_REASONS.get(reason, reason) if reason else "stop"


def _usage(usage: AnthropicUsage | None) -> Usage:
    if usage is None:
        return Usage(requests=1)
    cache_read = usage.cache_read_input_tokens or 0
    cache_write = usage.cache_creation_input_tokens or 0
    creation = getattr(usage, "cache_creation", None)
    write_1h = (getattr(creation, "ephemeral_1h_input_tokens", 0) or 0) if creation else 0
    details = usage.output_tokens_details
    return Usage(
        input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
        output_tokens=usage.output_tokens,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        requests=1,
        reasoning_tokens=details.thinking_tokens if details else 0,
        cache_write_1h_tokens=min(write_1h, cache_write),
    )


def _input_args(value: object) -> tuple[dict[str, Any], str | None]:
    if isinstance(value, dict):
        return value, None
    return {}, json.dumps(value)


def from_anthropic_message(message: Message) -> ModelResponse:
    """A ``Message`` as a :class:`ModelResponse`: text blocks joined, ``tool_use`` blocks as
    calls, ``thinking``/``redacted_thinking`` blocks as reasoning parts (in order, verbatim);
    other block kinds (server tools) are left out."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            args, raw = _input_args(block.input)
            calls.append(ToolCall(block.id, block.name, args, raw))
        elif (part := reasoning_part(block)) is not None:
            reasoning.append(part)
    return ModelResponse(
        reasoning=reasoning,
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

    __slots__ = (
        "_finish",
        "_id",
        "_model",
        "_reasoning",
        "_stopped",
        "_text",
        "_tool_keys",
        "_tools",
        "_usage",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        # block index -> [ordinal, the block as it builds up]; ordinals are ReasoningDelta.index
        self._reasoning: dict[int, tuple[int, dict[str, Any]]] = {}
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
            if block.type in ("thinking", "redacted_thinking"):
                return self._start_reasoning(event.index, block)
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
            if delta.type == "thinking_delta" and event.index in self._reasoning:
                ordinal, payload = self._reasoning[event.index]
                payload["thinking"] += delta.thinking
                return [ReasoningDelta(delta.thinking, ordinal)] if delta.thinking else []
            if delta.type == "signature_delta" and event.index in self._reasoning:
                self._reasoning[event.index][1]["signature"] += delta.signature
        elif event.type == "message_stop":
            self._stopped = True
        elif event.type == "message_delta":
            self._finish = event.delta.stop_reason or self._finish
            self._merge_usage(event.usage)
        return []

    def _start_reasoning(self, index: int, block: Any) -> list[StreamEvent]:
        part = reasoning_part(block)
        if part is None:  # pragma: no cover - the caller checked the type
            return []
        ordinal = len(self._reasoning)
        self._reasoning[index] = (ordinal, part.payload)
        return [ReasoningDelta(part.text, ordinal)] if part.text else []

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
        reasoning = [
            ReasoningPart(PROVIDER, payload.get("thinking", ""), payload)
            for _, payload in self._reasoning.values()
        ]
        return ModelResponse(
            reasoning=reasoning,
            content="".join(self._text),
            tool_calls=self._tools.calls(),
            finish_reason=_finish_reason(self._finish),
            usage=_usage(self._usage),
            model=self._model,
            metadata={"response_id": self._id} if self._id else {},
        )
