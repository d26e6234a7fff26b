"""The tracer, the two GenAI histograms and the chat span that every model call shares.

:class:`Instruments` is built once per provider pair (see
:meth:`~plait.telemetry.GenAITelemetry.instruments`); :meth:`Instruments.chat` runs one model
call inside a ``chat {model}`` CLIENT span, made the current span for the call so that anything
the call causes (an overflow recovery's summarizer call, a provider retry) nests under it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from plait.messages import Message
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.output import FINAL_RESULT_TOOL
from plait.telemetry.content import (
    JsonMemo,
    input_messages,
    output_messages,
    system_instructions,
)
from plait.telemetry.semconv import (
    DURATION_BUCKETS,
    TOKEN_BUCKETS,
    provider_name,
    usage_attributes,
)

__all__ = ["ChatCall", "ContentCursor", "Instruments", "fail"]


@dataclass(slots=True)
class ContentCursor:
    """What the previous model call of this turn already recorded, so the next one records only
    what is new: message ids seen, the previous request's messages, the system prompt last
    recorded."""

    seen: set[str] = field(default_factory=set)
    system_prompt: str | None = None
    previous: Sequence[Message] | None = None
    memo: JsonMemo = field(default_factory=JsonMemo)

    def new_messages(self, messages: Sequence[Message]) -> list[Message]:
        """The messages of ``messages`` not recorded before, in order; marks them recorded.

        The part shared with the previous request (the same message objects from the start:
        history only grows within a turn) is found by bisection, so a call costs O(log n) plus
        the new messages, not O(history). When the first message differs (a summary replaced the
        history) every message is checked against the ids seen.
        """
        start = 0
        previous = self.previous
        if previous and messages and messages[0] is previous[0]:
            low, high = 1, min(len(previous), len(messages))
            while low < high:
                middle = (low + high + 1) // 2
                if messages[middle - 1] is previous[middle - 1]:
                    low = middle
                else:
                    high = middle - 1
            start = low
        self.previous = messages
        seen = self.seen
        fresh = [m for m in messages[start:] if m.id not in seen]
        seen.update(m.id for m in fresh)
        return fresh


def _error_type(exc: BaseException) -> str:
    return type(exc).__qualname__


def fail(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed with ``exc`` (``error.type``, status ERROR, an exception event)."""
    if span.is_recording():
        span.set_attribute("error.type", _error_type(exc))
        span.set_status(Status(StatusCode.ERROR, f"{_error_type(exc)}: {str(exc)[:200]}"))
        if isinstance(exc, Exception):
            span.record_exception(exc)


_MAX_SHAPES = 256
"""Bound on the cached attribute sets (one per model/conversation/settings or model/response
model combination); the cache is emptied when full."""


@dataclass(slots=True)
class ChatCall:
    """One open ``chat`` span: the span, its metric attributes, its start time and whether the
    call streams."""

    span: Span
    metric: _MetricShape
    start: float
    streaming: bool = False
    cursor: ContentCursor | None = None


@dataclass(slots=True)
class _MetricShape:
    """The metric attributes of one model (no response model known yet) and, per response model,
    the duration, input-token and output-token attribute sets: built once, reused per call."""

    base: dict[str, Any]
    by_response: dict[str | None, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict
    )

    def sets(self, response_model: str | None) -> tuple[dict[str, Any], ...]:
        found = self.by_response.get(response_model)
        if found is None:
            duration = dict(self.base)
            if response_model:
                duration["gen_ai.response.model"] = response_model
            found = (
                duration,
                {**duration, "gen_ai.token.type": "input"},
                {**duration, "gen_ai.token.type": "output"},
            )
            if len(self.by_response) >= _MAX_SHAPES:
                self.by_response.clear()
            self.by_response[response_model] = found
        return found


