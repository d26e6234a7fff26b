"""McpToolset in an agent's turns and behind skills (both modes), against a real stdio server."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from mcp_server import NO_TOOLS, STDIO

from plait import (
    Agent,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    TurnAborted,
    tool,
)
from plait.mcp import (
    McpConfigError,
    McpError,
    McpServer,
    McpServerClosed,
    McpServerSkipped,
    McpToolset,
    McpToolsSkipped,
)
from plait.middleware.base import Middleware, Next
from plait.middleware.context import TurnContext
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.managed import allow_all, create_skill_manager


def md(name: str, include_tools: str) -> str:
    return (
        f"---\nname: {name}\ndescription: The {name} skill.\n"
        f"metadata:\n  include_tools: {include_tools}\n---\nUse the tools.\n"
    )


def tool_names(request: object) -> list[str]:
    return [t.name for t in request.tools]  # type: ignore[attr-defined]


async def test_agent_calls_mcp_tools_and_keeps_server_state_across_calls() -> None:
    model = ScriptedModel(
        [
            ToolCall("c1", "demo_count"),
            [ToolCall("c2", "demo_count"), ToolCall("c3", "demo_weather", {"city": "Rome"})],
            "done",
        ]
    )
    async with McpToolset([McpServer("demo", command=STDIO, allow=["count", "weather"])]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
    assert result.output == "done"
    assert sorted(tool_names(model.requests[0])) == ["demo_count", "demo_weather"]
    data = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert data["c1"].startswith("1 in pid") and data["c2"].startswith("2 in pid")
    assert data["c3"] == {"city": "Rome", "celsius": 21.5}


async def test_an_mcp_error_result_reaches_the_model_as_an_error() -> None:
    model = ScriptedModel([ToolCall("c1", "demo_fail"), "done"])
    async with McpToolset([McpServer("demo", command=STDIO)]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
    (message,) = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert message.is_error and "the disk is on fire" in message.text


async def test_an_mcp_tool_named_like_an_agent_tool_is_left_out_and_the_agent_tool_kept() -> None:
    @tool
    def demo_echo(text: str) -> str:
        """An agent tool whose name the MCP server's echo would take."""
        return f"local {text}"

    model = ScriptedModel([ToolCall("c1", "demo_echo", {"text": "hi"}), "done"])
    async with McpToolset([McpServer("demo", command=STDIO, allow=["echo", "count"])]) as mcp:
        result = await Agent(model, tools=[demo_echo], middleware=[mcp]).run("go")
    (skipped,) = [e for e in result.events if isinstance(e, McpToolsSkipped)]
    assert (skipped.server, skipped.tools, skipped.type) == ("demo", ["echo"], "mcp_tools_skipped")
    assert "becomes 'demo_echo', the name of an agent or middleware tool" in skipped.reason
    assert sorted(tool_names(model.requests[0])) == ["demo_count", "demo_echo"]
    (reply,) = [m for m in result.new_messages if isinstance(m, ToolMessage)]
    assert reply.data == "local hi" and result.output == "done"


def test_two_servers_with_one_prefix_are_refused() -> None:
    with pytest.raises(McpConfigError, match="share the tool prefix 'x'"):
        McpToolset([McpServer("a", command=STDIO, prefix="x"), McpServer("x", command=STDIO)])


async def test_two_servers_whose_tools_get_one_name_are_refused() -> None:
    # prefix "a" + tool "b_echo" and prefix "a_b" + tool "echo" are both "a_b_echo"
    one = McpServer("one", command=STDIO, prefix="a", allow=["b_echo"])
    two = McpServer("two", command=STDIO, prefix="a_b", allow=["echo"])
    async with McpToolset([one, two]) as mcp:
        with pytest.raises(
            McpConfigError, match="'one' and 'two' both have a tool named 'a_b_echo'"
        ):
            await mcp.list_tools()


