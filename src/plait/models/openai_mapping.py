"""The OpenAI Chat Completions wire mapping: pure functions from plait's data to the request
body and from the API's answers (whole or streamed) back to plait's, shared by
:class:`~plait.models.openai.OpenAIChatModel` and ``bench/providers.py``:
:func:`to_openai_request`, :func:`from_openai_completion` and :class:`OpenAIStreamAssembler`
(``ChatCompletionChunk`` s to stream events). It imports the SDK only for type checking.

==========================  ================================================================
plait                       Chat Completions
==========================  ================================================================
``system_prompt``           the first ``system`` message
``SystemMessage``           a ``system`` message where it stands (its text; its images and
                            files follow in a ``user`` message)
``AssistantMessage``        ``assistant`` with ``tool_calls``; arguments as compact JSON
``UserMessage``             ``user``: the text, or with images and files a list of ``text``,
                            ``image_url`` (a data URL from the blob's cached base64, or the
                            URL; ``detail``) and ``file`` (``file_data`` data URL, ``filename``)
                            parts; a file URL is a ContentError (Chat Completions takes bytes)
``ToolMessage``             ``tool``; data that is not a string as compact JSON; OpenAI has no
                            error flag, so an error result is told apart only by its text. A
                            tool message takes only text: the images and files of a run of tool
                            results follow it in one ``user`` message naming each result
``ReasoningPart``           dropped (Chat Completions has no reasoning items)
``reasoning.effort``        ``reasoning_effort``, only when set (other ``Reasoning`` fields have
                            no Chat Completions form)
``tools``                   ``function`` tools (an empty schema becomes an empty object schema)
``tool_choice``             ``auto``/``none``/``required`` or a named function; dropped when
                            there are no tools (the API rejects it then)
``max_tokens``              ``max_completion_tokens`` for OpenAI itself, ``max_tokens`` for
                            other labels (what OpenAI-compatible servers understand)
finish reason               ``function_call`` becomes ``tool_calls``; ``stop`` with tool calls
                            (sent by some compatible servers) becomes ``tool_calls``
usage                       ``prompt_tokens`` (cached included), cached and cache-write tokens;
                            ``completion_tokens_details.reasoning_tokens`` (part of
                            ``completion_tokens``) as ``reasoning_tokens``, also from the
                            final usage chunk of a stream
==========================  ================================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic_core import to_json

from plait.errors import ContentError, ProviderError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    Part,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
)
from plait.models.base import ModelRequest, ModelResponse, StreamEvent, TextDelta, ToolChoice
from plait.models.openai_content import data_url
from plait.models.tool_call_assembly import (
    ToolCallBuffer,
    dump_tool_arguments,
    parse_tool_arguments,
)

if TYPE_CHECKING:
    from openai.types import CompletionUsage
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionChunk,
        ChatCompletionContentPartParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
        ChatCompletionToolChoiceOptionParam,
    )
    from openai.types.chat.chat_completion_content_part_image_param import ImageURL
    from openai.types.chat.chat_completion_content_part_param import FileFile
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase
    from openai.types.shared_params import FunctionDefinition

__all__ = [
    "MaxTokensKey",
    "OpenAIStreamAssembler",
    "from_openai_completion",
    "to_openai_messages",
    "to_openai_request",
    "to_openai_tool_choice",
    "to_openai_tools",
]

MaxTokensKey = Literal["max_completion_tokens", "max_tokens"]

_FINISH_REASONS = {"function_call": "tool_calls"}


def _empty_schema() -> dict[str, object]:
    return {"type": "object", "properties": {}}


def to_openai_messages(request: ModelRequest) -> list[ChatCompletionMessageParam]:
    """The conversation as Chat Completions messages, the system prompt first.

    Images and files ride in user messages (``image_url`` and ``file`` content parts). A tool
    or system message takes only text, so the images and files of a run of tool results (or of
    a system message) follow it in one user message that names where they came from."""
    out: list[ChatCompletionMessageParam] = []
    if request.system_prompt:
        out.append({"role": "system", "content": request.system_prompt})
    attachments: list[ChatCompletionContentPartParam] = []
    for message in request.messages:
        if attachments and not isinstance(message, ToolMessage):
            out.append({"role": "user", "content": attachments})
            attachments = []
        out.append(_to_openai_message(message))
        if isinstance(message, ToolMessage) and message.parts:
            attachments.append(
                {
                    "type": "text",
                    "text": f"Attachments of tool result {message.tool_call_id} ({message.name}):",
                }
            )
            attachments.extend(_content_parts(message.parts))
        elif isinstance(message, SystemMessage) and _has_attachments(message.content):
            attachments.append({"type": "text", "text": "Attachments of the system message:"})
            attachments.extend(_content_parts(message.content, text=False))
    if attachments:
        out.append({"role": "user", "content": attachments})
    return out


def _has_attachments(parts: Sequence[Part]) -> bool:
    return any(isinstance(p, ImagePart | FilePart) for p in parts)


def _content_parts(
    parts: Sequence[Part], *, text: bool = True
) -> list[ChatCompletionContentPartParam]:
    out: list[ChatCompletionContentPartParam] = []
    for part in parts:
        if isinstance(part, TextPart):
            if text:
                out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            blob = part.blob
            url = data_url(blob, part.media_type or "image/png") if blob else part.url or ""
            image: ImageURL = {"url": url}
            if part.detail:
                image["detail"] = part.detail
            out.append({"type": "image_url", "image_url": image})
        elif isinstance(part, FilePart):
            blob = part.blob
            if blob is None:
                raise ContentError(
                    "Chat Completions takes files as bytes, not URLs: download "
                    f"{part.url} into a FilePart, or use the Responses API (openai-responses:)"
                )
            file: FileFile = {
                "file_data": data_url(blob, part.media_type),
                "filename": part.filename or "document.pdf",
            }
            out.append({"type": "file", "file": file})
    return out


def _to_openai_message(message: Message) -> ChatCompletionMessageParam:
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if isinstance(message, AssistantMessage):  # reasoning parts dropped: chat has none
        if not message.tool_calls:
            return {"role": "assistant", "content": message.text}
        return {
            "role": "assistant",
            "content": message.text or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": dump_tool_arguments(call)},
                }
                for call in message.tool_calls
            ],
        }
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.text}
    if _has_attachments(message.content):
        return {"role": "user", "content": _content_parts(message.content)}
    return {"role": "user", "content": message.text}


def to_openai_tools(tools: Sequence[ToolDefinition]) -> list[ChatCompletionFunctionToolParam]:
    """Tool definitions as ``function`` tools."""
    out: list[ChatCompletionFunctionToolParam] = []
    for tool in tools:
        function: FunctionDefinition = {
            "name": tool.name,
            "parameters": dict(tool.parameters) or _empty_schema(),
        }
        if tool.description:
            function["description"] = tool.description
        out.append({"type": "function", "function": function})
    return out


def to_openai_tool_choice(choice: ToolChoice) -> ChatCompletionToolChoiceOptionParam:
    """``auto``/``none``/``required`` as they are; any other string names the tool to force."""
    match choice:
        case "auto" | "none" | "required":
            return choice
    return {"type": "function", "function": {"name": choice}}


def to_openai_request(
    request: ModelRequest,
    *,
    model: str,
    max_tokens_key: MaxTokensKey = "max_completion_tokens",
) -> CompletionCreateParamsBase:
    """The whole request body, without ``stream``. ``request.model`` overrides ``model``."""
    params: CompletionCreateParamsBase = {
        "model": request.model or model,
        "messages": to_openai_messages(request),
    }
    if request.tools:
        params["tools"] = to_openai_tools(request.tools)
        if request.tool_choice is not None:
            params["tool_choice"] = to_openai_tool_choice(request.tool_choice)
    if request.temperature is not None:
        params["temperature"] = request.temperature
    if request.max_tokens is not None:
        if max_tokens_key == "max_completion_tokens":
            params["max_completion_tokens"] = request.max_tokens
        else:
            params["max_tokens"] = request.max_tokens
    reasoning = request.reasoning
    if reasoning is not None and reasoning.effort is not None and reasoning.enabled:
        params["reasoning_effort"] = reasoning.effort  # o-series and gpt-5 models take it
    if (output := request.output_schema) is not None:
        params["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": output.name,
                "schema": dict(output.schema),
                "strict": output.strict,
            },
        }
    return params


def _finish_reason(reason: str | None, has_tool_calls: bool) -> str:
    normalised = _FINISH_REASONS.get(reason, reason) if reason else "stop"
    if has_tool_calls and normalised == "stop":
        return "tool_calls"
    return normalised


def _usage(usage: CompletionUsage | None) -> Usage:
    if usage is None:
        return Usage(requests=1)
    details = usage.prompt_tokens_details
    output = usage.completion_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=(details.cached_tokens or 0) if details else 0,
        cache_write_tokens=(details.cache_write_tokens or 0) if details else 0,
        requests=1,
        reasoning_tokens=(output.reasoning_tokens or 0) if output else 0,
    )


def from_openai_completion(completion: ChatCompletion) -> ModelResponse:
    """A ``ChatCompletion`` as a :class:`ModelResponse` (first choice; a refusal is the text).

    Raises :class:`ProviderError` when the completion has no choices.
    """
    if not completion.choices:
        raise ProviderError(
            f"The server returned a completion with no choices for model {completion.model!r}.",
            provider="openai",
        )
    choice = completion.choices[0]
    message = choice.message
    calls = []
    for call in message.tool_calls or ():
        if call.type == "function":
            args, raw = parse_tool_arguments(call.function.arguments)
            calls.append(ToolCall(call.id, call.function.name, args, raw))
    return ModelResponse(
        content=message.content or message.refusal or "",
        tool_calls=calls,
        finish_reason=_finish_reason(choice.finish_reason, bool(calls)),
        usage=_usage(completion.usage),
        model=completion.model,
        metadata={"response_id": completion.id},
    )


def _fragment(arguments: object) -> str:
    """A streamed ``arguments`` piece as text: some compatible servers send the whole
    arguments as a JSON object (or ``null``) rather than a string."""
    if isinstance(arguments, str):
        return arguments
    return "" if arguments is None else to_json(arguments, fallback=repr).decode()


class OpenAIStreamAssembler:
    """Turns ``ChatCompletionChunk`` s into stream events and, at the end, the whole response.

    Feed every chunk to :meth:`feed` (which returns the events to emit), then call
    :meth:`response`. Only the first choice is followed. Chunks without choices (usage, Azure's
    prompt filter results) or whose choice has no ``delta`` (Azure's content-filter annotations,
    with an empty id and model) add nothing but what they carry.
    """

    __slots__ = ("_finish", "_id", "_model", "_text", "_tools", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._tools = ToolCallBuffer()
        self._finish: str | None = None
        self._usage: CompletionUsage | None = None
        self._model: str | None = None
        self._id: str | None = None

    def feed(self, chunk: ChatCompletionChunk) -> list[StreamEvent]:
        self._model = chunk.model or self._model
        self._id = chunk.id or self._id
        if chunk.usage is not None:
            self._usage = chunk.usage
        events: list[StreamEvent] = []
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            if choice.finish_reason is not None:
                self._finish = choice.finish_reason
            delta = choice.delta
            if delta is None:  # an annotation chunk (Azure's content filter): nothing to add
                continue
            text = delta.content or delta.refusal
            if text:
                self._text.append(text)
                events.append(TextDelta(text))
            for call in delta.tool_calls or ():
                function = call.function
                events.append(
                    self._tools.add(
                        call.index,
                        id=call.id,
                        name=function.name if function else None,
                        fragment=_fragment(function.arguments) if function else "",
                    )
                )
        return events

    @property
    def finished(self) -> bool:
        """Whether the provider said why the answer ended (a stream without it was cut short)."""
        return self._finish is not None

    def response(self) -> ModelResponse:
        calls = self._tools.calls()
        return ModelResponse(
            content="".join(self._text),
            tool_calls=calls,
            finish_reason=_finish_reason(self._finish, bool(calls)),
            usage=_usage(self._usage),
            model=self._model,
            metadata={"response_id": self._id} if self._id else {},
        )
