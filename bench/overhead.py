"""Framework overhead per dispatch, and ``import plait`` time.

A turn of 200 dispatches with a scripted model (one trivial tool call per dispatch), with 0 and
with 5 pass-through middlewares that implement every seam and pipeline. Overhead is the turn's
wall time minus the time spent inside the model and the tool bodies, divided by the dispatches.
Median of 5 runs. Run: ``python bench/overhead.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator

from plait import (
    Agent,
    DispatchContext,
    Limits,
    Middleware,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    TurnContext,
    tool,
)
from plait.middleware import ModelHandler, Next, ToolHandler
from plait.models.base import StreamEvent
from plait.models.scripted import stream_response

DISPATCHES = 200
RUNS = 5


class Clock:
    inside = 0.0


class TimedModel:
    """Calls a tool on every dispatch but the last; accumulates time spent inside itself."""

    name = "timed"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: ModelRequest) -> ModelResponse:
        start = time.perf_counter()
        self.calls += 1
        if self.calls >= DISPATCHES:
            response = ModelResponse(content="done")
        else:
            response = ModelResponse(tool_calls=[ToolCall(f"c{self.calls}", "noop", {"n": 1})])
        Clock.inside += time.perf_counter() - start
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in stream_response(await self.generate(request)):
            yield event


@tool
def noop(n: int) -> int:
    """Return n."""
    start = time.perf_counter()
    Clock.inside += time.perf_counter() - start
    return n


class PassThrough(Middleware):
    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        await next()

    async def dispatch_input(self, ctx: DispatchContext, next: Next) -> None:
        await next()

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        return request

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        return await call_next(request)

    async def after_model_call(
        self, response: ModelResponse, request: ModelRequest, ctx: DispatchContext
    ) -> ModelResponse:
        return response

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        return call

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        return await call_next(call)

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        return result

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        await next()

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        await next()


async def one_run(middleware_count: int) -> float:
    agent = Agent(
        TimedModel(),
        tools=[noop],
        middleware=[PassThrough() for _ in range(middleware_count)],
        limits=Limits(max_dispatches=DISPATCHES),
    )
    Clock.inside = 0.0
    start = time.perf_counter()
    result = await agent.run("go", thread_id="bench")
    total = time.perf_counter() - start
    assert result.output == "done"
    return (total - Clock.inside) / DISPATCHES * 1e6


def per_dispatch_us(middleware_count: int) -> float:
    asyncio.run(one_run(middleware_count))  # warm-up
    return statistics.median(asyncio.run(one_run(middleware_count)) for _ in range(RUNS))


def import_ms() -> float:
    code = "import time; t = time.perf_counter(); import plait; print(time.perf_counter() - t)"
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(RUNS)
    ]
    return statistics.median(runs) * 1e3


def main() -> None:
    rows = [
        (f"overhead per dispatch, {n} middleware", f"{per_dispatch_us(n):.1f} µs", target)
        for n, target in ((0, "-"), (5, "≤ 100 µs"))
    ]
    rows.append(("import plait", f"{import_ms():.1f} ms", "≤ 150 ms"))
    width = max(len(r[0]) for r in rows)
    print(f"{'figure (median of 5)':<{width}}  {'value':>10}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>10}  {target}")


if __name__ == "__main__":
    main()
