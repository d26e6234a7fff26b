"""What the context battery keeps within the model's reach, and what measuring costs.

* **History recall**: a 60-turn session, one large log result per turn with a fact planted in its
  middle, summarization alone (``max_input_tokens=3000``, ``keep_messages=4``, memory backend).
  Printed: passes, facts still in the last request, facts the model reaches by following the
  summary (listing the history folder, paging every file with ``read_evicted_result``), and the
  model calls that took.
* **Thresholds on CSV text**: a provider that bills 1.9 characters per token (BPE on CSV rows);
  six turns of one CSV export each against a 10,000-token window. Printed: the largest request
  sent with the thread's measured ratio (the default) and with the fixed chars/4 estimate.
* **Cost of measuring**: ``RatioMeter.record`` per dispatch at 1k and 10k messages, the request
  grown by two messages since the meter's previous call (as in a turn loop), and the first call
  on a list it has not seen (O(messages)). Median of 15 runs.

Run: ``python bench/context_reach.py``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import statistics
import time
from typing import Any

from plait import (
    Agent,
    DispatchContext,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    TurnContext,
    Usage,
    UserMessage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import CharEstimator, SummarizationMiddleware
from plait.context.offload import READ_TOOL_NAME
from plait.context.ratio import RatioMeter
from plait.context.summarization import STATE_KEY, SUMMARY_SOURCE, SummaryRecord
from plait.models.base import ModelResponse
from plait.tokens import message_text
from plait.tools import ToolRegistry

TURNS = 60
NEXT_PAGE = re.compile(r"^\[(.+): characters \d+-(\d+); more follows")


def fact(i: int) -> str:
    return f"FACT-{i:02d}=code{i * 7919:06d}"


@tool
def fetch_log(day: int) -> str:
    """Fetch the log of one day."""
    lines = [f"2026-01-{day % 28 + 1:02d} 12:{n:02d} worker-{n % 7} ok id={n}" for n in range(60)]
    lines.insert(30, fact(day))
    return "\n".join(lines)


def recall_model(seen: list[str]) -> FunctionModel:
    def answer(request: ModelRequest) -> Any:
        seen.extend(m.text for m in request.messages)
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("day "):
            day = int(last.text.split()[1])
            return [ToolCall(f"f{day}", "fetch_log", {"day": day})]
        if isinstance(last, UserMessage):
            summary = next(
                m for m in request.messages if m.metadata.get("source") == SUMMARY_SOURCE
            )
            found = re.search(rf'{READ_TOOL_NAME}\(path="([^"]+)"\) lists', summary.text)
            assert found is not None
            return [ToolCall(f"r{len(seen)}", READ_TOOL_NAME, {"path": found.group(1)})]
        calls: list[ToolCall] = []
        for m in reversed(request.messages):
            if not isinstance(m, ToolMessage):
                break
            header, _, body = m.text.partition("\n")
            if m.name == READ_TOOL_NAME and header.endswith("read one by its path]"):
                paths = body.splitlines()
                calls += [
                    ToolCall(f"r{len(calls)}-{p}", READ_TOOL_NAME, {"path": p}) for p in paths
                ]
            elif m.name == READ_TOOL_NAME and (more := NEXT_PAGE.search(header)):
                args = {"path": more.group(1), "offset": int(more.group(2))}
                calls.append(ToolCall(f"p{len(seen)}-{len(calls)}", READ_TOOL_NAME, args))
        return calls or "ok"

    return FunctionModel(answer)


async def history_recall() -> None:
    seen: list[str] = []
    model = recall_model(seen)
    summarization = SummarizationMiddleware(3000, keep_messages=4, backend=MemoryBackend())
    agent = Agent(model, tools=[fetch_log], middleware=[summarization])
    for day in range(TURNS):
        await agent.run(f"day {day}", thread_id="ops")
    await summarization.drain()
    snapshot = await agent.store.load("ops")
    record = SummaryRecord.from_state(snapshot.state.get(STATE_KEY))
    last = "\n".join(m.text for m in model.requests[-1].messages)
    in_context = sum(fact(i) in last for i in range(TURNS))
    seen.clear()
    before = len(model.requests)
    await agent.run("recall every fact", thread_id="ops")
    reach = "\n".join(seen)
    print("history recall (60 turns, summarization alone)")
    print(f"  summarization passes            {record.passes if record else 0}")
    print(f"  facts in the last request       {in_context} / {TURNS}")
    print(
        f"  facts reached via the summary   {sum(fact(i) in reach for i in range(TURNS))} / {TURNS}"
    )
    print(f"  model calls for the recall      {len(model.requests) - before}")


def csv_rows(n: int, seed: int) -> str:
    return "".join(f"{seed + i},2026-01-01,{(i * 37) % 1000},ok,{i % 7}\n" for i in range(n))


def billed(request: ModelRequest) -> int:
    chars = len(request.system_prompt) + sum(len(message_text(m)) for m in request.messages)
    chars += sum(
        len(t.name) + len(t.description) + len(json.dumps(t.parameters, separators=(",", ":")))
        for t in request.tools
    )
    return math.ceil(chars / 1.9) + 4 * (len(request.messages) + len(request.tools))


async def largest_request(rows: int, *, fixed: bool) -> int:
    sent: list[int] = []

    @tool
    def export_page(part: int) -> str:
        """Export one page of a table as CSV."""
        return csv_rows(rows, part * 1000)

    def model(request: ModelRequest) -> ModelResponse:
        sent.append(billed(request))
        usage = Usage(input_tokens=sent[-1])
        if isinstance(request.messages[-1], UserMessage):
            call = ToolCall(f"c{len(sent)}", "export_page", {"part": len(sent)})
            return ModelResponse(tool_calls=[call], usage=usage)
        return ModelResponse(content="noted", usage=usage)

    counter = CharEstimator() if fixed else None
    mw = SummarizationMiddleware(10_000, keep_messages=2, counter=counter)
    agent = Agent(FunctionModel(model), tools=[export_page], middleware=[mw])
    for part in range(6):
        await agent.run(f"export part {part}", thread_id="t")
    return max(sent)


async def thresholds() -> None:
    print("largest request sent, 10,000-token window, CSV at 1.9 chars/token (billed tokens)")
    print(f"  {'rows per result':>16} {'measured ratio':>15} {'fixed chars/4':>14}")
    for rows in (300, 400, 500, 550):
        measured = await largest_request(rows, fixed=False)
        fixed = await largest_request(rows, fixed=True)
        print(f"  {rows:>16} {measured:>15,} {fixed:>14,}")


def measuring_cost() -> None:
    print("RatioMeter.record per dispatch (median of 15 runs, microseconds)")
    print(f"  {'messages':>8} {'grown by 2':>11} {'first call':>11}")
    for n in (1_000, 10_000):
        base: list[Message] = [UserMessage(f"message {i} " * 10) for i in range(n)]
        grown, first = [], []
        for run in range(15):
            meter = RatioMeter()
            first.append(timed(meter, base))
            grown.append(timed(meter, [*base, UserMessage("a"), UserMessage(f"b {run}")]))
        print(f"  {n:>8} {statistics.median(grown):>11,.0f} {statistics.median(first):>11,.0f}")


def timed(meter: RatioMeter, messages: list[Message]) -> float:
    turn = TurnContext(
        thread_id="t", registry=ToolRegistry(), model=ScriptedModel([]), messages=[], state={}
    )
    ctx = DispatchContext(turn, 0)
    ctx.request = ModelRequest(messages)
    ctx.response = ModelResponse(content="ok", usage=Usage(input_tokens=40 * len(messages)))
    start = time.perf_counter()
    meter.record(ctx)
    return (time.perf_counter() - start) * 1e6


async def main() -> None:
    await history_recall()
    print()
    await thresholds()
    print()
    measuring_cost()


if __name__ == "__main__":
    asyncio.run(main())