async def test_skill_tools_in_disclosure_mode_appear_only_after_the_skill_is_read() -> None:
    source = MemorySource({"weather": {"SKILL.md": md("weather", "demo_weather")}})
    model = ScriptedModel(
        [
            ToolCall("c1", "read_file", {"path": "/skills/weather/SKILL.md"}),
            ToolCall("c2", "demo_weather", {"city": "Lima"}),
            "done",
        ]
    )
    async with McpToolset([McpServer("demo", command=STDIO)]) as mcp:
        skills = SkillsMiddleware(sources=[source], tools=mcp.resolve)
        result = await Agent(model, middleware=[skills]).run("go")
    assert tool_names(model.requests[0]) == ["read_file"]
    assert tool_names(model.requests[1]) == ["read_file", "demo_weather"]
    (answer,) = [
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.name != "read_file"
    ]
    assert answer.data == {"city": "Lima", "celsius": 21.5}


async def test_skill_tools_in_managed_mode_are_projected_while_loaded() -> None:
    source = MemorySource({"weather": {"SKILL.md": md("weather", "demo_weather, demo_echo")}})
    model = ScriptedModel(
        [
            ToolCall("c1", "load_skill", {"skill": "weather"}),
            ToolCall("c2", "demo_echo", {"text": "hey"}),
            "done",
        ]
    )
    async with McpToolset([McpServer("demo", command=STDIO)]) as mcp:
        manager = await create_skill_manager(
            sources=[source], gate=allow_all, skill_tools=mcp.skill_tools
        )
        result = await Agent(model, middleware=[*manager.middleware]).run("go")
        await manager.aclose()
    assert "demo_echo" not in tool_names(model.requests[0])
    assert {"demo_echo", "demo_weather"} <= set(tool_names(model.requests[1]))
    echoed = [
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.tool_call_id == "c2"
    ]
    assert echoed[0].data == "hey"


def flag_gated(flag: Path, ready: Path | None = None) -> list[str]:
    """A real server command that fails (exit 1) until ``flag`` exists, then serves; with
    ``ready``, once started it waits for ``ready`` to exist before it answers ``initialize``."""
    wait = 'while ! test -e "$1"; do sleep 0.05; done; ' if ready is not None else ""
    script = f'test -e "$0" || exit 1; {wait}exec "$2" "$3" stdio'
    return ["/bin/sh", "-c", script, str(flag), str(ready or flag), *STDIO[:2]]


async def test_a_server_that_cannot_connect_is_skipped_and_reconnected_in_the_background(
    tmp_path: Path,
) -> None:
    flag, ready = tmp_path / "started", tmp_path / "ready"
    good = McpServer("demo", command=STDIO, allow=["echo"])
    # init_timeout 120: a retry made inside the turn would hold the second turn that long
    late = McpServer("late", command=flag_gated(flag, ready), allow=["echo"], init_timeout=120)
    model = ScriptedModel(
        [
            ToolCall("c1", "demo_echo", {"text": "hi"}),
            "first",
            "second",
            ToolCall("c2", "late_echo", {"text": "yo"}),
            "third",
        ]
    )
    async with McpToolset([good, late], retry_seconds=1e-6) as mcp:
        agent = Agent(model, middleware=[mcp])
        first = await agent.run("go", thread_id="t")
        flag.touch()  # the server now starts, but answers only once `ready` exists
        second = await agent.run("again", thread_id="t")
        ready.touch()
        await mcp.wait_for_retries()
        third = await agent.run("and again", thread_id="t")
    (skipped,) = [e for e in first.events if isinstance(e, McpServerSkipped)]
    assert (skipped.server, skipped.failures, skipped.type) == ("late", 1, "mcp_server_skipped")
    assert "MCP server 'late' could not be connected" in skipped.reason
    assert first.output == "first" and tool_names(model.requests[0]) == ["demo_echo"]
    (waiting,) = [e for e in second.events if isinstance(e, McpServerSkipped)]
    assert waiting.failures == 1 and waiting.reason.endswith("(reconnecting in the background)")
    assert second.output == "second" and tool_names(model.requests[2]) == ["demo_echo"]
    assert not [e for e in third.events if isinstance(e, McpServerSkipped)]
    assert sorted(tool_names(model.requests[3])) == ["demo_echo", "late_echo"]
    (reply,) = [m for m in third.new_messages if isinstance(m, ToolMessage)]
    assert reply.data == "yo" and not reply.is_error


