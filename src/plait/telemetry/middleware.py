"""``GenAITelemetry``: OpenTelemetry GenAI spans and metrics for every turn of an agent.

Add it to the agent's middleware (it pins itself outermost; list it first so its spans wrap
every other middleware's wrappers)::

    agent = Agent(model, middleware=[GenAITelemetry(agent_name="support"), ...])

Spans (names, kinds and attributes in the package README):

* ``invoke_agent {agent}`` (INTERNAL) from ``turn_input`` until the turn ends however it ends
  (closed by a ``TurnContext`` finalizer); it is the current span for the whole turn, so a model
  call a battery makes (a model summarizer, instrumented with :meth:`GenAITelemetry.instrument`)
  nests under it. It carries no ``gen_ai.usage.*`` (the ``chat`` spans do; backends that sum
  spans would count twice) but the turn's totals as ``plait.usage.*``.
* ``chat {model}`` (CLIENT) around each agent model call, in ``wrap_model_call``.
* ``execute_tool {tool}`` (INTERNAL) around each tool call, in ``wrap_tool_call``.
* What middleware reports through ``ctx.emit`` (disclosure, eviction, summarization, rejections,
  repairs, overflow recovery, limits, skills) becomes a span event ``plait.<event type>`` on the
  span current when it was emitted.

Off is cheap: with no SDK tracer or meter provider installed a turn costs one check in
``turn_input``, which then leaves the middleware's model and tool wrappers out of the turn's
chain (``TurnContext.skip_wraps``): a model or tool call costs nothing. An SDK configured later is
noticed at the next turn. With ``enabled=False`` (decided when the agent is built) none of its
hooks is in the chain.

Provider retries: the turn reports each one as a ``ModelCallRetried`` event, recorded as a
``plait.provider_retry`` span event on the ``chat`` span (no ``Backoff(on_retry=...)`` wiring).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider, NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, TracerProvider

from plait.__about__ import __version__
from plait.errors import ConfigurationError
from plait.messages import ToolCall, ToolResult
from plait.middleware.base import Middleware, ModelHandler, Next, ToolHandler
from plait.middleware.context import DispatchContext, Event, TurnContext
from plait.middleware.ordering import Placement
from plait.models.base import Model, ModelRequest, ModelResponse
from plait.models.language_model import wrap_model
from plait.runtime.events import RUNTIME_EVENTS
from plait.runtime.pause import PauseTurn
from plait.telemetry.content import MAX_CONTENT_CHARS
from plait.telemetry.instruments import ContentCursor, Instruments, fail
from plait.telemetry.model import ModelTelemetry
from plait.telemetry.retries import retry_attributes
from plait.telemetry.semconv import capture_content_from_env, provider_name, usage_attributes

__all__ = ["GenAITelemetry"]

SCOPE = "plait"

# Event fields that hold model or user text: recorded only with content capture on.
_CONTENT_FIELDS = frozenset({"text", "original", "output", "input", "messages"})
_MAX_EVENT_TEXT = 200
_MAX_TOOL_NAMES = 1024
_RETRIED = "model_call_retried"
_RELAYED = "subagent_event_relayed"
_MAX_EVENT_ITEMS = 50


def _real_tracing(provider: TracerProvider) -> bool:
    return not isinstance(provider, (ProxyTracerProvider, NoOpTracerProvider))


def _real_metrics(provider: MeterProvider) -> bool:
    return not isinstance(provider, NoOpMeterProvider) and type(provider).__name__ != (
        "_ProxyMeterProvider"
    )


@dataclasses.dataclass(slots=True)
class _TurnTelemetry:
    instruments: Instruments
    cursor: ContentCursor
    model: object
    provider: str
    conversation_id: str


class GenAITelemetry(Middleware):
    """Emits OpenTelemetry GenAI spans and metrics for each turn (see the module docstring).

    ``tracer_provider`` / ``meter_provider`` default to the global ones (set by the user's SDK
    setup, e.g. ``opentelemetry-instrument`` or ``trace.set_tracer_provider``); while neither is
    a real provider, telemetry is off. ``capture_content`` (default: the
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` variable, off when unset) records
    message content: per model call only the messages new since the previous call of the same
    turn, each text clipped to ``max_content_chars``. ``enabled=False`` turns it all off.
    """

    placement = Placement(position="outermost")

    def __init__(
        self,
        *,
        agent_name: str = "plait",
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        max_content_chars: int = MAX_CONTENT_CHARS,
        enabled: bool = True,
    ) -> None:
        if max_content_chars < 1:
            raise ConfigurationError(
                f"max_content_chars must be at least 1 (got {max_content_chars}); it bounds "
                "each text recorded when content capture is on."
            )
        self.agent_name = agent_name
        self.enabled = enabled
        self.capture_content = (
            capture_content_from_env() if capture_content is None else capture_content
        )
        self.max_content_chars = max_content_chars
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._cached: tuple[object, object, Instruments | None] | None = None
        self._alone = frozenset({self})
        self._tool_names: dict[str, str] = {}

    def instruments(self) -> Instruments | None:
        """The tracer and histograms to use now, or ``None`` when telemetry is off (disabled, or
        neither a real tracer provider nor a real meter provider is installed)."""
        if not self.enabled:
            return None
        tracer_provider = self._tracer_provider or trace.get_tracer_provider()
        meter_provider = self._meter_provider or metrics.get_meter_provider()
        cached = self._cached
        if cached is not None and cached[0] is tracer_provider and cached[1] is meter_provider:
            return cached[2]
        tracing, metering = _real_tracing(tracer_provider), _real_metrics(meter_provider)
        found = None
        if tracing or metering:
            found = Instruments(
                tracer=tracer_provider.get_tracer(SCOPE, __version__),
                meter=meter_provider.get_meter(SCOPE, __version__) if metering else None,
                capture_content=self.capture_content,
                max_chars=self.max_content_chars,
            )
        self._cached = (tracer_provider, meter_provider, found)
        return found

    def overrides(self, hook: str) -> bool:
        """With ``enabled=False`` no hook is in the agent's chain at all: zero cost per turn."""
        return self.enabled and super().overrides(hook)

    def instrument(self, model: Model) -> Model:
        """``model`` wrapped so that each call it makes outside the agent's own model calls (a
        model summarizer's, say) gets its own ``chat`` span under the span current at the time.
        Do not wrap the agent's own model: its calls already get ``chat`` spans here."""
        return wrap_model(model, ModelTelemetry(self.instruments))

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        instruments = self.instruments()
        if instruments is None:  # nothing to record: no per-call wrapper this turn
            skip = ctx.skip_wraps
            ctx.skip_wraps = self._alone if not skip else skip | self._alone
            await next()
            return
        model_name = getattr(ctx.model, "name", "unknown")
        provider = provider_name(ctx.model)
        span = instruments.tracer.start_span(
            f"invoke_agent {self.agent_name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": provider,
                "gen_ai.agent.name": self.agent_name,
                "gen_ai.conversation.id": ctx.thread_id,
                "gen_ai.request.model": model_name,
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        capture = instruments.capture_content
        cursor = ContentCursor()
        if capture:  # the stored history counts as recorded: a turn records what it adds
            fresh = {id(m) for m in ctx.input}
            cursor.seen.update(m.id for m in ctx.messages if id(m) not in fresh)
        ctx.scratch[self] = _TurnTelemetry(instruments, cursor, ctx.model, provider, ctx.thread_id)

        def observe(event: Event) -> None:
            kind = event.type
            if kind == _RELAYED:  # a subagent's: its own telemetry records it, on its spans
                return
            if kind not in RUNTIME_EVENTS or (
                kind == "tool_call_finished" and getattr(event, "skipped_by", None) is not None
            ):
                _add_event(event, capture)

        def finish(error: BaseException | None) -> None:
            if span.is_recording():
                span.set_attributes(usage_attributes(ctx.usage, "plait.usage."))
                span.set_attribute("plait.model_calls", ctx.dispatch_count)
                if error is not None:
                    fail(span, error)
            span.end()
            otel_context.detach(token)

        ctx.observe(observe)
        ctx.finalizers.append(finish)
        await next()

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        turn: _TurnTelemetry | None = ctx.turn.scratch.get(self)
        if turn is None:
            return await call_next(request)
        model = ctx.turn.model
        instruments = turn.instruments
        streaming = ctx.turn.streaming
        # Inlined Instruments.chat: one coroutine less per model call.
        chat = instruments.start_chat(
            request,
            model,
            conversation_id=turn.conversation_id,
            cursor=turn.cursor,
            # Computed once a turn, unless middleware swapped the turn's model since.
            provider=turn.provider if model is turn.model else None,
            streaming=streaming,
        )
        token = otel_context.attach(trace.set_span_in_context(chat.span))
        try:
            response = await call_next(request)
        except BaseException as exc:
            otel_context.detach(token)
            first = ctx.first_chunk_at if streaming else None
            instruments.finish_chat(chat, error=exc, first_chunk_at=first)
            raise
        otel_context.detach(token)
        first = ctx.first_chunk_at if streaming else None
        instruments.finish_chat(chat, response, first_chunk_at=first)
        return response

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        turn: _TurnTelemetry | None = ctx.turn.scratch.get(self)
        if turn is None:
            return await call_next(call)
        instruments: Instruments = turn.instruments
        name = self._tool_names.get(call.name)
        if name is None:
            if len(self._tool_names) >= _MAX_TOOL_NAMES:
                self._tool_names.clear()
            name = self._tool_names[call.name] = f"execute_tool {call.name}"
        span = instruments.tracer.start_span(
            name,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
            },
        )
        capture = instruments.capture_content
        memo = turn.cursor.memo
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            result = await call_next(call)
        except PauseTurn:  # the tool's call is held (a paused subagent): not a failure
            otel_context.detach(token)
            span.set_attribute("plait.tool.paused", True)
            span.end()
            raise
        except BaseException as exc:
            otel_context.detach(token)
            if capture and span.is_recording():
                arguments = memo.text(call.id, call.args, instruments.max_chars)
                span.set_attribute("gen_ai.tool.call.arguments", arguments)
            fail(span, exc)
            span.end()
            raise
        otel_context.detach(token)
        if (result.is_error or capture) and span.is_recording():
            # One call into the SDK for everything the result adds.
            attributes: dict[str, Any] = {}
            if capture:
                max_chars = instruments.max_chars
                attributes["gen_ai.tool.call.arguments"] = memo.text(call.id, call.args, max_chars)
                attributes["gen_ai.tool.call.result"] = memo.text(call.id, result.data, max_chars)
            if result.is_error:
                attributes["error.type"] = "tool_error"
                span.set_status(trace.Status(trace.StatusCode.ERROR, "the tool returned an error"))
            span.set_attributes(attributes)
        span.end()
        return result


def _skipped_call(event: Event) -> bool:
    return event.type == "tool_call_finished" and getattr(event, "skipped_by", None) is not None


def _add_event(event: Event, capture: bool) -> None:
    """``event`` as a span event on the current span (only if that span records)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    if event.type == _RETRIED:
        span.add_event("plait.provider_retry", retry_attributes(event))  # type: ignore[arg-type]
        return
    name = "plait.tool_call_skipped" if _skipped_call(event) else f"plait.{event.type}"
    span.add_event(name, _event_attributes(event, capture))


def _event_attributes(event: Event, capture: bool) -> dict[str, Any]:
    """The scalar facts of ``event`` as ``plait.*`` attributes: numbers and flags as they are,
    short texts clipped, lists of names, a tool call as its name and id, an error as its type
    and message. Text fields that may hold content (model text, raw arguments) only with
    ``capture`` on."""
    attributes: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        if f.name == "type" or (f.name in _CONTENT_FIELDS and not capture):
            continue
        _put(attributes, f"plait.{f.name}", getattr(event, f.name))
    return attributes


def _put(attributes: dict[str, Any], key: str, value: Any) -> None:
    put: Callable[[str, Any], None] = attributes.__setitem__
    if isinstance(value, (bool, int, float)):
        put(key, value)
    elif isinstance(value, str):
        put(key, value[:_MAX_EVENT_TEXT])
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        put(key, [v[:_MAX_EVENT_TEXT] for v in value[:_MAX_EVENT_ITEMS]])
    elif isinstance(value, ToolCall):
        put("gen_ai.tool.name", value.name)
        put("gen_ai.tool.call.id", value.id)
    elif isinstance(value, BaseException):
        put("error.type", type(value).__qualname__)
        put(f"{key}.message", str(value)[:_MAX_EVENT_TEXT])
