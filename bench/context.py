"""Context battery costs: one summarization pass, per-dispatch token accounting, eviction.

* **Summarization pass** over a 10,000-message history of mixed tool calls (user, assistant
  with two calls, two results, assistant text): one ``before_model_call`` that crosses the
  threshold and folds ~9,994 messages. Measured with and without provider-reported usage (without
  it, the first estimate counts the whole history once). Budget: 50 ms.
* **Accounting per dispatch**: the history grows by two messages per dispatch and
  ``before_model_call`` runs below the threshold; the cost must not depend on history length
  (1k vs 10k messages), with provider usage as the anchor and without it (the accountant's own
  checkpoint).
* **Eviction of a 10 MB result** vs a plain ``MemoryBackend.write`` of it. Budget: 2x.

Median of several runs. Run: ``python bench/context.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable

from plait import (
    AssistantMessage,
    DispatchContext,
    Message,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    ToolResult,
    TurnContext,
    Usage,
    UserMessage,
)
from plait.backends import MemoryBackend
from plait.context import ResultEvictionMiddleware, SummarizationMiddleware
from plait.tools import ToolRegistry

RUNS = 7


def history(n: int, *, usage: bool) -> list[Message]:
    out: list[Message] = []
    i = 0
    while len(out) < n:
        reported = Usage(input_tokens=40 * len(out) + 500) if usage else None
        out += [
            UserMessage(f"step {i}: please look into item {i} and report back"),
            AssistantMessage(
                "Checking.",
                tool_calls=[
                    ToolCall(f"a{i}", "search", {"query": f"item {i}", "limit": 10}),
                    ToolCall(f"b{i}", "read_file", {"path": f"docs/item_{i}.md"}),
                ],
                usage=reported,
            ),
            ToolMessage(f"a{i}", "search", {"hits": [f"doc {j}" for j in range(5)]}),
            ToolMessage(f"b{i}", "read_file", "Item notes. " * 20),
            AssistantMessage(f"Item {i} looks fine.", usage=reported),
        ]
        i += 1
    return out[:n]


def make_ctx(messages: list[Message]) -> DispatchContext:
    turn = TurnContext(
        thread_id="bench",
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=messages,
        state={},
    )
    return DispatchContext(turn, 0)


async def timed(work: Awaitable[object]) -> float:
    start = time.perf_counter()
    await work
    return time.perf_counter() - start


async def summarization_pass(usage: bool) -> float:
    samples = []
    for _ in range(RUNS):
        messages = history(10_000, usage=usage)
        ctx = make_ctx(messages)
        mw = SummarizationMiddleware(50_000, keep_messages=6)
        samples.append(await timed(mw.before_model_call(ModelRequest(list(messages)), ctx)))
        assert mw.record(ctx.turn) is not None, "the pass did not run"
    return statistics.median(samples)


async def accounting(n: int, usage: bool, dispatches: int = 200) -> float:
    """Median cost of one below-threshold ``before_model_call`` as the history grows."""
    messages = history(n, usage=usage)
    ctx = make_ctx(messages)
    mw = SummarizationMiddleware(10**9)
    await mw.before_model_call(ModelRequest(list(messages)), ctx)  # warm: first full count
    samples = []
    for i in range(dispatches):
        messages += [
            UserMessage(f"follow-up {i}"),
            AssistantMessage("ok", usage=Usage(input_tokens=50_000 + i) if usage else None),
        ]
        request = ModelRequest(messages)  # the runtime builds this list anyway
        start = time.perf_counter()
        await mw.before_model_call(request, ctx)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def eviction() -> tuple[float, float]:
    blob = ("0123456789abcdef" * 64 + "\n") * 10_000  # ~10 MB
    plain, evicted = [], []
    for _ in range(RUNS):
        backend = MemoryBackend()
        plain.append(await timed(backend.write("plain/blob", blob)))
        mw = ResultEvictionMiddleware(backend=MemoryBackend())
        call, result = ToolCall("c1", "dump", {}), ToolResult("c1", blob)
        ctx = make_ctx([])
        evicted.append(await timed(mw.after_tool_call(call, result, ctx)))
    return statistics.median(plain), statistics.median(evicted)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


async def main() -> None:
    rows: list[tuple[str, str, str]] = []
    for usage in (False, True):
        label = "with usage" if usage else "no usage"
        rows.append(
            (
                f"summarization pass, 10k messages ({label})",
                ms(await summarization_pass(usage)),
                "<= 50 ms",
            )
        )
    for usage in (False, True):
        label = "usage anchor" if usage else "own checkpoint"
        small = await accounting(1_000, usage)
        large = await accounting(10_000, usage)
        rows.append((f"accounting per dispatch, 1k msgs ({label})", ms(small), ""))
        rows.append(
            (
                f"accounting per dispatch, 10k msgs ({label})",
                ms(large),
                f"ratio {large / small:.2f}",
            )
        )
    plain, evicted = await eviction()
    rows.append(("MemoryBackend.write of 10 MB", ms(plain), ""))
    rows.append(("evict a 10 MB result", ms(evicted), f"{evicted / plain:.2f}x write (<= 2x)"))
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'median':>11}  note")
    print(f"{'-' * width}  {'-' * 11}  {'-' * 24}")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>11}  {note}")


if __name__ == "__main__":
    asyncio.run(main())
