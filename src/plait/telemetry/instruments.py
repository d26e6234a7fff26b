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
from plait.telemetry.content import input_messages, output_messages, system_instructions
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


@dataclass(slots=True)
class ChatCall:
    """One open ``chat`` span: the span, its metric attributes and its start time."""

    span: Span
    attributes: dict[str, Any]
    start: float


@dataclass(slots=True)
class Instruments:
    """A tracer and the two histograms; ``capture_content`` and ``max_chars`` govern content."""

    tracer: Tracer
    meter: Meter | None
    capture_content: bool
    max_chars: int
    token_usage: Histogram | None = None
    duration: Histogram | None = None

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

    def start_chat(
        self,
        request: ModelRequest,
        model: Any,
        *,
        conversation_id: str | None = None,
        cursor: ContentCursor | None = None,
        provider: str | None = None,
    ) -> ChatCall:
        """Open a ``chat {model}`` CLIENT span (not made current) and start the clock.

        With content capture on and the span recording, ``gen_ai.input.messages`` holds only the
        messages ``cursor`` has not seen (all of them without a cursor) and
        ``gen_ai.system_instructions`` only a system prompt that changed.
        """
        model_name = request.model or getattr(model, "name", "unknown")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or provider_name(model),
            "gen_ai.request.model": model_name,
        }
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        span = self.tracer.start_span(
            f"chat {model_name}", kind=SpanKind.CLIENT, attributes=attributes
        )
        if self.capture_content and span.is_recording():
            self._record_input(span, request, cursor or ContentCursor())
        return ChatCall(span, attributes, time.perf_counter())

    def finish_chat(
        self,
        chat: ChatCall,
        response: ModelResponse | None = None,
        error: BaseException | None = None,
    ) -> None:
        """End ``chat``'s span with ``response`` or ``error``, then record the metrics."""
        span = chat.span
        if error is not None:
            fail(span, error)
        elif response is not None and span.is_recording():
            self._record_output(span, response)
        span.end()
        self._record_duration(
            chat.start, chat.attributes, None if error is None else _error_type(error), response
        )

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
        """``call(request)`` inside a ``chat`` span made current for the call (see
        :meth:`start_chat`), then the metrics."""
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
        if request.system_prompt and request.system_prompt != cursor.system_prompt:
            cursor.system_prompt = request.system_prompt
            span.set_attribute(
                "gen_ai.system_instructions",
                system_instructions(request.system_prompt, self.max_chars),
            )
        span.set_attribute("plait.request.messages", len(request.messages))
        span.set_attribute(
            "gen_ai.input.messages",
            input_messages(cursor.new_messages(request.messages), self.max_chars),
        )

    def _record_output(self, span: Span, response: ModelResponse) -> None:
        attributes: dict[str, Any] = usage_attributes(response.usage)
        attributes["gen_ai.response.finish_reasons"] = [response.finish_reason]
        if response.model:
            attributes["gen_ai.response.model"] = response.model
        response_id = response.metadata.get("id")
        if isinstance(response_id, str):
            attributes["gen_ai.response.id"] = response_id
        reasoning = response.metadata.get("reasoning_tokens")
        if isinstance(reasoning, int):
            attributes["gen_ai.usage.reasoning.output_tokens"] = reasoning
        if self.capture_content:
            attributes["gen_ai.output.messages"] = output_messages(response, self.max_chars)
        span.set_attributes(attributes)

    def _record_duration(
        self,
        start: float,
        attributes: dict[str, Any],
        error_type: str | None,
        response: ModelResponse | None = None,
    ) -> None:
        if self.duration is None or self.token_usage is None:
            return
        metric = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": attributes["gen_ai.provider.name"],
            "gen_ai.request.model": attributes["gen_ai.request.model"],
        }
        if response is not None and response.model:
            metric["gen_ai.response.model"] = response.model
        if error_type is not None:
            self.duration.record(time.perf_counter() - start, {**metric, "error.type": error_type})
            return
        self.duration.record(time.perf_counter() - start, metric)
        usage = response.usage if response is not None else None
        if usage is not None and (usage.input_tokens or usage.output_tokens):
            self.token_usage.record(usage.input_tokens, {**metric, "gen_ai.token.type": "input"})
            self.token_usage.record(usage.output_tokens, {**metric, "gen_ai.token.type": "output"})
