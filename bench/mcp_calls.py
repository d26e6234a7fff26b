"""What plait's MCP layer adds to a tool call, against a real stdio FastMCP server.

Per round, interleaved: one ``echo`` call through the SDK's own ``ClientSession`` (the
baseline), one through :class:`plait.mcp.McpServer` (owner task, queue, future, result
mapping), each timed around the call. Printed: the median of each, and the added cost as the
median of the paired differences (same round). Also: connect time (process start +
``initialize`` + ``tools/list``) and a restart after a crash, medians over a few fresh servers;
and the agent turn after the server died between turns, with a server that starts again and
with one whose restart hangs (the turn waits at most ``RECONNECT_SECONDS``, not the server's
``init_timeout``).

    python bench/mcp_calls.py [rounds]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from plait import Agent, ScriptedModel
from plait.mcp import RECONNECT_SECONDS, McpServer, McpServerSkipped, McpToolset

SERVER = str(Path(__file__).parents[1] / "tests" / "support" / "mcp_server.py")
COMMAND = [sys.executable, SERVER, "stdio"]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f} ms"


async def calls(rounds: int) -> tuple[list[float], list[float]]:
    params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:])
    raw: list[float] = []
    plait: list[float] = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
        McpServer("b", command=COMMAND) as server,
    ):
        await session.initialize()
        (echo,) = [t for t in await server.list_tools() if t.name == "b_echo"]
        for _ in range(20):  # warm both paths
            await session.call_tool("echo", {"text": "x"})
            await server.call("echo", {"text": "x"}, tool=echo.name)
        for _ in range(rounds):
            start = time.perf_counter()
            await session.call_tool("echo", {"text": "x"})
            raw.append(time.perf_counter() - start)
            start = time.perf_counter()
            await server.call("echo", {"text": "x"}, tool=echo.name)
            plait.append(time.perf_counter() - start)
    return raw, plait


async def connects(times: int) -> tuple[list[float], list[float]]:
    first: list[float] = []
    restart: list[float] = []
    for _ in range(times):
        async with McpServer("b", command=COMMAND) as server:
            start = time.perf_counter()
            tools = {t.name: t for t in await server.list_tools()}
            first.append(time.perf_counter() - start)
            with contextlib.suppress(Exception):
                await server.call("crash", {}, tool="b_crash")
            start = time.perf_counter()
            await server.call("echo", {"text": "x"}, tool=tools["b_echo"].name)
            restart.append(time.perf_counter() - start)
    return first, restart


def hang_switch(flag: Path) -> list[str]:
    """The server's command, but a start hangs while ``flag`` exists."""
    script = 'if test -e "$0"; then sleep 3600; fi; exec "$1" "$2" stdio'
    return ["/bin/sh", "-c", script, str(flag), *COMMAND[:2]]


async def turns_after_a_death(times: int, hang: bool) -> tuple[list[float], int]:
    """Wall time of the turn after the server's process exited between turns, and how many of
    those turns went on without its tools (``McpServerSkipped``)."""
    took: list[float] = []
    skipped = 0
    for index in range(times):
        flag = Path(f"/tmp/plait-bench-mcp-hang-{os.getpid()}-{index}")
        server = McpServer("b", command=hang_switch(flag), allow=["echo", "crash"])
        async with McpToolset([server]) as mcp:
            agent = Agent(ScriptedModel(["one", "two"]), middleware=[mcp])
            await agent.run("first", thread_id="t")
            with contextlib.suppress(Exception):
                await server.call("crash", {}, tool="b_crash")
            if hang:
                await asyncio.to_thread(flag.touch)
            start = time.perf_counter()
            result = await agent.run("second", thread_id="t")
            took.append(time.perf_counter() - start)
            skipped += any(isinstance(e, McpServerSkipped) for e in result.events)
        await asyncio.to_thread(flag.unlink, missing_ok=True)
    return took, skipped


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    raw, plait = asyncio.run(calls(rounds))
    first, restart = asyncio.run(connects(5))
    added = [p - r for r, p in zip(raw, plait, strict=True)]
    load = os.getloadavg()[0]
    print(f"MCP over stdio, {rounds} interleaved rounds (load average {load:.1f})")
    print("| figure | median |\n|---|---|")
    print(f"| echo via SDK ClientSession | {us(statistics.median(raw))} |")
    print(f"| echo via plait McpServer | {us(statistics.median(plait))} |")
    print(f"| added by plait (median of paired differences) | {us(statistics.median(added))} |")
    print(
        f"| connect: start + initialize + tools/list (5 servers) | {ms(statistics.median(first))} |"
    )
    print(f"| call after a crash: restart + call (5 servers) | {ms(statistics.median(restart))} |")
    for hang in (False, True):
        took, skipped = asyncio.run(turns_after_a_death(5, hang))
        what = "its restart hangs" if hang else "it starts again"
        print(
            f"| turn after the server died between turns, {what} (5 servers; {skipped} "
            f"skipped it, wait bound {RECONNECT_SECONDS:g} s) | {ms(statistics.median(took))} |"
        )


if __name__ == "__main__":
    main()
