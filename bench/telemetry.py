"""Per-turn cost of ``GenAITelemetry``, measured the ``bench/overhead.py`` way.

A turn is one trip round the loop (model call → one tool call → next model call); the fake model
and tool take timestamps, so the figure is the framework's share only. Configurations run
interleaved round by round; an added cost is the median over rounds of the paired difference
with ``default agent`` (same round).

* ``default agent``: ``Agent(...)`` with no telemetry (today);
* ``enabled=False``: ``GenAITelemetry(enabled=False)`` in the list (no hook in the chain);
* ``telemetry off``: ``GenAITelemetry()`` in the list but no SDK installed (the API's proxy
  providers): each turn pays the flag check in ``turn_input`` and a dict lookup per wrapper;
* ``on, no-op exporter``: an SDK ``TracerProvider`` with a ``SimpleSpanProcessor`` whose
  exporter drops every span (export runs synchronously, the worst case) and an SDK
  ``MeterProvider`` with a reader that is never collected;
* ``on + content``: the same with content capture on (only new messages per model call);
* ``SDK floor``: a hand-written middleware making the same spans (same names, kinds and
  attributes, each made current the same way) and the same duration record on the same SDK
  providers, and nothing else: what the OpenTelemetry SDK itself costs. ``plait's share`` is
  ``on, no-op exporter`` minus ``SDK floor`` (median of the paired differences);
* ``on, batch processor``: ``on, no-op exporter`` with a ``BatchSpanProcessor`` (what
  production setups use: ending a span only queues it), for reference.

``... turns: last 100`` is the median of the last hundred turns of the long run: if content
capture re-serialized the history per call it would grow here.

Run: ``python bench/telemetry.py [--rounds 15] [--short 10] [--long 1000]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.trace import SpanKind
from overhead import Config, agent_config, measure, paired

from plait import DispatchContext, Middleware, ModelRequest, ModelResponse, ToolCall, ToolResult
from plait.middleware import ModelHandler, Next, ToolHandler, TurnContext
from plait.telemetry import GenAITelemetry

TARGETS = {
    "enabled=False": 1.0,
    "telemetry off": 1.0,
    "on, no-op exporter": 60.0,
    "on + content": 60.0,
}


class DropSpans(SpanExporter):
    """An exporter that accepts every span and does nothing with it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def sdk(batch: bool = False) -> tuple[TracerProvider, MeterProvider]:
    tracer_provider = TracerProvider()
    processor = BatchSpanProcessor if batch else SimpleSpanProcessor
    tracer_provider.add_span_processor(processor(DropSpans()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


class SdkFloor(Middleware):
    """The spans and the duration record ``GenAITelemetry`` makes for this bench's turns, written
    by hand with nothing else: the OpenTelemetry SDK's own cost for them."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
        self.tracer = tracer_provider.get_tracer("floor")
        self.duration = meter_provider.get_meter("floor").create_histogram(
            "gen_ai.client.operation.duration", unit="s"
        )
        self.metric = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "stamped",
            "gen_ai.request.model": "stamped",
        }
        self.chat = {
            **self.metric,
            "gen_ai.conversation.id": "bench",
            "gen_ai.request.stream": False,
        }

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        span = self.tracer.start_span(
            "invoke_agent plait",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "plait"},
        )
        token = otel_context.attach(trace.set_span_in_context(span))

        def finish(error: BaseException | None) -> None:
            span.end()
            otel_context.detach(token)

        ctx.finalizers.append(finish)
        await next()

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        start = time.perf_counter()
        span = self.tracer.start_span("chat stamped", kind=SpanKind.CLIENT, attributes=self.chat)
        token = otel_context.attach(trace.set_span_in_context(span))
        response = await call_next(request)
        otel_context.detach(token)
        output: dict[str, Any] = {
            "gen_ai.usage.input_tokens": 0,
            "gen_ai.usage.output_tokens": 0,
            "gen_ai.response.finish_reasons": (response.finish_reason,),
        }
        span.set_attributes(output)
        span.end()
        self.duration.record(time.perf_counter() - start, self.metric)
        return response

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        span = self.tracer.start_span(
            f"execute_tool {call.name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
            },
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        result = await call_next(call)
        otel_context.detach(token)
        span.end()
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=1000)
    args = parser.parse_args()
    tracer_provider, meter_provider = sdk()
    batch_tracer_provider, batch_meter_provider = sdk(batch=True)

    def on(content: bool, batch: bool = False) -> GenAITelemetry:
        return GenAITelemetry(
            tracer_provider=batch_tracer_provider if batch else tracer_provider,
            meter_provider=batch_meter_provider if batch else meter_provider,
            capture_content=content,
        )

    configs: dict[str, Config] = {
        "default agent": agent_config(list),
        "enabled=False": agent_config(lambda: [GenAITelemetry(enabled=False)]),
        "telemetry off": agent_config(lambda: [GenAITelemetry()]),
        "on, no-op exporter": agent_config(lambda: [on(False)]),
        "on + content": agent_config(lambda: [on(True)]),
        "SDK floor": agent_config(lambda: [SdkFloor(tracer_provider, meter_provider)]),
        "on, batch processor": agent_config(lambda: [on(False, batch=True)]),
    }
    short, _ = measure(configs, args.short, args.rounds, tail=args.short)
    long_rounds = max(3, args.rounds // 3)
    long, last = measure(configs, args.long, long_rounds, tail=100)
    print(
        f"added cost per turn, µs (median of paired differences with 'default agent'; "
        f"{args.rounds} rounds of {args.short} turns, {long_rounds} rounds of {args.long:,})"
    )
    cols = (f"{args.short} turns", f"{args.long:,} turns", f"{args.long:,}: last 100")
    print(f"{'configuration':<22}{cols[0]:>12}{cols[1]:>14}{cols[2]:>16}  target")
    base = [statistics.median(m["default agent"]) for m in (short, long, last)]
    print(f"{'default agent (abs.)':<22}{base[0]:>12.1f}{base[1]:>14.1f}{base[2]:>16.1f}  -")
    for name, target in TARGETS.items():
        values = [paired(m, name, "default agent") for m in (short, long, last)]
        print(
            f"{name:<22}{values[0]:>12.1f}{values[1]:>14.1f}{values[2]:>16.1f}  ≤ {target:.0f} µs"
        )
    for name in ("SDK floor", "on, batch processor"):
        values = [paired(m, name, "default agent") for m in (short, long, last)]
        print(f"{name:<22}{values[0]:>12.1f}{values[1]:>14.1f}{values[2]:>16.1f}  -")
    share = [paired(m, "on, no-op exporter", "SDK floor") for m in (short, long, last)]
    label = "plait's share"
    print(f"{label:<22}{share[0]:>12.1f}{share[1]:>14.1f}{share[2]:>16.1f}  -")
    tracer_provider.shutdown()
    batch_tracer_provider.shutdown()


if __name__ == "__main__":
    main()
