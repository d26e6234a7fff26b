"""Framework overhead per dispatch, and ``import plait`` time.

A turn of 200 dispatches with a scripted model (one trivial tool call per dispatch), with 0 and
with 5 pass-through middlewares that implement every seam and pipeline. Overhead is the turn's
wall time minus the time spent inside the model and the tool bodies, divided by the dispatches.
Median of 5 runs. Run: ``python bench/overhead.py``.

Skills rows: the same kind of turn, 50 dispatches, with ``SkillsMiddleware`` over 1,000 generated
skills in a temporary folder (catalog rendered under its default budget) on a thread whose skills
are already loaded, against the bare runtime on the same kind of thread; and the time to load
those 1,000 skills for a new thread, with a new middleware (cold: every SKILL.md parsed) and with
one that already serves other threads (warm: an incremental refresh).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

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
from plait.skills import SkillsMiddleware
from plait.tools import FunctionTool, Tool

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
            call = ToolCall(f"c{self.calls}", "noop", {"n": self.calls})
            response = ModelResponse(tool_calls=[call])
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


async def one_run(middleware_count: int, guards: bool = True) -> float:
    agent = Agent(
        TimedModel(),
        tools=[noop],
        middleware=[PassThrough() for _ in range(middleware_count)],
        limits=Limits(model_calls_per_turn=DISPATCHES),
        default_guards=guards,
    )
    Clock.inside = 0.0
    start = time.perf_counter()
    result = await agent.run("go", thread_id="bench")
    total = time.perf_counter() - start
    assert result.output == "done"
    return (total - Clock.inside) / DISPATCHES * 1e6


def per_dispatch_us(middleware_count: int, guards: bool = True) -> float:
    asyncio.run(one_run(middleware_count, guards))  # warm-up
    return statistics.median(asyncio.run(one_run(middleware_count, guards)) for _ in range(RUNS))


def guards_row() -> tuple[str, str, str]:
    """What the default model hooks (validator + repetition detector) add per dispatch."""
    bare = per_dispatch_us(0, guards=False)
    guarded = per_dispatch_us(0, guards=True)
    return ("default guards: added per dispatch", f"{guarded - bare:.1f} µs", "≤ 20 µs")


def import_ms(extra: str = "") -> float:
    """Median wall time of ``import plait`` (plus ``extra``) in a fresh interpreter."""
    code = (
        "import time; t = time.perf_counter(); import plait"
        + extra
        + "; print(time.perf_counter() - t)"
    )
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(RUNS)
    ]
    return statistics.median(runs) * 1e3


SKILLS = 1_000
SKILL_DISPATCHES = 50


class ShortTurnModel(TimedModel):
    """:class:`TimedModel` answering after ``dispatches`` calls instead of ``DISPATCHES``."""

    def __init__(self, dispatches: int, first: ToolCall | None = None) -> None:
        super().__init__()
        self.dispatches = dispatches
        self.first = first

    async def generate(self, request: ModelRequest) -> ModelResponse:
        start = time.perf_counter()
        self.calls += 1
        if self.calls >= self.dispatches:
            response = ModelResponse(content="done")
        elif self.calls == 1 and self.first is not None:
            response = ModelResponse(tool_calls=[self.first])
        else:
            call = ToolCall(f"c{self.calls}", "noop", {"n": self.calls})
            response = ModelResponse(tool_calls=[call])
        Clock.inside += time.perf_counter() - start
        return response


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


def skill_tool(name: str, ctx: DispatchContext) -> Tool:
    """The bench's skill-tool resolver: every ``include_tools`` name is a renamed ``noop``."""
    return FunctionTool(noop.fn, name=name)


async def skills_turn_us(root: Path | None) -> float:
    """Per-dispatch overhead of a 50-dispatch turn on a thread whose previous turn read one
    SKILL.md (so, with ``root``, its skills are loaded and one skill tool is disclosed)."""
    middleware: list[Middleware] = []
    if root is not None:
        middleware.append(SkillsMiddleware(sources=[root], tools=skill_tool))
    limits = Limits(model_calls_per_turn=SKILL_DISPATCHES)
    path = str((root or Path("/none")).resolve() / "skill-00000" / "SKILL.md")
    first = ToolCall("read", "read_file", {"path": path})
    model = ShortTurnModel(SKILL_DISPATCHES, first)
    agent = Agent(model, tools=[noop], middleware=middleware, limits=limits)
    await agent.run("warm", thread_id="bench")
    agent.model = ShortTurnModel(SKILL_DISPATCHES)
    Clock.inside = 0.0
    start = time.perf_counter()
    result = await agent.run("go", thread_id="bench")
    total = time.perf_counter() - start
    assert result.output == "done"
    return (total - Clock.inside) / SKILL_DISPATCHES * 1e6