async def test_a_failed_background_retry_waits_longer_and_aclose_cancels_one_in_flight(
    tmp_path: Path,
) -> None:
    broken = McpServer("broken", command=flag_gated(tmp_path / "never"))
    stuck = McpServer("stuck", command=flag_gated(tmp_path / "go", tmp_path / "never"))
    model = ScriptedModel(["one", "two", "three"])
    mcp = McpToolset([broken, stuck], retry_seconds=1e-6)
    agent = Agent(model, middleware=[mcp])
    await agent.run("go", thread_id="t")  # both fail: neither starts
    (tmp_path / "go").touch()  # `stuck` now starts but never answers
    await agent.run("go", thread_id="t")  # both retried in the background
    retries = dict(mcp._retries)
    await asyncio.wait([retries["broken"]])
    third = await agent.run("go", thread_id="t")
    failures = {e.server: e.failures for e in third.events if isinstance(e, McpServerSkipped)}
    assert failures == {"broken": 2, "stuck": 1}  # one retry in flight for `stuck`, not two
    assert mcp._retries["stuck"] is retries["stuck"] and not retries["stuck"].done()
    await mcp.aclose()  # cancels the retry of `stuck`, still waiting for initialize
    assert retries["stuck"].cancelled() and stuck.closed and broken.closed


async def test_an_unreachable_server_waits_for_its_retry_without_blocking_turns(
    tmp_path: Path,
) -> None:
    broken = McpServer("broken", command=flag_gated(tmp_path / "never"))
    model = ScriptedModel(["one", "two"])
    async with McpToolset([broken], retry_seconds=300) as mcp:
        agent = Agent(model, middleware=[mcp])
        runs = [await agent.run("go", thread_id="t"), await agent.run("go", thread_id="t")]
    first, second = ([e for e in r.events if isinstance(e, McpServerSkipped)] for r in runs)
    assert [e.failures for e in first + second] == [1, 1]  # the second turn did not retry
    assert 0 < second[0].retry_in <= 300 and broken.restarts == 0
    assert [r.output for r in runs] == ["one", "two"]


@pytest.mark.parametrize(
    ("first", "most"), [(10, 1), (0, 1), (1, float("inf")), ("5", 10), (True, 10)]
)
def test_retry_waits_must_be_positive_finite_and_ordered(first: object, most: object) -> None:
    with pytest.raises(McpConfigError, match="retry_seconds <= max_retry_seconds"):
        McpToolset([], retry_seconds=first, max_retry_seconds=most)  # type: ignore[arg-type]


