"""Per-turn framework overhead of the agent loop, measured from inside the model and the tool.

A "turn" here is one trip round the loop: the model asks for one tool call, the tool runs, the
model is called again. The fake model and the fake tool take a timestamp (``perf_counter_ns``) on
entry and on exit, so a turn's overhead is exactly the framework's share of it::

    (tool entry - model exit) + (next model entry - tool exit)

One run of N turns gives N - 1 such values; a run's figure is their median. Configurations run
interleaved, round by round (every configuration once per round, in a rotating order), so a
burst of machine load hits them all alike; a configuration's figure is the median of its run
medians, and an added cost is the median over rounds of the paired difference (configuration
minus its baseline, same round). ``1,000 turns, last 100`` is the median of the last hundred
turns of the long run only: if the loop did work proportional to the history it would show here.

Configurations:

* ``asyncio loop``: a hand-written loop doing the same job (await the model, await the tool,
  append both messages to a list), the floor any framework is compared with;
* ``bare agent``: ``Agent(default_guards=False)``, memory store, no middleware;
* ``default agent``: ``Agent(...)`` as a user writes it (guards on, memory store);
* ``+5 middleware``: the default agent with 5 pass-through middlewares implementing every seam
  and pipeline;
* ``+skills (1,000)``: the default agent with ``SkillsMiddleware`` over 1,000 generated skills on
  a thread whose skills are loaded and one skill tool is disclosed;
* ``+managed skills (3)``: the default agent with a ``SkillManager`` with 3 skills loaded.

Run: ``python bench/overhead.py [--rounds 15] [--long 1000] [--short 10]``. Use ``-X importtime``
or ``bench/startup.py`` for start-up figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

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
)
from plait.messages import AssistantMessage, Message, ToolMessage, UserMessage
from plait.middleware import ModelHandler, Next, ToolHandler
from plait.models.base import StreamEvent
from plait.models.scripted import stream_response
from plait.tools import FunctionTool, Tool

TARGETS = {
    "default agent": 30.0,
    "+5 middleware": 45.0,
}
ADDED_TARGETS = {"+skills": 200.0, "+managed skills (3)": 150.0}


class Stamps:
    """Timestamps (ns) taken inside the fake model and tool during one run."""

    def __init__(self) -> None:
        self.model_in: list[int] = []
        self.model_out: list[int] = []
        self.tool_in: list[int] = []
        self.tool_out: list[int] = []

    def overheads_us(self) -> list[float]:
        """(tool entry - model exit) + (next model entry - tool exit), per turn, in µs."""
        return [
            (self.tool_in[i] - self.model_out[i] + self.model_in[i + 1] - self.tool_out[i]) / 1e3
            for i in range(len(self.tool_out))
            if i + 1 < len(self.model_in)
        ]


class StampedModel:
    """Asks for one ``noop`` call per model call until ``turns`` calls were made, then answers.

    Each call has a new argument (``{"n": 1}``, ``{"n": 2}`` …), as a working agent's calls do;
    identical calls would make the repetition guard step in.

    ``first`` (optional) replaces the first call, e.g. to read a SKILL.md.
    """

    name = "stamped"

    def __init__(self, turns: int, stamps: Stamps, tool_name: str = "noop") -> None:
        self.turns = turns
        self.stamps = stamps
        self.tool_name = tool_name
        self.calls = 0
        self.first: ToolCall | None = None

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.stamps.model_in.append(time.perf_counter_ns())
        self.calls += 1
        if self.calls > self.turns:
            response = ModelResponse(content="done")
        elif self.calls == 1 and self.first is not None:
            response = ModelResponse(tool_calls=[self.first])
        else:
            call = ToolCall(f"c{self.calls}", self.tool_name, {"n": self.calls})
            response = ModelResponse(tool_calls=[call])
        self.stamps.model_out.append(time.perf_counter_ns())
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        async for event in stream_response(await self.generate(request)):
            yield event


def stamped_tool(stamps: Stamps, name: str = "noop") -> Tool:
    async def noop(n: int) -> str:
        """Do nothing with ``n``."""
        stamps.tool_in.append(time.perf_counter_ns())
        stamps.tool_out.append(time.perf_counter_ns())
        return "ok"

    return FunctionTool(noop, name=name)


class PassThrough(Middleware):
    """Implements every seam and pipeline, changing nothing."""

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


Config = Callable[[int], Awaitable[Stamps]]


async def asyncio_loop(turns: int) -> Stamps:
    """The floor: the same job written by hand, no framework."""
    stamps = Stamps()
    model = StampedModel(turns, stamps)
    tool = stamped_tool(stamps)
    assert isinstance(tool, FunctionTool)
    history: list[Message] = [UserMessage("go")]
    while True:
        response = await model.generate(ModelRequest(messages=history))
        history.append(AssistantMessage(response.content, tool_calls=response.tool_calls))
        if not response.tool_calls:
            return stamps
        for call in response.tool_calls:
            data = await tool.fn(**call.args)
            history.append(ToolMessage(call.id, call.name, data))


def agent_config(middleware: Callable[[], list[Middleware]], guards: bool = True) -> Config:
    async def run(turns: int) -> Stamps:
        stamps = Stamps()
        agent = Agent(
            StampedModel(turns, stamps),
            tools=[stamped_tool(stamps)],
            middleware=middleware(),
            limits=Limits(model_calls_per_turn=turns + 1),
            default_guards=guards,
        )
        result = await agent.run("go", thread_id="bench")
        assert result.output == "done", result.output
        return stamps

    return run


def write_skills(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / f"skill-{i:05d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i:05d}\ndescription: Handles task family {i} end to end. Use "
            f"when the user mentions topic {i}.\nmetadata:\n  include_tools: tool_{i}\n---\n"
            + "\n".join(f"{s}. Step {s} of the procedure." for s in range(1, 31))
            + "\n"
        )


def skills_config(root: Path) -> Config:
    """The default agent with ``SkillsMiddleware`` over ``root``; the thread's first run reads
    ``skill-00000``'s SKILL.md (loading the skills, disclosing ``tool_0``), the measured run then
    calls ``tool_0`` every turn."""
    from plait.skills import SkillsMiddleware

    path = str(root.resolve() / "skill-00000" / "SKILL.md")

    async def run(turns: int) -> Stamps:
        stamps = Stamps()

        tools: dict[str, Tool] = {}

        def resolve(name: str, ctx: DispatchContext) -> Tool:
            if name not in tools:  # built once: the bench measures plait, not create_model
                tools[name] = stamped_tool(stamps, name)
            return tools[name]

        warm = StampedModel(1, Stamps())
        warm.first = ToolCall("read", "read_file", {"path": path})
        agent = Agent(
            warm,
            middleware=[SkillsMiddleware(sources=[root], tools=resolve)],
            limits=Limits(model_calls_per_turn=turns + 1),
        )
        await agent.run("warm", thread_id="bench")
        agent.model = StampedModel(turns, stamps, tool_name="tool_0")
        result = await agent.run("go", thread_id="bench")
        assert result.output == "done", result.output
        return stamps

    return run


def managed_config() -> Config:
    """The default agent with a ``SkillManager`` holding 3 loaded skills (one tool each)."""
    from plait.skills import MemorySource
    from plait.skills.managed import allow_all, create_skill_manager

    async def run(turns: int) -> Stamps:
        stamps = Stamps()
        md = "---\nname: s{0}\ndescription: Skill {0}. Use for {0}.\n---\nBody {0}.\n"
        skills = {f"s{i}": {"SKILL.md": md.format(i)} for i in range(3)}
        tools = {f"s{i}": [stamped_tool(stamps, f"s{i}_tool")] for i in range(3)}
        manager = await create_skill_manager(
            sources=[MemorySource(skills)], gate=allow_all, skill_tools=tools
        )
        for i in range(3):
            await manager.load(f"s{i}")
        agent = Agent(
            StampedModel(turns, stamps, tool_name="s0_tool"),
            middleware=list(manager.middleware),
            limits=Limits(model_calls_per_turn=turns + 1),
        )
        result = await agent.run("go", thread_id="bench")
        assert result.output == "done", result.output
        return stamps

    return run


def measure(
    configs: dict[str, Config], turns: int, rounds: int, tail: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per-run medians (µs) of every configuration, interleaved round by round: over all turns,
    and over the last ``tail`` turns of each run."""
    names = list(configs)
    whole: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up: imports, caches, the skills folder in the page cache
        asyncio.run(configs[name](min(turns, 20)))
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            gc.collect()
            values = asyncio.run(configs[name](turns)).overheads_us()
            whole[name].append(statistics.median(values))
            last[name].append(statistics.median(values[-tail:]))
    return whole, last


