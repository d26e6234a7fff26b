"""Writing middleware: a redaction seam, a timing wrapper and a turn-level audit pipeline.

Run: python examples/custom_middleware.py
"""

import asyncio
import time

from plait import (
    Agent,
    DispatchContext,
    Middleware,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolResult,
    TurnContext,
    tool,
)
from plait.middleware import ModelHandler, Next


@tool
def lookup_customer(email: str) -> dict[str, str]:
    """Find a customer by email."""
    return {"name": "Ada", "email": email, "card": "4111 1111 1111 1111"}


class RedactCards(Middleware):
    """after_tool_call: card numbers never reach the model or the thread store."""

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        if isinstance(result.data, dict) and "card" in result.data:
            data = {**result.data, "card": "•••• " + result.data["card"][-4:]}
            return ToolResult(result.tool_call_id, data, result.is_error)
        return result


class TimeModelCalls(Middleware):
    """wrap_model_call: measure each model call (the first registered wrapper is outermost)."""

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        start = time.perf_counter()
        response = await call_next(request)
        print(f"  model call {ctx.index}: {(time.perf_counter() - start) * 1e6:.0f} µs")
        return response


class Audit(Middleware):
    """turn_input / turn_output pipelines: once per turn, around everything else."""

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        print(f"turn starts on thread {ctx.thread_id!r} with {len(ctx.messages)} message(s)")
        await next()

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        await next()
        print(f"turn ends after {ctx.dispatch_count} model call(s)")


async def main() -> None:
    model = ScriptedModel(
        [ToolCall("c1", "lookup_customer", {"email": "ada@example.com"}), "Found Ada."]
    )
    agent = Agent(
        model, tools=[lookup_customer], middleware=[Audit(), TimeModelCalls(), RedactCards()]
    )
    result = await agent.run("Who is ada@example.com?", thread_id="support")
    stored = await agent.store.load("support")
    print("answer:", result.output)
    print("stored tool result:", stored.messages[2].data)  # type: ignore[union-attr]


asyncio.run(main())
