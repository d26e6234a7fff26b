"""Prompt caching over a scripted 60-turn session (issue 25), against the local wire servers,
which implement each provider's caching rule: Anthropic's (``tests/support/anthropic_server.py``
with ``anthropic_cache_rule``: prefix match at ``cache_control`` breakpoints with a 20-block
look-back, writes and reads in usage, 1,024-token minimum) and OpenAI's
(``tests/support/responses_server.py`` with ``openai_cache_rule``: automatic prefix match in
128-token steps above 1,024 tokens, per ``prompt_cache_key``).

Each turn the model reads a report (results of mixed size: 300, 1,500 or 9,000 characters) and
answers; a skills catalog (disclosure mode, 40 skills) follows the system prompt. Runs:

- ``plain``: no summarization, no eviction;
- ``context``: ``ResultEvictionMiddleware`` at 1,000 tokens and ``SummarizationMiddleware`` at
  8,000 tokens, both firing;
- ``catalog``: ``plain`` with ``auto_refresh=True``, a 41st skill added before turn 30 (the
  catalog changes once) and ``skill-03`` pinned at turn 45 (a persisted message);
- ``managed``: managed skills instead of disclosure (``create_skill_manager`` over the same 40
  skills), ``skill-03`` loaded inline before turn 20 and unloaded before turn 40: its body is
  projected after the newest breakpoint on every call in between.

each with caching off and on. Anthropic: off is ``AnthropicModel(cache=None)`` (no breakpoint:
nothing cached), on the default breakpoints; OpenAI (``OpenAIResponsesModel``, gpt-5 prices):
OpenAI caches by itself and cannot be turned off, so off is the same requests counted with no
cache at all, on is the server's rule with plait's ``prompt_cache_key`` (the thread id,
``OpenAIPromptCache(send=True)``: the local server is not api.openai.com). ``CacheWatch``
reports every cache break; the bench prints each cause with the turns it happened at.

Prints, per provider, input tokens, billed fresh, cache writes, cache reads, the share read,
the input cost at list prices (``plait.pricing``: claude-sonnet-4-5, gpt-5) and its ratio to the
same tokens uncached; then whether the facts planted in turns 1, 20 and 40 are still within
reach (in the last request, or in a file the last request names).

    .venv/bin/python bench/prompt_cache.py [--turns 60] [--provider anthropic|openai|both]

deepagents beside plait (``bench/prompt_cache_deepagents.py``, in its own venv: its docstring
says how to install it)::

    /tmp/da-venv/bin/python bench/prompt_cache_deepagents.py --out /tmp/deepagents.json
    .venv/bin/python bench/prompt_cache.py --deepagents /tmp/deepagents.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).parent))

from anthropic_server import AnthropicServer
from openai_cache_rule import OpenAIPrefixCache
from prompt_cache_script import ANSWER, FACTS, brain, report_text, skills_folder, write_skill
from responses_server import ResponsesServer, Turn

from plait import Agent
from plait.backends import MemoryBackend
from plait.context import ResultEvictionMiddleware, SummarizationMiddleware
from plait.messages import Usage
from plait.middleware.base import Middleware
from plait.models.anthropic import AnthropicModel
from plait.models.base import Model
from plait.models.openai_cache import OpenAIPromptCache
from plait.models.openai_responses import OpenAIResponsesModel
from plait.pricing import PRICES, Price, cost
from plait.runtime import CacheBroken, CacheWatch, ModelResponseReceived
from plait.skills import FilesystemSource, SkillsMiddleware
from plait.skills.managed import SkillManager, create_skill_manager
from plait.skills.managed.tools import allow_all
from plait.tools import tool

_INPUT_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5"}
RUNS = ("plain", "context", "catalog", "managed")


@tool
def read_report(turn: int) -> str:
    """Read the report of one turn."""
    return report_text(turn)


class NoCache(OpenAIPrefixCache):
    """The same token count, nothing cached (OpenAI with caching off, were that possible)."""

    def tokens_and_cached(self, body: dict[str, Any]) -> tuple[int, int]:
        return super().tokens_and_cached(body)[0], 0


@dataclass
class Outcome:
    usage: Usage = field(default_factory=Usage)
    breaks: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    reachable: str = ""
    short: list[int] = field(default_factory=list)
    """Turns with a call that read less than the whole previous request back (the server's
    rule: the ground truth CacheWatch's reports are checked against)."""


def short_reads(calls: list[tuple[int, int]], step: int) -> list[int]:
    """Indexes of ``(prompt, read)`` calls that read less of the previous prompt than the rule
    allows (Anthropic: all of it, ``step`` 1; OpenAI: down to a 128-token step)."""
    out = []
    for i in range(1, len(calls)):
        previous = calls[i - 1][0] - (step > 1)  # OpenAI: the last token closes the JSON
        if previous < 1_024:
            continue
        if calls[i][1] < previous - (previous - 1_024) % step:
            out.append(i)
    return out


def input_cost(usage: Usage, price: Price) -> float:
    """The input side of ``usage`` at ``price`` (``plait.pricing.cost`` without output)."""
    return cost(replace(usage, output_tokens=0), price)


async def session(provider: str, turns: int, run: str, cache: bool, skills: Path) -> Outcome:
    out = Outcome()
    backend = MemoryBackend()
    middleware: list[Middleware] = []
    if run == "context":
        middleware.append(SummarizationMiddleware(8_000, keep_messages=8, backend=backend))
        middleware.append(ResultEvictionMiddleware(1_000, backend=backend))
    manager: SkillManager | None = None
    if run == "managed":
        manager = await create_skill_manager(sources=[FilesystemSource(skills)], gate=allow_all)
        middleware += manager.middleware
    else:
        middleware.append(SkillsMiddleware([skills], auto_refresh=run == "catalog"))
    middleware.append(CacheWatch())
    thread = f"{run}-{'on' if cache else 'off'}"
    server: AnthropicServer | ResponsesServer
    model: Model
    if provider == "anthropic":
        server = AnthropicServer(brain)
        options: dict[str, Any] = {} if cache else {"cache": None}
        model = AnthropicModel(MODELS[provider], api_key="k", base_url=server.url, **options)
    else:
        server = ResponsesServer(prompt_cache=True)
        if not cache:
            server.prompt_cache = NoCache()
        model = OpenAIResponsesModel(
            MODELS[provider],
            api_key="k",
            base_url=server.url,
            prompt_cache=OpenAIPromptCache(send=True) if cache else None,
        )
    agent = Agent(
        model, tools=[read_report], middleware=middleware, system_prompt="You read reports."
    )
    catalog_turn, pin_turn = turns // 2, turns * 3 // 4  # 30 and 45 of 60
    calls_turn: list[int] = []
    with server:
        for turn in range(1, turns + 1):
            if run == "catalog" and turn == catalog_turn:
                write_skill(skills, 40)
            if manager is not None and turn == turns // 3:
                await manager.load("skill-03", channel="inline")
            if manager is not None and turn == turns * 2 // 3:
                await manager.unload("skill-03")
            pin = run == "catalog" and turn == pin_turn
            state = {"pinned_skills": ["skill-03"]} if pin else None
            if isinstance(server, ResponsesServer):
                server.turn(Turn(reasoning=None, calls=[("read_report", {"turn": turn})]))
                server.turn(Turn(reasoning=None, text=ANSWER))
            result = await agent.run(
                f"Read the report of turn #{turn}", thread_id=thread, state=state
            )
            calls_turn += [turn] * sum(
                1 for e in result.events if isinstance(e, ModelResponseReceived)
            )
            out.usage = out.usage + result.usage
            for event in result.events:
                if isinstance(event, CacheBroken):
                    out.breaks[f"{event.where}: {event.reason}"].append(turn)
        for m in middleware:
            if isinstance(m, SummarizationMiddleware):
                await m.drain()
        if isinstance(server, AnthropicServer):
            log = [
                (sum(u[k] for k in _INPUT_KEYS), u["cache_read_input_tokens"])
                for u in server.cache.log
            ]
            shorts = short_reads(log, 1)
        else:
            assert server.prompt_cache is not None
            shorts = short_reads(server.prompt_cache.log, 128)
        out.short = sorted({calls_turn[i] for i in shorts})
        last = server.received[-1]
        body = last.body if isinstance(server, AnthropicServer) else last
        out.reachable = json.dumps(body)
    for path in await backend.ls(""):
        if path in out.reachable or path.rsplit("/", 1)[0] + "/" in out.reachable:
            out.reachable += await backend.read(path)
    await model.aclose()
    if manager is not None:
        await manager.aclose()
    shutil.rmtree(skills / "skill-40", ignore_errors=True)
    return out


HEADER = (
    f"{'run':<27}{'caching':<9}{'input':>11}{'fresh':>11}{'writes':>10}{'reads':>11}"
    f"{'read %':>8}{'input $':>10}{'x uncached':>11}  facts"
)


def row(name: str, caching: str, usage: Usage, price: Price, facts: int) -> str:
    fresh = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
    uncached = usage.input_tokens * price.input / 1e6
    billed = input_cost(usage, price)
    share = usage.cache_read_tokens / max(usage.input_tokens, 1)
    return (
        f"{name:<27}{caching:<9}{usage.input_tokens:>11,}{fresh:>11,}"
        f"{usage.cache_write_tokens:>10,}{usage.cache_read_tokens:>11,}{share:>8.1%}"
        f"{billed:>10.4f}{billed / max(uncached, 1e-12):>11.3f}  {facts}/{len(FACTS)}"
    )


def deepagents_row(path: Path) -> str:
    data = json.loads(path.read_text())
    usage = Usage(
        input_tokens=data["input"],
        cache_read_tokens=data["reads"],
        cache_write_tokens=data["writes"],
    )
    name = f"{data['name']} (plain)"
    return row(name, "on", usage, PRICES[MODELS["anthropic"]], data["facts"]) + (
        f"  ({data['calls']} calls, {data['tool_schema_chars']:,} chars of tool schemas)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--provider", choices=("anthropic", "openai", "both"), default="both")
    parser.add_argument("--deepagents", type=Path, default=None, help="its JSON (--out)")
    args = parser.parse_args()
    providers = ("anthropic", "openai") if args.provider == "both" else (args.provider,)
    with tempfile.TemporaryDirectory() as tmp:
        skills = skills_folder(Path(tmp) / "skills")
        for provider in providers:
            price = PRICES[MODELS[provider]]
            print(f"\n{provider} ({MODELS[provider]} prices), {args.turns} turns")
            print(HEADER)
            all_breaks: dict[str, dict[str, list[int]]] = {}
            short: dict[str, list[int]] = {}
            for run in RUNS:
                for cache in (False, True):
                    out = await session(provider, args.turns, run, cache, skills)
                    facts = sum(1 for fact in FACTS.values() if fact in out.reachable)
                    caching = "on" if cache else "off"
                    print(row(f"plait {run}", caching, out.usage, price, facts), flush=True)
                    if cache:
                        all_breaks[run] = out.breaks
                        short[run] = out.short
            if provider == "anthropic" and args.deepagents is not None:
                print(deepagents_row(args.deepagents))
            print("cache breaks (CacheWatch, caching on), by cause: count [turns]")
            for run, breaks in all_breaks.items():
                shown = "; ".join(
                    f"{why} x{len(at)} {at if len(at) <= 6 else [*at[:6], '...']}"
                    for why, at in sorted(breaks.items(), key=lambda kv: -len(kv[1]))
                )
                print(f"  {run}: {shown or 'none'}")
                print(f"    server: a short read at turns {short[run] or 'none'}")
    if args.deepagents is None:
        print("\ndeepagents: not measured in this run (--deepagents FILE; module docstring)")


if __name__ == "__main__":
    asyncio.run(main())
