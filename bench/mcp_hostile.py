"""The agent's turns still answered while one MCP server's tool list is hostile (issue 29).

Per case, a fresh toolset of the hostile server (``tests/support/mcp_hostile_server.py``, real,
over stdio) next to a good FastMCP server (``tests/support/mcp_server.py``) and a local tool;
then ``turns`` turns on one thread, each calling the local tool and the good server's ``echo``
before it answers. Printed per case: turns answered, turns whose local and good-server calls
both worked, the median turn time (the first turn connects the servers), and what the turns
reported (each distinct event and the start of its cause) or what aborted them. The last row
is two good servers whose tools share a name.

    python bench/mcp_hostile.py [turns]

Run against another checkout's ``src`` (``PYTHONPATH=../main/src``) for its figures.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).parents[1] / "tests" / "support"
sys.path.insert(0, str(SUPPORT))

from mcp_hostile_server import CASES, COMMAND  # noqa: E402
from mcp_server import STDIO  # noqa: E402

import plait.mcp  # noqa: E402
from plait import Agent, ScriptedModel, ToolCall, ToolMessage, TurnAborted, tool  # noqa: E402
from plait.mcp import McpServer, McpToolset  # noqa: E402
from plait.runtime import ToolSearch  # noqa: E402

# McpToolsSkipped is new with issue 29: looked up, so the script runs against older checkouts
EVENTS = ("McpServerSkipped", "McpToolsSkipped")
REPORTS = tuple(getattr(plait.mcp, name) for name in EVENTS if hasattr(plait.mcp, name))
SERVER_NAME = re.compile(r"^MCP servers? '[^']*':? ")


@tool
def local(text: str) -> str:
    """A local tool."""
    return f"local {text}"


def servers(case: str) -> list[McpServer]:
    good = McpServer("good", command=STDIO, allow=["echo"])
    if case == "two servers, one name":  # prefix a + b_echo and prefix a_b + echo: a_b_echo
        one = McpServer("one", command=STDIO, prefix="a", allow=["b_echo"])
        return [one, McpServer("two", command=STDIO, prefix="a_b", allow=["echo"]), good]
    prefix = "search" if case == "search_tools" else "bad"  # its tool `tools` is search_tools
    return [McpServer("bad", command=[*COMMAND, case], prefix=prefix), good]


def shown(event: Any) -> str:
    return f"{type(event).__name__}: {SERVER_NAME.sub('', event.reason)[:52]}"


async def run_case(case: str, turns: int) -> tuple[int, int, str, float]:
    script: list[Any] = []
    for i in range(turns):
        script += [
            [
                ToolCall(f"l{i}", "local", {"text": "x"}),
                ToolCall(f"g{i}", "good_echo", {"text": "y"}),
            ]
        ]
        script += [f"answer {i}"]  # fmt: skip
    model = ScriptedModel(script)
    answered = worked = 0
    seen: list[str] = []
    times: list[float] = []
    async with McpToolset(servers(case)) as mcp:
        agent = Agent(model, tools=[local], middleware=[mcp, ToolSearch()])
        for i in range(turns):
            start = time.perf_counter()
            try:
                result = await agent.run("go", thread_id="t")
            except TurnAborted as exc:
                seen.append(f"aborted: {type(exc.error).__name__}")
                model = ScriptedModel(script[2 * (i + 1) :])  # the aborted turn used nothing
                agent = Agent(model, tools=[local], middleware=[mcp, ToolSearch()])
                continue
            finally:
                times.append(time.perf_counter() - start)
            answered += result.output == f"answer {i}"
            data = {
                m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)
            }
            worked += data == {f"l{i}": "local x", f"g{i}": "y"}
            seen += [shown(e) for e in result.events if isinstance(e, REPORTS)]
    return answered, worked, "; ".join(dict.fromkeys(seen)) or "-", statistics.median(times)


async def main(turns: int) -> None:
    cases = [*CASES, "two servers, one name"]
    print(f"{turns} turns per case, one hostile server + one good server + a local tool\n")
    head = f"{'case':<22} {'answered':>9} {'tools ok':>9} {'turn ms':>8}"
    print(f"{head}  reported (each distinct event or abort)")
    total = 0
    for case in cases:
        answered, worked, seen, median = await run_case(case, turns)
        total += answered
        row = f"{case:<22} {answered:>4}/{turns:<4} {worked:>4}/{turns:<4} {median * 1e3:>8,.0f}"
        print(f"{row}  {seen}")
    print(f"\nall cases: {total}/{turns * len(cases)} turns answered")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
