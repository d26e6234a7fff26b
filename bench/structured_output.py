"""What a structured output adds to a turn (issue 24), against the same turn answering text.

One turn = one model call (a fake model that answers at once) on a fresh thread, memory store,
default agent. Configurations, interleaved round by round (rotating order), each run ``--turns``
turns; a run's figure is its median turn, a configuration's the median of its runs, an added
cost the median over rounds of the paired difference with ``text`` (same round):

* ``text``: ``Agent(model)`` answering a short text (the baseline);
* ``native``: ``output_type=Ticket``, ``output_mode="native"``: the JSON answer is validated;
* ``tool``: ``output_type=Ticket``: the model calls ``final_result``, which runs as a tool;
* ``native, streamed 20 KB``: ``agent.stream`` with a 20 KB JSON answer in word-sized deltas,
  partial parses for ``OutputDeltaReceived`` included (paired with ``text, streamed 20 KB``).

Run: ``python bench/structured_output.py [--rounds 9] [--turns 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from plait import Agent, ModelRequest, ModelResponse, ToolCall
from plait.models.base import StreamEvent
from plait.models.scripted import stream_response


class Ticket(BaseModel):
    title: str
    priority: int
    notes: list[str] = []


SHORT = {"title": "Disk full", "priority": 2, "notes": ["a", "b"]}
LONG = {"title": "Disk full", "priority": 2, "notes": [f"note number {i}" for i in range(1200)]}


class Fixed:
    """Answers every call with the same response."""

    name = "fixed"

    def __init__(self, response: ModelResponse) -> None:
        self.response = response

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return self.response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in stream_response(self.response):
            yield event

    async def aclose(self) -> None:
        pass


def configurations() -> dict[str, tuple[Agent[Any], bool]]:
    long_text = json.dumps(LONG)
    return {
        "text": (Agent(Fixed(ModelResponse(content="Disk full, priority 2."))), False),
        "native": (
            Agent(
                Fixed(ModelResponse(content=json.dumps(SHORT))),
                output_type=Ticket,
                output_mode="native",
            ),
            False,
        ),
        "tool": (
            Agent(
                Fixed(ModelResponse(tool_calls=[ToolCall("c1", "final_result", SHORT)])),
                output_type=Ticket,
            ),
            False,
        ),
        "text, streamed 20 KB": (Agent(Fixed(ModelResponse(content=long_text))), True),
        "native, streamed 20 KB": (
            Agent(
                Fixed(ModelResponse(content=long_text)), output_type=Ticket, output_mode="native"
            ),
            True,
        ),
    }


async def one_run(agent: Agent[Any], streamed: bool, turns: int) -> float:
    times = []
    for i in range(turns):
        start = time.perf_counter()
        if streamed:
            async for _ in agent.stream("file it", thread_id=f"t{i}"):
                pass
        else:
            await agent.run("file it", thread_id=f"t{i}")
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


async def main(rounds: int, turns: int) -> None:
    names = list(configurations())
    results: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        configs = configurations()  # fresh stores each round
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            agent, streamed = configs[name]
            results[name].append(await one_run(agent, streamed, turns))
    baseline = {
        "native": "text",
        "tool": "text",
        "native, streamed 20 KB": "text, streamed 20 KB",
    }
    print(f"{'configuration':<26} {'turn (µs)':>10} {'added (µs)':>11}")
    for name in names:
        median = statistics.median(results[name])
        base = baseline.get(name)
        added = (
            f"{statistics.median(a - b for a, b in zip(results[name], results[base], strict=True)):>11.0f}"  # noqa: E501
            if base
            else f"{'-':>11}"
        )
        print(f"{name:<26} {median:>10.0f} {added}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.turns))