@dataclass(slots=True)
class Instruments:
    """A tracer and the GenAI histograms; ``capture_content`` and ``max_chars`` govern content.

    Span and metric attribute sets are built once per model, conversation and request settings
    and reused (the SDK copies what it keeps), so a call builds no attribute dict of its own
    until the response is in.
    """

    tracer: Tracer
    meter: Meter | None
    capture_content: bool
    max_chars: int
    token_usage: Histogram | None = None
    duration: Histogram | None = None
    first_chunk: Histogram | None = None
    _shapes: dict[tuple[Any, ...], tuple[str, dict[str, Any], _MetricShape]] = field(
        default_factory=dict
    )

    def __post_init__(self) -> None:
        if self.meter is not None:
            self.token_usage = self.meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
            )
            self.duration = self.meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            )
            self.first_chunk = self.meter.create_histogram(
                "gen_ai.client.operation.time_to_first_chunk",
                unit="s",
                description="Time from issuing a streamed request to receiving its first chunk.",
                explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
            )

    def _shape(
        self,
        request: ModelRequest,
        model: Any,
        conversation_id: str | None,
        provider: str | None,
        streaming: bool,
    ) -> tuple[str, dict[str, Any], _MetricShape]:
        """The span name, span attributes and metric shape of a call (cached)."""
        model_name = request.model or getattr(model, "name", "unknown")
        provider = provider or provider_name(model)
        key = (
            provider,
            model_name,
            conversation_id,
            request.temperature,
            request.max_tokens,
            streaming,
            _output_type(request),
        )
        found = self._shapes.get(key)
        if found is not None:
            return found
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model_name,
        }
        metric = _MetricShape(dict(attributes))
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        attributes["gen_ai.request.stream"] = streaming
        if (output_type := key[-1]) is not None:
            attributes["gen_ai.output.type"] = output_type
        found = (f"chat {model_name}", attributes, metric)
        if len(self._shapes) >= _MAX_SHAPES:
            self._shapes.clear()
        self._shapes[key] = found
        return found

    def start_chat(
        self,
        request: ModelRequest,
        model: Any,
        *,
        conversation_id: str | None = None,
        cursor: ContentCursor | None = None,
        provider: str | None = None,
        streaming: bool = False,
    ) -> ChatCall:
        """Open a ``chat {model}`` CLIENT span (not made current) and start the clock.

        With content capture on and the span recording, ``gen_ai.input.messages`` holds only the
        messages ``cursor`` has not seen (all of them without a cursor) and
        ``gen_ai.system_instructions`` only a system prompt that changed.
        """
        name, attributes, metric = self._shape(request, model, conversation_id, provider, streaming)
        span = self.tracer.start_span(name, kind=SpanKind.CLIENT, attributes=attributes)
        if self.capture_content and span.is_recording():
            cursor = cursor or ContentCursor()
            self._record_input(span, request, cursor)
        return ChatCall(span, metric, time.perf_counter(), streaming, cursor)

    def finish_chat(
        self,
        chat: ChatCall,
        response: ModelResponse | None = None,
        error: BaseException | None = None,
        first_chunk_at: float | None = None,
    ) -> None:
        """End ``chat``'s span with ``response`` or ``error``, then record the metrics.
        ``first_chunk_at`` (``time.perf_counter()``) gives a stream's time to first chunk."""
        span = chat.span
        first_chunk = None if first_chunk_at is None else max(first_chunk_at - chat.start, 0.0)
        if error is not None:
            fail(span, error)
            if first_chunk is not None and span.is_recording():
                span.set_attribute("gen_ai.response.time_to_first_chunk", first_chunk)
        elif response is not None and span.is_recording():
            self._record_output(span, response, first_chunk, chat.cursor)
        span.end()
        if self.duration is not None:
            self._record_metrics(chat, error, response, first_chunk)

    async def chat(
        self,
        request: ModelRequest,
        model: Any,
        call: Callable[[ModelRequest], Awaitable[ModelResponse]],
        *,
        conversation_id: str | None = None,
        cursor: ContentCursor | None = None,
        provider: str | None = None,
    ) -> ModelResponse:
        """``call(request)`` (not streamed) inside a ``chat`` span made current for the call
        (see :meth:`start_chat`), then the metrics."""
        chat = self.start_chat(
            request, model, conversation_id=conversation_id, cursor=cursor, provider=provider
        )
        token = otel_context.attach(trace.set_span_in_context(chat.span))
        try:
            response = await call(request)
        except BaseException as exc:
            otel_context.detach(token)
            self.finish_chat(chat, error=exc)
            raise
        otel_context.detach(token)
        self.finish_chat(chat, response)
        return response

    def _record_input(self, span: Span, request: ModelRequest, cursor: ContentCursor) -> None:
        attributes: dict[str, Any] = {}
        if request.system_prompt and request.system_prompt != cursor.system_prompt:
            cursor.system_prompt = request.system_prompt
            attributes["gen_ai.system_instructions"] = system_instructions(
                request.system_prompt, self.max_chars
            )
        attributes["plait.request.messages"] = len(request.messages)
        attributes["gen_ai.input.messages"] = input_messages(
            cursor.new_messages(request.messages), self.max_chars, cursor.memo
        )
        span.set_attributes(attributes)

    def _record_output(
        self,
        span: Span,
        response: ModelResponse,
        first_chunk: float | None,
        cursor: ContentCursor | None,
    ) -> None:
        attributes: dict[str, Any] = usage_attributes(response.usage)
        attributes["gen_ai.response.finish_reasons"] = (response.finish_reason,)
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        metadata = response.metadata
        response_id = metadata.get("response_id") or metadata.get("id")
        if isinstance(response_id, str):
            attributes["gen_ai.response.id"] = response_id
        if first_chunk is not None:
            attributes["gen_ai.response.time_to_first_chunk"] = first_chunk
        if self.capture_content:
            memo = cursor.memo if cursor is not None else None
            attributes["gen_ai.output.messages"] = output_messages(response, self.max_chars, memo)
        span.set_attributes(attributes)

    def _record_metrics(
        self,
        chat: ChatCall,
        error: BaseException | None,
        response: ModelResponse | None,
        first_chunk: float | None,
    ) -> None:
        assert self.duration is not None and self.token_usage is not None
        elapsed = time.perf_counter() - chat.start
        response_model = response.model if response is not None else None
        duration, input_set, output_set = chat.metric.sets(response_model or None)
        if first_chunk is not None and self.first_chunk is not None:
            self.first_chunk.record(first_chunk, duration)
        if error is not None:
            self.duration.record(elapsed, {**duration, "error.type": _error_type(error)})
            return
        self.duration.record(elapsed, duration)
        usage = response.usage if response is not None else None
        if usage is not None and (usage.input_tokens or usage.output_tokens):
            self.token_usage.record(usage.input_tokens, input_set)
            self.token_usage.record(usage.output_tokens, output_set)


def _output_type(request: ModelRequest) -> str | None:
    """``gen_ai.output.type``: ``"json"`` for a structured output asked natively or through the
    final-answer tool; ``None`` (not set) for free text."""
    if request.output_schema is not None:
        return "json"
    if any(t.name == FINAL_RESULT_TOOL and t.metadata.get("output") for t in request.tools):
        return "json"
    return None
