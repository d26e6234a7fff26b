"""The OpenAI Responses API wire mapping: pure functions from plait's data to the request body
and from the API's answers (whole or streamed) back to plait's, used by
:class:`~plait.models.openai_responses.OpenAIResponsesModel`: :func:`to_responses_request`,
:func:`from_responses_response` and :class:`ResponsesStreamAssembler`. It imports the SDK only
for type checking.

==========================  ================================================================
plait                       Responses API
==========================  ================================================================
``system_prompt``           ``instructions``
``UserMessage``,            a ``message`` item of that role: ``input_text``, ``input_image``
``SystemMessage``           (a data URL from the blob's cached base64, or the URL; ``detail``)
                            and ``input_file`` (``file_data`` data URL + ``filename``, or
                            ``file_url``) content
``AssistantMessage``        in content order: each ``ReasoningPart`` of provider
                            ``"openai-responses"`` as its ``payload`` verbatim (a reasoning
                            item: ``id``, ``encrypted_content``, ``summary``), text as an
                            assistant ``message`` of ``output_text``; then one
                            ``function_call`` item per tool call (``call_id``, arguments as
                            compact JSON). Reasoning from another provider is dropped, and so
                            is, with ``store`` false, an item without ``encrypted_content``,
                            and reasoning followed by no text or call (the API requires each
                            item's following item)
``ToolMessage``             ``function_call_output``: the text, or with attachments a list of
                            ``input_text``, ``input_image`` and ``input_file``
``tools``                   ``function`` tools (``strict: false``; an empty schema becomes an
                            empty object schema)
``tool_choice``             ``auto``/``none``/``required`` or ``{"type": "function", "name"}``;
                            dropped when there are no tools
``max_tokens``              ``max_output_tokens``
``reasoning``               ``reasoning: {"effort", "summary"}``; ``enabled=False`` is effort
                            ``"none"``; ``budget_tokens`` (Anthropic's) is a ConfigurationError
``extra``                   sent as ``extra_body`` by the model, after everything above
output ``reasoning``        a :class:`~plait.parts.ReasoningPart` (text: the summary texts
                            joined by blank lines; payload: the item as received)
output ``message``          the text (``output_text``; a ``refusal`` is the text)
output ``function_call``    a :class:`~plait.messages.ToolCall` (``call_id``; arguments that
                            are not a JSON object kept as ``raw_args``)
status                      ``completed``: ``tool_calls`` when there are calls, else ``stop``;
                            ``incomplete``: ``length`` (``max_output_tokens``),
                            ``content_filter``, or the reason given; ``failed``: an error
usage                       ``input_tokens`` (cached included); ``input_tokens_details``
                            ``cached_tokens`` / ``cache_write_tokens``;
                            ``output_tokens_details.reasoning_tokens`` (part of
                            ``output_tokens``)
==========================  ================================================================

Reasoning items come before the text and the calls of the same turn in the replay, which keeps
each one before the ``function_call`` it preceded (the API requires a reasoning item to be sent
back with the call it led to when ``store`` is false).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
)
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolChoice,
)
from plait.models.openai_content import data_url
from plait.models.tool_call_assembly import (
    ToolCallBuffer,
    dump_tool_arguments,
    parse_tool_arguments,
)

if TYPE_CHECKING:
    from openai.types.responses import Response

__all__ = [
    "PROVIDER",
    "ResponseFailed",
    "ResponsesStreamAssembler",
    "from_responses_response",
    "to_responses_input",
    "to_responses_reasoning",
    "to_responses_request",
    "to_responses_tools",
]

PROVIDER = "openai-responses"
"""The ``ReasoningPart.provider`` of reasoning items from (and replayed to) the Responses API."""

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
_RETRYABLE_CODES = frozenset({"server_error", "rate_limit_exceeded", "server_is_overloaded"})


class ResponseFailed(Exception):
    """The API said a response failed: a ``failed`` status, a ``response.failed`` or an
    ``error`` stream event. The model turns it into a :class:`~plait.errors.ProviderError`."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def retryable(self) -> bool:
        return self.code in _RETRYABLE_CODES


# --- request ---------------------------------------------------------------------------------


def _content(parts: Sequence[Part]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "input_text", "text": part.text})
        elif isinstance(part, ImagePart):
            out.append(_image(part))
        elif isinstance(part, FilePart):
            out.append(_file(part))
    return out


def _image(part: ImagePart) -> dict[str, Any]:
    blob = part.blob
    url = data_url(blob, part.media_type or "image/png") if blob is not None else part.url
    item: dict[str, Any] = {"type": "input_image", "image_url": url}
    item["detail"] = part.detail or "auto"
    return item