def paired(medians: dict[str, list[float]], name: str, base: str) -> float:
    return statistics.median(a - b for a, b in zip(medians[name], medians[base], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=1000)
    parser.add_argument("--skills", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_skills(root, args.skills)
        configs: dict[str, Config] = {
            "asyncio loop": asyncio_loop,
            "bare agent": agent_config(list, guards=False),
            "default agent": agent_config(list),
            "+5 middleware": agent_config(lambda: [PassThrough() for _ in range(5)]),
            f"+skills ({args.skills:,})": skills_config(root),
            "+managed skills (3)": managed_config(),
        }
        short, _ = measure(configs, args.short, args.rounds, tail=args.short)
        long, last = measure(configs, args.long, max(3, args.rounds // 3), tail=100)
    print_table(short, long, last, args)


def print_table(
    short: dict[str, list[float]],
    long: dict[str, list[float]],
    last: dict[str, list[float]],
    args: Any,
) -> None:
    head = (
        f"per-turn overhead, µs (median; {args.rounds} rounds of {args.short} turns, "
        f"{max(3, args.rounds // 3)} rounds of {args.long:,})"
    )
    print(head)
    cols = (f"{args.short} turns", f"{args.long:,} turns", f"{args.long:,}: last 100")
    print(f"{'configuration':<22}{cols[0]:>12}{cols[1]:>14}{cols[2]:>16}  target")
    for name in short:
        values = [statistics.median(m[name]) for m in (short, long, last)]
        target = f"≤ {TARGETS[name]:.0f} µs" if name in TARGETS else "-"
        print(f"{name:<22}{values[0]:>12.1f}{values[1]:>14.1f}{values[2]:>16.1f}  {target}")
    print()
    print("added cost, µs (median of paired differences, same round)")
    print(f"{'configuration':<34}{cols[0]:>12}{cols[1]:>14}{cols[2]:>16}  target")
    rows = [
        ("bare agent", "asyncio loop"),
        ("default agent", "bare agent"),
        ("default agent", "asyncio loop"),
        ("+5 middleware", "default agent"),
        (f"+skills ({args.skills:,})", "default agent"),
        ("+managed skills (3)", "default agent"),
    ]
    for name, base in rows:
        values = [paired(m, name, base) for m in (short, long, last)]
        key = name.split(" (")[0] if name.startswith("+skills") else name
        target = f"≤ {ADDED_TARGETS[key]:.0f} µs" if key in ADDED_TARGETS else "-"
        label = f"{name} - {base}"
        print(f"{label:<34}{values[0]:>12.1f}{values[1]:>14.1f}{values[2]:>16.1f}  {target}")


if __name__ == "__main__":
    main()
