"""The model contract: one request type, one response type, one protocol with two methods.

``generate`` returns a whole :class:`ModelResponse`. ``stream`` is its own async iterator of
:class:`StreamEvent` (never a flag that changes a return type): any number of
:class:`TextDelta` / :class:`ToolCallDelta` events, then exactly one :class:`ResponseComplete`
carrying the assembled response, so a consumer that only wants the result can skip to the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from plait.messages import (
    AssistantMessage,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
)

__all__ = [
    "CallClass",
    "FinishReason",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "Reasoning",
    "ReasoningDelta",
    "ResponseComplete",
    "StreamEvent",
    "TextDelta",
    "ToolCallDelta",
    "ToolChoice",
    "accepts_input",
    "collect_stream",
]

CallClass: TypeAlias = str
"""What kind of call a request is: ``"agent"`` for the agent's own turn, ``"summarizer"`` for a
summarization call, or any string an application defines. Middleware and routing read it to tell
calls apart."""

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "error"] | str
ToolChoice: TypeAlias = Literal["auto", "none", "required"] | str
"""``"auto"`` (default), ``"none"``, ``"required"``, or a tool name to force that tool."""


@dataclass(slots=True, frozen=True)
class Reasoning:
    """How much a reasoning model thinks, in the terms of either provider family.

    ``effort`` is OpenAI's reasoning effort (the Responses API's ``reasoning.effort``);
    ``budget_tokens`` is Anthropic's extended-thinking budget (at least 1,024, below
    ``max_tokens``); ``summary`` asks OpenAI for a readable summary (``"auto"``,
    ``"concise"``, ``"detailed"``); ``interleaved`` lets Claude think between tool calls. An
    adapter maps what its provider understands and raises ``ConfigurationError`` for a setting
    it cannot honour (for example ``budget_tokens`` over ``max_tokens``). ``enabled=False``
    turns thinking off where a model thinks by default.
    """

    effort: Literal["minimal", "low", "medium", "high"] | None = None
    budget_tokens: int | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    interleaved: bool = False
    enabled: bool = True


@dataclass(slots=True, frozen=True)
class ModelSettings:
    """One request's model settings: set on the agent (``Agent(model_settings=...)``) and per
    run, the run's fields winning where set (:meth:`merged`).

    ``extra`` holds provider-specific body fields, sent as they are (``extra_body``) after the
    adapter's own: an escape hatch, checked by nothing but the provider.
    """

    temperature: float | None = None
    max_tokens: int | None = None
    reasoning: Reasoning | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, other: ModelSettings | None) -> ModelSettings:
        """These settings with ``other``'s set fields on top (``extra`` merged key by key)."""
        if other is None:
            return self
        return ModelSettings(
            temperature=self.temperature if other.temperature is None else other.temperature,
            max_tokens=self.max_tokens if other.max_tokens is None else other.max_tokens,
            reasoning=self.reasoning if other.reasoning is None else other.reasoning,
            extra={**self.extra, **other.extra},
        )


@dataclass(slots=True, frozen=True)
class OutputSchema:
    """Native structured output asked of the provider: answer with JSON matching ``schema``.

    ``name`` is the schema's name (``response_format.json_schema.name``, ``[a-zA-Z0-9_-]``, at
    most 64 characters); ``strict`` asks the provider to enforce the schema, which must then be
    strict-compatible (:func:`plait.runtime.output_schema.strict_schema` makes it so). An
    adapter that cannot honour it says so with ``supports_native_output = False``.
    """

    name: str
    schema: Mapping[str, Any]
    strict: bool = True


@dataclass(slots=True)
class ModelRequest:
    """Everything a provider needs for one call. Middleware returns changed copies
    (:meth:`replace`) rather than mutating a request another middleware may hold.

    ``messages`` is a read-only sequence: the runtime's requests carry a
    :class:`~plait.history.HistoryView` (a snapshot of the turn's history that costs O(1), not
    a copy); middleware that changes the messages passes a new sequence (a ``list``) to
    :meth:`replace`.
    """

    messages: Sequence[Message]
    tools: list[ToolDefinition] = field(default_factory=list)
    system_prompt: str = ""
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    call_class: CallClass = "agent"
    tool_choice: ToolChoice | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reasoning: Reasoning | None = None
    """Thinking settings (:class:`Reasoning`); ``None`` leaves the model's default."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Provider-specific body fields (:attr:`ModelSettings.extra`)."""
    output_schema: OutputSchema | None = None
    """Native structured output (:class:`OutputSchema`); ``None`` for free text."""

    def replace(self, **changes: Any) -> ModelRequest:
        """A copy with ``changes`` applied (list and dict fields are not deep-copied)."""
        return replace(self, **changes)