def _file(part: FilePart) -> dict[str, Any]:
    blob = part.blob
    item: dict[str, Any] = {"type": "input_file"}
    if blob is None:
        item["file_url"] = part.url
    else:
        item["file_data"] = data_url(blob, part.media_type)
        item["filename"] = part.filename or "document.pdf"
    return item


def _replayable(part: ReasoningPart, store: bool) -> bool:
    """A reasoning item of this API; without ``store`` only one that carries its encrypted
    content (the API has nothing else to resolve it by)."""
    return (
        part.provider == PROVIDER
        and bool(part.payload)
        and (store or bool(part.payload.get("encrypted_content")))
    )


def _assistant_items(message: AssistantMessage, store: bool) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            content = [{"type": "output_text", "text": "".join(text), "annotations": []}]
            items.append({"type": "message", "role": "assistant", "content": content})
            text.clear()

    for part in message.content:
        if isinstance(part, TextPart):
            if part.text:
                text.append(part.text)
        elif isinstance(part, ReasoningPart) and _replayable(part, store):
            flush()
            items.append(part.payload)
    flush()
    if not message.tool_calls:
        # A reasoning item must be followed by the item it led to (the API refuses one
        # "provided without its required following item"): reasoning that ended the turn
        # without text or a call (an answer cut at max_output_tokens) is not replayed.
        while items and items[-1].get("type") == "reasoning":
            items.pop()
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": dump_tool_arguments(call),
            }
        )
    return items


def _tool_output(message: ToolMessage) -> dict[str, Any]:
    output: str | list[dict[str, Any]] = message.text
    if message.parts:
        output = _content([TextPart(message.text), *message.parts])
    return {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}


def to_responses_input(messages: Sequence[Message], *, store: bool = False) -> list[dict[str, Any]]:
    """The conversation as Responses input items (the module table). Without ``store``, a
    reasoning item that has no ``encrypted_content`` is left out: the API could not resolve it
    (it persisted nothing) and would refuse the request."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message, store))
        elif isinstance(message, ToolMessage):
            items.append(_tool_output(message))
        else:
            items.append(
                {"type": "message", "role": message.role, "content": _content(message.content)}
            )
    return items


def to_responses_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as ``function`` tools (not strict: plait validates the arguments)."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "parameters": dict(tool.parameters) or {"type": "object", "properties": {}},
            "strict": False,
        }
        if tool.description:
            function["description"] = tool.description
        out.append(function)
    return out


def _tool_choice(choice: ToolChoice) -> str | dict[str, str]:
    match choice:
        case "auto" | "none" | "required":
            return choice
    return {"type": "function", "name": choice}


def to_responses_reasoning(reasoning: Reasoning) -> dict[str, str]:
    """``reasoning`` as the body's ``reasoning`` object (the module table)."""
    if reasoning.budget_tokens is not None:
        raise ConfigurationError(
            "Reasoning(budget_tokens=...) is Anthropic's thinking budget; OpenAI's Responses "
            "API takes effort='minimal'|'low'|'medium'|'high' instead."
        )
    out: dict[str, str] = {}
    if not reasoning.enabled:
        out["effort"] = "none"
    elif reasoning.effort is not None:
        out["effort"] = reasoning.effort
    if reasoning.summary is not None:
        out["summary"] = reasoning.summary
    return out


def to_responses_request(
    request: ModelRequest,
    *,
    model: str,
    store: bool = False,
    include: Sequence[str] = ("reasoning.encrypted_content",),
) -> dict[str, Any]:
    """The whole request body, without ``stream`` and ``extra``. ``request.model`` overrides
    ``model``."""
    body: dict[str, Any] = {
        "model": request.model or model,
        "input": to_responses_input(request.messages, store=store),
        "store": store,
    }
    if include:
        body["include"] = list(include)
    if request.system_prompt:
        body["instructions"] = request.system_prompt
    if request.tools:
        body["tools"] = to_responses_tools(request.tools)
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_tokens is not None:
        body["max_output_tokens"] = request.max_tokens
    if request.reasoning is not None and (reasoning := to_responses_reasoning(request.reasoning)):
        body["reasoning"] = reasoning
    if (output := request.output_schema) is not None:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": output.name,
                "schema": dict(output.schema),
                "strict": output.strict,
            }
        }
    return body


# --- response --------------------------------------------------------------------------------


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage(requests=1)
    details = getattr(usage, "input_tokens_details", None)
    output = getattr(usage, "output_tokens_details", None)
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=(getattr(details, "cached_tokens", 0) or 0) if details else 0,
        cache_write_tokens=(getattr(details, "cache_write_tokens", 0) or 0) if details else 0,
        requests=1,
        reasoning_tokens=(getattr(output, "reasoning_tokens", 0) or 0) if output else 0,
    )


