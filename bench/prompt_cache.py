"""Prompt caching over a scripted 60-turn session (issue 25), against the local Anthropic wire
server (``tests/support/anthropic_server.py``), which implements Anthropic's caching rule:
prefix match at ``cache_control`` breakpoints with a 20-block look-back, writes and reads in
usage, 1,024-token minimum.

Each turn the model reads a file (results of mixed size: 300, 1,500 or 9,000 characters) and
answers; a skills catalog (disclosure mode, 40 skills) sits in the system prompt. Run twice:
``plain`` (no summarization, no eviction) and ``context`` (``ResultEvictionMiddleware`` at 1,000
tokens and ``SummarizationMiddleware`` at 8,000 tokens firing), each with caching off
(``AnthropicModel(cache=None)``) and on (the default). ``CacheWatch`` reports every cache break
and where it came from. Prints input tokens billed fresh, cache writes, cache reads, input cost
at claude-sonnet-4-5 list prices and that cost against the same tokens uncached; then whether
the facts planted in turns 1, 20 and 40 are still within reach (in the last request, or in a
file the last request names).

    .venv/bin/python bench/prompt_cache.py [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))

from anthropic_server import AnthropicServer

from plait import Agent
from plait.backends import MemoryBackend
from plait.context import ResultEvictionMiddleware, SummarizationMiddleware
from plait.messages import Usage
from plait.middleware.base import Middleware
from plait.models.anthropic import AnthropicModel
from plait.pricing import PRICES, Price
from plait.runtime import CacheBroken, CacheWatch
from plait.skills import SkillsMiddleware
from plait.tools import tool

PRICE: Price = PRICES["claude-sonnet-4-5"]
FACTS = {1: "the vault code is 4417", 20: "the ferry leaves at 06:40", 40: "Mara owns the kiln"}
SIZES = (300, 1_500, 9_000)


@tool
def read_report(turn: int) -> str:
    """Read the report of one turn."""
    size = SIZES[turn % len(SIZES)]
    fact = FACTS.get(turn, "")
    line = f"report {turn}: row data, nothing unusual here. "
    body = (line * (size // len(line) + 1))[:size]
    return f"{fact}. {body}" if fact else body


def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if any(b.get("type") == "tool_result" for b in blocks):
        return [{"type": "text", "text": "Noted; the report is read."}]
    text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    turn = int(text.rsplit("#", 1)[-1]) if "#" in text else 0
    return [{"type": "tool_use", "name": "read_report", "input": {"turn": turn}}]


def skills_folder(root: Path) -> Path:
    for i in range(40):
        folder = root / f"skill-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:02d}\ndescription: Handles report kind {i} with care and "
            f"checks the figures of kind {i} twice.\n---\n\nSteps for kind {i}.\n"
        )
    return root


async def session(
    server: AnthropicServer, turns: int, *, cache: bool, context: bool, skills: Path
) -> tuple[Usage, Counter[str], str]:
    options: dict[str, Any] = {} if cache else {"cache": None}
    model = AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=server.url, **options)
    middleware: list[Middleware] = []
    backend = MemoryBackend()
    if context:
        middleware.append(SummarizationMiddleware(8_000, keep_messages=8, backend=backend))
        middleware.append(ResultEvictionMiddleware(1_000, backend=backend))
    middleware += [SkillsMiddleware([skills]), CacheWatch()]
    agent = Agent(
        model, tools=[read_report], middleware=middleware, system_prompt="You read reports."
    )
    thread = f"{'on' if cache else 'off'}-{'ctx' if context else 'plain'}"
    usage = Usage()
    breaks: Counter[str] = Counter()
    last_request = ""
    for turn in range(1, turns + 1):
        result = await agent.run(f"Read the report of turn #{turn}", thread_id=thread)
        usage = usage + result.usage
        for event in result.events:
            if isinstance(event, CacheBroken):
                breaks[f"{event.where}: {event.reason}"] += 1
    for m in middleware:
        if isinstance(m, SummarizationMiddleware):
            await m.drain()
    last_request = str(server.received[-1].body)
    reachable = last_request
    for path in await backend.ls(""):
        if path in last_request or path.rsplit("/", 1)[0] + "/" in last_request:
            reachable += await backend.read(path)
    await model.aclose()
    return usage, breaks, reachable


def fresh(usage: Usage) -> int:
    return usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens


def input_cost(usage: Usage) -> float:
    read = PRICE.cache_read if PRICE.cache_read is not None else PRICE.input
    write = PRICE.cache_write if PRICE.cache_write is not None else PRICE.input
    return (
        fresh(usage) * PRICE.input
        + usage.cache_read_tokens * read
        + usage.cache_write_tokens * write
    ) / 1e6


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    turns = parser.parse_args().turns
    header = (
        f"{'run':<10}{'caching':<9}{'input':>10}{'fresh':>10}{'writes':>10}{'reads':>10}"
        f"{'read %':>8}{'input $':>10}{'x uncached':>11}  facts"
    )
    print(header)
    all_breaks: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        skills = skills_folder(Path(tmp) / "skills")
        for context in (False, True):
            for cache in (False, True):
                with AnthropicServer(brain) as server:
                    usage, breaks, last = await session(
                        server, turns, cache=cache, context=context, skills=skills
                    )
                name = "context" if context else "plain"
                uncached = usage.input_tokens * PRICE.input / 1e6
                share = usage.cache_read_tokens / max(usage.input_tokens, 1)
                reach = sum(1 for fact in FACTS.values() if fact in last)
                print(
                    f"{name:<10}{'on' if cache else 'off':<9}{usage.input_tokens:>10,}"
                    f"{fresh(usage):>10,}{usage.cache_write_tokens:>10,}"
                    f"{usage.cache_read_tokens:>10,}{share:>8.1%}{input_cost(usage):>10.4f}"
                    f"{input_cost(usage) / uncached:>11.3f}  {reach}/{len(FACTS)}"
                )
                all_breaks[f"{name}, caching {'on' if cache else 'off'}"] = breaks
    print("\ncache breaks (CacheWatch), by where and why")
    for run, breaks in all_breaks.items():
        shown = ", ".join(f"{why} x{n}" for why, n in breaks.most_common()) or "none"
        print(f"  {run}: {shown}")
    print(
        "\ndeepagents (QUOTED from issue 25, not measured here): 95.4% of input read from cache "
        "on a 40-call tool session, 0.153x the uncached cost, ~10k characters of built-in tool "
        "schemas on every call."
    )


if __name__ == "__main__":
    asyncio.run(main())