async def test_a_deferred_server_is_found_through_search_tools() -> None:
    model = ScriptedModel(
        [
            ToolCall("c1", "search_tools", {"query": "weather in a city"}),
            ToolCall("c2", "demo_weather", {"city": "Rome"}),
            "done",
        ]
    )
    server = McpServer("demo", command=STDIO, allow=["echo", "weather"], defer=True)
    async with McpToolset([server]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
    assert tool_names(model.requests[0]) == ["search_tools"]  # nothing of the server's yet
    assert tool_names(model.requests[1]) == ["search_tools", "demo_weather"]
    data = {m.tool_call_id: m.data for m in result.new_messages if isinstance(m, ToolMessage)}
    assert [t["name"] for t in data["c1"]["tools"]] == ["demo_weather"]
    assert data["c2"] == {"city": "Rome", "celsius": 21.5}


async def test_a_server_without_tools_is_skipped_naming_it_not_an_sdk_error() -> None:
    bare = McpServer("bare", command=NO_TOOLS)
    model = ScriptedModel(["fine"])
    async with McpToolset([bare]) as mcp:
        result = await Agent(model, middleware=[mcp]).run("go")
        with pytest.raises(McpError, match="'bare' refused tools/list \\(Method not found\\)"):
            await bare.list_tools()
    (skipped,) = [e for e in result.events if isinstance(e, McpServerSkipped)]
    assert "MCP server 'bare' refused tools/list" in skipped.reason and result.output == "fine"


async def test_a_session_that_died_between_turns_does_not_hold_up_the_next_turn(
    tmp_path: Path,
) -> None:
    flag, ready = tmp_path / "started", tmp_path / "ready"
    flag.touch()
    ready.touch()
    # init_timeout 120: a restart waited for inside the turn would hold the second turn that long
    gated = flag_gated(flag, ready)
    server = McpServer("demo", command=gated, allow=["echo", "crash"], init_timeout=120)
    model = ScriptedModel(
        [
            ToolCall("c1", "demo_crash"),  # the server process exits mid-call
            "first",
            "second",
            ToolCall("c2", "demo_echo", {"text": "back"}),
            "third",
        ]
    )
    async with McpToolset([server]) as mcp:
        agent = Agent(model, middleware=[mcp])
        first = await agent.run("go", thread_id="t")
        ready.unlink()  # the restarted server now hangs before `initialize`
        second = await agent.run("again", thread_id="t")
        ready.touch()
        await mcp.wait_for_retries()
        third = await agent.run("and again", thread_id="t")
    (crashed,) = [m for m in first.new_messages if isinstance(m, ToolMessage)]
    assert crashed.is_error and first.output == "first"
    (skipped,) = [e for e in second.events if isinstance(e, McpServerSkipped)]
    assert skipped.server == "demo" and skipped.failures == 1
    assert "its session ended" in skipped.reason
    assert skipped.reason.endswith("(reconnecting in the background)")
    assert second.output == "second" and tool_names(model.requests[2]) == []
    assert not [e for e in third.events if isinstance(e, McpServerSkipped)]
    assert sorted(tool_names(model.requests[3])) == ["demo_crash", "demo_echo"]
    (echoed,) = [m for m in third.new_messages if isinstance(m, ToolMessage)]
    assert echoed.data == "back" and server.restarts == 1


async def test_a_server_killed_while_idle_is_seen_dead_by_the_next_turn(tmp_path: Path) -> None:
    flag, ready = tmp_path / "started", tmp_path / "ready"
    flag.touch()
    ready.touch()
    gated = flag_gated(flag, ready)
    server = McpServer("demo", command=gated, allow=["count"], init_timeout=120)
    model = ScriptedModel([ToolCall("c1", "demo_count"), "first", "second"])
    async with McpToolset([server]) as mcp:
        agent = Agent(model, middleware=[mcp])
        first = await agent.run("go", thread_id="t")
        (counted,) = [m for m in first.new_messages if isinstance(m, ToolMessage)]
        ready.unlink()  # a restart now hangs before `initialize`
        os.kill(int(str(counted.data).split()[-1]), signal.SIGKILL)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while server.lost_session is None:  # until the session reads the end of its stdout
            assert loop.time() < deadline, "the session never saw its process exit"
            await asyncio.sleep(0.01)
        second = await agent.run("again", thread_id="t")
    (skipped,) = [e for e in second.events if isinstance(e, McpServerSkipped)]
    assert "its session ended: the server closed the connection" in skipped.reason
    assert second.output == "second" and tool_names(model.requests[2]) == []


async def test_a_session_that_died_and_restarts_within_the_wait_keeps_its_tools() -> None:
    server = McpServer("demo", command=STDIO, allow=["echo", "crash"])
    model = ScriptedModel(
        [ToolCall("c1", "demo_crash"), "first", ToolCall("c2", "demo_echo", {"text": "hi"}), "ok"]
    )
    # a generous wait, so a slow start on a loaded machine still lands inside the turn
    async with McpToolset([server], reconnect_seconds=60) as mcp:
        agent = Agent(model, middleware=[mcp])
        await agent.run("go", thread_id="t")
        second = await agent.run("again", thread_id="t")
    assert not [e for e in second.events if isinstance(e, McpServerSkipped)]
    assert sorted(tool_names(model.requests[2])) == ["demo_crash", "demo_echo"]
    (echoed,) = [m for m in second.new_messages if isinstance(m, ToolMessage)]
    assert echoed.data == "hi" and server.restarts == 1


class Entered(Middleware):
    """Sets ``entered`` when its turn reaches it (placed before the toolset)."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        self.entered.set()
        await next()


async def test_a_turn_that_starts_while_another_waits_for_the_restart_waits_for_it_too(
    tmp_path: Path,
) -> None:
    flag, ready = tmp_path / "started", tmp_path / "ready"
    flag.touch()
    ready.touch()
    server = McpServer("demo", command=flag_gated(flag, ready), allow=["crash"], init_timeout=120)
    first_model = ScriptedModel([ToolCall("c1", "demo_crash"), "first", "second"])
    other_model, entered = ScriptedModel(["other"]), Entered()
    # a generous wait, so a slow start on a loaded machine still lands inside both turns
    async with McpToolset([server], reconnect_seconds=120) as mcp:
        agent = Agent(first_model, middleware=[mcp])
        other = Agent(other_model, middleware=[entered, mcp])
        await agent.run("go", thread_id="t")  # the server process exits mid-call
        ready.unlink()  # its restart now hangs before `initialize`
        second = asyncio.create_task(agent.run("again", thread_id="t"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        while "demo" not in mcp._retries:  # the second turn waits for the restart
            assert loop.time() < deadline, "the turn never started the restart"
            await asyncio.sleep(0.01)
        concurrent = asyncio.create_task(other.run("meanwhile", thread_id="u"))
        await entered.entered.wait()  # its toolset step runs before the server can be back
        ready.touch()
        results = await asyncio.gather(second, concurrent)
    for result in results:
        assert not [e for e in result.events if isinstance(e, McpServerSkipped)]
    assert tool_names(first_model.requests[2]) == tool_names(other_model.requests[0])
    assert tool_names(other_model.requests[0]) == ["demo_crash"] and server.restarts == 1


@pytest.mark.parametrize("closed", ["toolset", "server"])
async def test_a_turn_waiting_for_a_restart_when_the_toolset_closes_starts_no_retry(
    tmp_path: Path, closed: str
) -> None:
    flag, ready = tmp_path / "started", tmp_path / "ready"
    flag.touch()
    ready.touch()
    server = McpServer("demo", command=flag_gated(flag, ready), allow=["crash"], init_timeout=120)
    model = ScriptedModel([ToolCall("c1", "demo_crash"), "first", "never"])
    mcp = McpToolset([server], reconnect_seconds=120)
    agent = Agent(model, middleware=[mcp])
    await agent.run("go", thread_id="t")  # the server process exits mid-call
    ready.unlink()  # its restart now hangs before `initialize`
    turn = asyncio.create_task(agent.run("again", thread_id="t"))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while "demo" not in mcp._retries:  # the turn waits for the restart
        assert loop.time() < deadline, "the turn never started the restart"
        await asyncio.sleep(0.01)
    retry = mcp._retries["demo"]
    await (mcp.aclose() if closed == "toolset" else server.aclose())
    with pytest.raises(TurnAborted) as info:
        await turn
    # a closed server raises (as it does for a turn started after aclose): no retry after aclose
    assert isinstance(info.value.error, McpServerClosed)
    assert len(model.requests) == 2 and retry.done()
    assert mcp._retries == ({} if closed == "toolset" else {"demo": retry})
    await mcp.aclose()


@pytest.mark.parametrize("wait", [0, -1, float("inf"), float("nan"), "2", True])
def test_the_reconnect_wait_must_be_a_positive_finite_number(wait: object) -> None:
    with pytest.raises(McpConfigError, match="reconnect_seconds must be a number of seconds"):
        McpToolset([], reconnect_seconds=wait)  # type: ignore[arg-type]
