"""Plain conversation data: messages, content parts, tool calls and results, usage.

Four message kinds share three fields: ``content`` (a list of parts), ``metadata`` (a free dict that
middleware uses to tag what it injected, e.g. ``{"source": "pinned_skill"}``) and ``id`` (stable
across persistence). Every kind takes plain text as its first argument::

    UserMessage("What is in report.csv?")
    AssistantMessage("Let me look.", tool_calls=[ToolCall("c1", "read_file", {"path": "r.csv"})])
    ToolMessage("c1", "read_file", data="a,b\\n1,2")

:func:`dump_messages` / :func:`load_messages` give a lossless JSON round trip (metadata included).
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from plait.parts import Blob, FilePart, ImagePart, ReasoningPart

if TYPE_CHECKING:
    from pydantic import TypeAdapter


__all__ = [
    "AssistantMessage",
    "Blob",
    "FilePart",
    "ImagePart",
    "Message",
    "Part",
    "ReasoningPart",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "Usage",
    "UserMessage",
    "dump_messages",
    "load_messages",
    "new_id",
    "split_tool_output",
]


_new = object.__new__

_ID_BATCH = 256
"""Ids drawn from one ``os.urandom`` read (one system call per 256 ids instead of per id)."""


def _fresh_batch() -> tuple[bytes, Iterator[int]]:
    return os.urandom(16 * _ID_BATCH), itertools.count()


_batch = _fresh_batch()


def _forget_batch() -> None:
    global _batch
    _batch = _fresh_batch()


# A forked child starts with a copy of the parent's memory: it must not hand out the ids left
# in the parent's batch.
os.register_at_fork(after_in_child=_forget_batch)


def new_id() -> str:
    """A fresh opaque identifier: 32 lowercase hex characters (128 random bits).

    The bits come from ``os.urandom`` (the kernel's CSPRNG), read 256 ids at a time: each id is
    its own 16-byte slice of a batch, picked by ``next()`` on an ``itertools.count`` (atomic
    under the GIL), so two threads never get the same slice; a thread that finds the batch used
    up reads a new one (two threads doing so at once each read their own). A forked child drops
    the parent's batch (``os.register_at_fork``), so ids are unique across threads, processes
    and forked children without a lock (two equal ids among a billion need about 2**-69 luck),
    and they are unguessable. Cost: well under a quarter of ``uuid.uuid4().hex``. Ids are
    opaque: code must not parse them.
    """
    global _batch
    while True:
        data, counter = _batch
        i = next(counter)
        if i < _ID_BATCH:
            return data[16 * i : 16 * i + 16].hex()
        _batch = _fresh_batch()


class _Discriminator:
    """``Annotated`` metadata pydantic reads as the union's discriminator (tagged by ``type``),
    without importing pydantic when ``plait.messages`` is imported."""

    __slots__ = ("field",)

    def __init__(self, field: str) -> None:
        self.field = field

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic import Field

        return handler(Annotated[source, Field(discriminator=self.field)])


@dataclass(slots=True)
class TextPart:
    """A run of text inside a message."""

    text: str
    type: Literal["text"] = "text"


Part: TypeAlias = Annotated[TextPart | ImagePart | FilePart | ReasoningPart, _Discriminator("type")]
"""The content-part union (``type`` tells the kinds apart): text, image, file and, on assistant
messages, reasoning (:mod:`plait.parts`)."""


def _parts(content: str | Sequence[Part]) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    return list(content)


def _attachments(parts: Iterable[Part] | None) -> list[Part]:
    return [] if parts is None else list(parts)


def split_tool_output(value: Any) -> tuple[Any, list[Part]]:
    """A tool's return value as ``(data, parts)``: an image or file part, or a list or tuple
    holding any, is split into the text (the text parts and strings, joined by newlines) and the
    image and file parts in their order; any other value is ``(value, [])``, unchanged.
    """
    kind = type(value)
    if kind is ImagePart or kind is FilePart:
        return "", [value]
    if (kind is list or kind is tuple) and any(
        type(v) is ImagePart or type(v) is FilePart for v in value
    ):
        texts: list[str] = []
        parts: list[Part] = []
        for item in value:
            if type(item) is ImagePart or type(item) is FilePart:
                parts.append(item)
            elif isinstance(item, TextPart):
                texts.append(item.text)
            elif isinstance(item, str):
                texts.append(item)
            else:
                texts.append(_json_adapter().dump_json(item).decode())
        return "\n".join(texts), parts
    return value, []


@dataclass(slots=True)
class ToolCall:
    """A model's request to run a tool (the seed's ``ToolCallRef``: ``{id, name, args}``).

    ``raw_args`` is set only when the provider sent argument text that is not a JSON object;
    ``args`` is then empty and the call fails validation with a message quoting the raw text.
    """

    id: str
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    raw_args: str | None = None


@dataclass(slots=True)
class ToolResult:
    """The outcome of one tool call (the seed's ``ToolResultRef``).

    Fields: ``{tool_call_id, data, is_error}``.

    ``data`` is any JSON value: a string for most tools, a dict for structured results such as
    an eviction reference. ``parts`` holds what is not text (an image a browser tool took, a PDF
    it fetched), sent to the model after ``data``.
    """

    tool_call_id: str
    data: Any
    is_error: bool = False
    parts: list[Part] = field(default_factory=list)


@dataclass(slots=True)
class Usage:
    """Token usage as reported by a provider (or estimated, when the provider reports none).

    ``reasoning_tokens`` is the part of ``output_tokens`` the model spent thinking (OpenAI's
    ``reasoning_tokens``, Anthropic's ``thinking_tokens``), already counted in ``output_tokens``;
    0 when the provider does not say.

    ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of ``input_tokens`` read from
    and written to the provider's prompt cache; ``cache_write_1h_tokens`` is the part of
    ``cache_write_tokens`` written with Anthropic's 1-hour TTL (billed at twice the input rate
    instead of 1.25 times).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0
    reasoning_tokens: int = 0
    cache_write_1h_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.requests + other.requests,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


class _TextMixin:
    __slots__ = ()
    content: list[Part]

    @property
    def text(self) -> str:
        """The concatenated text of every text part."""
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(slots=True, init=False)
class SystemMessage(_TextMixin):
    """Instructions from the application. The agent's own system prompt is not stored as one;
    middleware uses system messages for things like a conversation summary."""

    content: list[Part]
    metadata: dict[str, Any]
    id: str
    role: Literal["system"]

    def __init__(
        self,
        content: str | Sequence[Part] = (),
        *,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
        role: Literal["system"] = "system",
    ) -> None:
        self.content = _parts(content)
        self.metadata = {} if metadata is None else metadata
        self.id = id or new_id()
        self.role = "system"


@dataclass(slots=True, init=False)
class UserMessage(_TextMixin):
    """What the user (or middleware speaking for the user, e.g. a pinned skill) said."""

    content: list[Part]
    metadata: dict[str, Any]
    id: str
    role: Literal["user"]

    def __init__(
        self,
        content: str | Sequence[Part] = (),
        *,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
        role: Literal["user"] = "user",
    ) -> None:
        self.content = _parts(content)
        self.metadata = {} if metadata is None else metadata
        self.id = id or new_id()
        self.role = "user"


@dataclass(slots=True, init=False)
class AssistantMessage(_TextMixin):
    """The model's answer: text and/or tool calls, with the usage and finish reason reported."""

    content: list[Part]
    tool_calls: list[ToolCall]
    usage: Usage | None
    finish_reason: str | None
    metadata: dict[str, Any]
    id: str
    role: Literal["assistant"]

    def __init__(
        self,
        content: str | Sequence[Part] = (),
        *,
        tool_calls: Iterable[ToolCall] = (),
        usage: Usage | None = None,
        finish_reason: str | None = None,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
        role: Literal["assistant"] = "assistant",
    ) -> None:
        self.content = _parts(content)
        self.tool_calls = list(tool_calls)
        self.usage = usage
        self.finish_reason = finish_reason
        self.metadata = {} if metadata is None else metadata
        self.id = id or new_id()
        self.role = "assistant"


@dataclass(slots=True, init=False)
class ToolMessage:
    """The result of one tool call, paired with its call by ``tool_call_id``.

    ``data`` is the result's JSON value (usually text); ``parts`` the images and files the tool
    returned beside it (empty for most tools)."""

    tool_call_id: str
    name: str
    data: Any
    is_error: bool
    metadata: dict[str, Any]
    id: str
    role: Literal["tool"]
    parts: list[Part]

    def __init__(
        self,
        tool_call_id: str,
        name: str,
        data: Any = "",
        *,
        is_error: bool = False,
        parts: Iterable[Part] | None = None,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
        role: Literal["tool"] = "tool",
    ) -> None:
        self.tool_call_id = tool_call_id
        self.name = name
        self.data = data
        self.is_error = is_error
        self.parts = _attachments(parts)
        self.metadata = {} if metadata is None else metadata
        self.id = id or new_id()
        self.role = "tool"

    @classmethod
    def from_result(
        cls, result: ToolResult, name: str, *, metadata: dict[str, Any] | None = None
    ) -> ToolMessage:
        if cls is not ToolMessage:  # a subclass's own __init__ runs
            return cls(
                result.tool_call_id,
                name,
                result.data,
                is_error=result.is_error,
                parts=result.parts,
                metadata=metadata,
            )
        message = _new(cls)  # as __init__ does, without its keyword handling (per tool call)
        message.tool_call_id = result.tool_call_id
        message.name = name
        message.data = result.data
        message.is_error = result.is_error
        message.parts = list(result.parts) if result.parts else []
        message.metadata = {} if metadata is None else metadata
        message.id = new_id()
        message.role = "tool"
        return message

    @property
    def result(self) -> ToolResult:
        return ToolResult(self.tool_call_id, self.data, self.is_error, list(self.parts))

    @property
    def text(self) -> str:
        """The result as text: strings as they are, anything else as compact JSON."""
        if isinstance(self.data, str):
            return self.data
        return _json_adapter().dump_json(self.data).decode()


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any conversation message; ``role`` tells the kinds apart."""


@functools.cache
def _json_adapter() -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(Any)


@functools.cache
def _messages_adapter() -> TypeAdapter[list[Message]]:
    # Built on first use (pydantic and the schema cost tens of milliseconds); ``role`` is the
    # discriminator between message kinds.
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    return TypeAdapter(list[Annotated[Message, Field(discriminator="role")]])


def dump_messages(messages: Sequence[Message]) -> str:
    """Serialize messages to a JSON array (lossless: :func:`load_messages` restores them)."""
    return _messages_adapter().dump_json(list(messages)).decode()


def load_messages(data: str | bytes) -> list[Message]:
    """Parse a JSON array written by :func:`dump_messages`.

    Raises ``pydantic.ValidationError`` (a ``ValueError``) naming the bad field on malformed input.
    """
    return _messages_adapter().validate_json(data)


@dataclass(slots=True, frozen=True)
class ToolDefinition:
    """What a model is told about a tool: name, description and a JSON schema of its arguments.

    ``metadata`` carries flags other layers read, such as ``{"defer_loading": True}``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)