async def new_thread_ms(middleware: list[Middleware], thread_id: str) -> float:
    agent = Agent(ShortTurnModel(1), middleware=middleware)
    start = time.perf_counter()
    await agent.run("go", thread_id=thread_id)
    return (time.perf_counter() - start) * 1e3


def skills_rows() -> list[tuple[str, str, str]]:
    """Rows for :func:`main`: per-dispatch overhead and new-thread load time with 1,000 skills."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_skills(root, SKILLS)
        asyncio.run(skills_turn_us(None))  # warm-up
        asyncio.run(skills_turn_us(root))
        bare = statistics.median(asyncio.run(skills_turn_us(None)) for _ in range(RUNS))
        skilled = statistics.median(asyncio.run(skills_turn_us(root)) for _ in range(RUNS))
        cold = []
        warm = []
        for run in range(RUNS):
            base = asyncio.run(new_thread_ms([], f"bare-{run}"))
            cold.append(asyncio.run(new_thread_ms([SkillsMiddleware(sources=[root])], "t")) - base)
        served = SkillsMiddleware(sources=[root])
        asyncio.run(new_thread_ms([served], "first"))
        for run in range(RUNS):
            base = asyncio.run(new_thread_ms([], f"bare-{run}"))
            warm.append(asyncio.run(new_thread_ms([served], f"t-{run}")) - base)
    return [
        (
            f"skills: added per dispatch, {SKILLS:,} skills",
            f"{skilled - bare:.1f} µs",
            "≤ 200 µs",
        ),
        (
            f"skills: load {SKILLS:,} for a new thread, cold",
            f"{statistics.median(cold):.1f} ms",
            "≤ 100 ms",
        ),
        (
            f"skills: load {SKILLS:,} for a new thread, warm",
            f"{statistics.median(warm):.1f} ms",
            "-",
        ),
    ]


def managed_row() -> tuple[str, str, str]:
    """Managed skill mode: a 50-dispatch turn with 3 skills loaded (one tool each, handle
    channel, the manager's four hooks placed first) minus the same turn on the bare runtime,
    per dispatch. Median of ``RUNS`` runs each."""
    from plait.skills import MemorySource
    from plait.skills.managed import allow_all, create_skill_manager
    from plait.tools import FunctionTool

    dispatches = 50

    class Model(TimedModel):
        async def generate(self, request: ModelRequest) -> ModelResponse:
            start = time.perf_counter()
            self.calls += 1
            done = self.calls >= dispatches
            call = ToolCall(f"c{self.calls}", "noop", {"n": 1})
            response = ModelResponse(content="done") if done else ModelResponse(tool_calls=[call])
            Clock.inside += time.perf_counter() - start
            return response

    async def once(managed: bool) -> float:
        middleware: list[Middleware] = []
        if managed:
            md = "---\nname: s{0}\ndescription: Skill {0}. Use for {0}.\n---\nBody {0}.\n"
            skills = {f"s{i}": {"SKILL.md": md.format(i)} for i in range(3)}
            tools = {f"s{i}": [FunctionTool(noop.fn, name=f"s{i}_tool")] for i in range(3)}
            manager = await create_skill_manager(
                sources=[MemorySource(skills)], gate=allow_all, skill_tools=tools
            )
            for i in range(3):
                await manager.load(f"s{i}")
            middleware = list(manager.middleware)
        limits = Limits(model_calls_per_turn=dispatches)
        agent = Agent(Model(), tools=[noop], middleware=middleware, limits=limits)
        Clock.inside = 0.0
        start = time.perf_counter()
        result = await agent.run("go", thread_id="bench")
        total = time.perf_counter() - start
        assert result.output == "done"
        return (total - Clock.inside) / dispatches * 1e6

    asyncio.run(once(True))  # warm-up
    bare = statistics.median(asyncio.run(once(False)) for _ in range(RUNS))
    managed = statistics.median(asyncio.run(once(True)) for _ in range(RUNS))
    return ("managed skills: added per dispatch, 3 loaded", f"{managed - bare:.1f} µs", "≤ 150 µs")


def main() -> None:
    rows = [
        (f"overhead per dispatch, {n} middleware", f"{per_dispatch_us(n):.1f} µs", target)
        for n, target in ((0, "-"), (5, "≤ 100 µs"))
    ]
    rows.append(guards_row())
    rows.append(("import plait", f"{import_ms():.1f} ms", "≤ 150 ms"))
    first_tool = "; plait.tool(lambda x: x)"  # pydantic loads with the first tool
    rows.append(("import plait + first @tool", f"{import_ms(first_tool):.1f} ms", "-"))
    rows.append(managed_row())
    rows.extend(skills_rows())
    width = max(len(r[0]) for r in rows)
    print(f"{'figure (median of 5)':<{width}}  {'value':>10}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>10}  {target}")


if __name__ == "__main__":
    main()