@dataclass(slots=True)
class ModelResponse:
    """What a provider answered: text, tool calls, why it stopped, and usage.

    ``reasoning`` holds the model's reasoning parts in the order the provider sent them; they
    come before the text in the assistant message (:meth:`to_message`) and are replayed to the
    same provider verbatim.
    """

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reasoning: list[ReasoningPart] = field(default_factory=list)

    def replace(self, **changes: Any) -> ModelResponse:
        return replace(self, **changes)

    def to_message(self) -> AssistantMessage:
        """The assistant message this response becomes in the conversation."""
        if self.reasoning:
            parts: list[Part] = [*self.reasoning]
            if self.content:
                parts.append(TextPart(self.content))
            return AssistantMessage(
                parts,
                tool_calls=self.tool_calls,
                usage=self.usage,
                finish_reason=self.finish_reason,
            )
        return AssistantMessage(
            self.content,
            tool_calls=self.tool_calls,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )


@dataclass(slots=True, frozen=True)
class TextDelta:
    """A chunk of answer text."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True, frozen=True)
class ReasoningDelta:
    """A chunk of readable reasoning (Anthropic thinking, an OpenAI reasoning summary) as it
    streams; ``index`` tells the reasoning parts of one response apart."""

    text: str
    index: int = 0
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(slots=True, frozen=True)
class ToolCallDelta:
    """A fragment of a tool call as it streams: ``index`` tells parallel calls apart; ``id`` and
    ``name`` arrive once, ``args_fragment`` is a piece of the JSON argument text."""

    index: int
    id: str | None = None
    name: str | None = None
    args_fragment: str = ""
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(slots=True, frozen=True)
class ResponseComplete:
    """The last event of every stream: the whole response, tool calls assembled."""

    response: ModelResponse
    type: Literal["response_complete"] = "response_complete"


StreamEvent: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | ResponseComplete


@runtime_checkable
class Model(Protocol):
    """A language model. Implementations: provider adapters, :class:`~plait.models.ScriptedModel`,
    :class:`~plait.models.FunctionModel`, and anything wrapped by
    :func:`~plait.models.wrap_model`."""

    @property
    def name(self) -> str:
        """A short label for logs and events, such as ``"openai:gpt-4.1-mini"``."""
        ...

    async def generate(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` in one piece."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Answer ``request`` as events, ending with one :class:`ResponseComplete`."""
        ...

    async def aclose(self) -> None:
        """Release the model's resources (an HTTP client it created). Idempotent; a model with
        nothing to release implements it as a no-op."""
        ...


async def collect_stream(events: AsyncIterator[StreamEvent]) -> ModelResponse:
    """Drain a stream and return its final response.

    Raises ``RuntimeError`` if the stream ends without a :class:`ResponseComplete`, which means
    the model implementation is broken.
    """
    final: ModelResponse | None = None
    async for event in events:
        if isinstance(event, ResponseComplete):
            final = event.response
    if final is None:
        raise RuntimeError("model stream ended without a ResponseComplete event")
    return final


InputKind: TypeAlias = Literal["image", "document", "audio"]

_ALL_INPUTS: frozenset[str] = frozenset({"text", "image", "document", "audio"})


def accepts_input(model: object, kind: InputKind) -> bool:
    """Whether ``model`` takes ``kind`` parts in its requests: its ``input_kinds`` attribute (a
    set of ``"text"``, ``"image"``, ``"document"``, ``"audio"``) when it has one; a model without
    one (your own :class:`Model`, a scripted one) is taken to accept every kind. Tools that can
    answer with an image or a PDF ask this first, and answer with a note otherwise."""
    kinds = getattr(model, "input_kinds", None)
    if kinds is None:
        kinds = _ALL_INPUTS
    return kind in kinds
