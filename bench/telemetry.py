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
* ``on + content``: the same with content capture on (only new messages per model call).

``... turns: last 100`` is the median of the last hundred turns of the long run: if content
capture re-serialized the history per call it would grow here.

Run: ``python bench/telemetry.py [--rounds 15] [--short 10] [--long 1000]``.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from overhead import Config, agent_config, measure, paired

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


def sdk() -> tuple[TracerProvider, MeterProvider]:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(DropSpans()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=1000)
    args = parser.parse_args()
    tracer_provider, meter_provider = sdk()

    def on(content: bool) -> GenAITelemetry:
        return GenAITelemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            capture_content=content,
        )

    configs: dict[str, Config] = {
        "default agent": agent_config(list),
        "enabled=False": agent_config(lambda: [GenAITelemetry(enabled=False)]),
        "telemetry off": agent_config(lambda: [GenAITelemetry()]),
        "on, no-op exporter": agent_config(lambda: [on(False)]),
        "on + content": agent_config(lambda: [on(True)]),
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


if __name__ == "__main__":
    main()