def _reasoning_part(item: Any) -> ReasoningPart:
    payload: dict[str, Any] = item.to_dict() if hasattr(item, "to_dict") else dict(item)
    summary = [s.text for s in item.summary or () if getattr(s, "text", None)]
    return ReasoningPart(PROVIDER, "\n\n".join(summary), payload)


def _message_text(item: Any) -> str:
    pieces = []
    for content in item.content or ():
        if content.type == "output_text":
            pieces.append(content.text)
        elif content.type == "refusal":
            pieces.append(content.refusal)
    return "".join(pieces)


def _failure(response: Any) -> ResponseFailed:
    error = getattr(response, "error", None)
    if error is not None:
        return ResponseFailed(f"{error.message} (code {error.code})", error.code)
    return ResponseFailed("the response failed and the API gave no reason")


def _finish(response: Any, has_calls: bool) -> str:
    status = response.status
    if status == "incomplete":
        details = response.incomplete_details
        reason = getattr(details, "reason", None) or "length"
        return _INCOMPLETE.get(reason, reason)
    return "tool_calls" if has_calls else "stop"


def from_responses_response(response: Response, items: Sequence[Any] = ()) -> ModelResponse:
    """A ``Response`` as a :class:`ModelResponse`; ``items`` stands in for ``response.output``
    when that is empty (the items a stream delivered one by one).

    Raises :class:`ResponseFailed` for a ``failed`` status.
    """
    if response.status == "failed":
        raise _failure(response)
    text: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    output: Sequence[Any] = response.output or items
    for item in output:
        if item.type == "reasoning":
            reasoning.append(_reasoning_part(item))
        elif item.type == "message":
            text.append(_message_text(item))
        elif item.type == "function_call":
            args, raw = parse_tool_arguments(item.arguments)
            calls.append(ToolCall(item.call_id, item.name, args, raw))
    return ModelResponse(
        content="".join(text),
        tool_calls=calls,
        finish_reason=_finish(response, bool(calls)),
        usage=_usage(response.usage),
        model=response.model,
        metadata={"response_id": response.id},
        reasoning=reasoning,
    )


class ResponsesStreamAssembler:
    """Turns Responses stream events into plait stream events and, at the end, the response.

    ``response.output_text.delta`` (and ``response.refusal.delta``) become :class:`TextDelta`,
    ``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta``)
    :class:`ReasoningDelta` (``index``: the reasoning item's place among this response's
    reasoning items), a ``function_call`` item's ``response.output_item.added`` and its
    ``response.function_call_arguments.delta`` :class:`~plait.models.base.ToolCallDelta`. The
    response is built from ``response.completed`` (or ``response.incomplete``); items come from
    its ``output``, else from the ``response.output_item.done`` events (the complete items:
    ``encrypted_content`` in ``output_item.added`` may be partial). ``response.failed`` and
    ``error`` raise :class:`ResponseFailed`. Other events (``response.created``, content-part
    and ``.done`` events) add nothing.
    """

    __slots__ = ("_final", "_items", "_reasoning_index", "_tools")

    def __init__(self) -> None:
        self._tools = ToolCallBuffer()
        self._reasoning_index: dict[int, int] = {}
        self._items: list[Any] = []
        self._final: Any = None

    def feed(self, event: Any) -> list[StreamEvent]:
        kind = event.type
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            return [TextDelta(event.delta)] if event.delta else []
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            index = self._reasoning_index.setdefault(event.output_index, len(self._reasoning_index))
            return [ReasoningDelta(event.delta, index)] if event.delta else []
        if kind == "response.function_call_arguments.delta":
            return [self._tools.add(event.output_index, fragment=event.delta)]
        if kind == "response.output_item.added":
            item = event.item
            if item.type == "reasoning":
                self._reasoning_index.setdefault(event.output_index, len(self._reasoning_index))
            elif item.type == "function_call":
                added = self._tools.add(
                    event.output_index,
                    id=item.call_id,
                    name=item.name,
                    fragment=item.arguments or "",
                )
                return [added]
            return []
        if kind == "response.output_item.done":
            self._items.append(event.item)
        elif kind in ("response.completed", "response.incomplete"):
            self._final = event.response
        elif kind == "response.failed":
            raise _failure(event.response)
        elif kind == "error":
            raise ResponseFailed(f"{event.message} (code {event.code})", event.code)
        return []

    @property
    def finished(self) -> bool:
        """Whether the stream reached ``response.completed`` (or ``response.incomplete``)."""
        return self._final is not None

    def response(self) -> ModelResponse:
        if self._final is None:  # cut short: the model raises; this is what arrived
            return ModelResponse(tool_calls=self._tools.calls(), finish_reason="error")
        return from_responses_response(self._final, self._items)
