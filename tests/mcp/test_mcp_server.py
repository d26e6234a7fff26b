"""McpServer against a real FastMCP server over stdio and Streamable HTTP: listing, prefixes,
filters, results (their content kinds: test_mcp_results.py), timeouts, crashes and restarts."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from mcp_server import STDIO, HttpServerProcess

from plait.errors import ToolError, ToolTimeoutError
from plait.mcp import (
    McpConfigError,
    McpConnectError,
    McpServer,
    McpServerClosed,
    McpToolRejected,
)


async def _call(server: McpServer, name: str, **args: Any) -> Any:
    tools = {t.name: t for t in await server.list_tools()}
    tool = tools[f"{server.prefix}_{name}"]
    return await server.call(tool.remote.name, args, tool=tool.name)


async def test_stdio_tools_are_prefixed_and_filtered() -> None:
    async with McpServer("demo", command=STDIO, block=["crash"]) as server:
        names = {t.name for t in await server.list_tools()}
    assert "demo_echo" in names and "demo_weather" in names
    assert "demo_crash" not in names and "echo" not in names


async def test_allow_keeps_only_the_named_tools_and_a_custom_prefix() -> None:
    async with McpServer("demo", command=STDIO, prefix="d", allow=["echo"]) as server:
        tools = await server.list_tools()
        assert [t.name for t in tools] == ["d_echo"]
        assert tools[0].definition.parameters["required"] == ["text"]
        assert await _call(server, "echo", text="hi") == "hi"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_structured_output_becomes_the_result(transport: str, http_url: str) -> None:
    where: dict[str, Any] = {"command": STDIO} if transport == "stdio" else {"url": http_url}
    async with McpServer("demo", **where) as server:
        assert await _call(server, "weather", city="Oslo") == {"city": "Oslo", "celsius": 21.5}
        assert await _call(server, "echo", text="over " + transport) == "over " + transport


async def test_is_error_becomes_a_tool_error_with_the_server_text() -> None:
    async with McpServer("demo", command=STDIO) as server:
        with pytest.raises(ToolError, match="the disk is on fire"):
            await _call(server, "fail")


async def test_an_output_schema_without_structured_content_is_an_error_result() -> None:
    async with McpServer("demo", command=STDIO) as server:
        assert server.restarts == 0
        schema = {t.name: t.remote.output_schema for t in await server.list_tools()}
        assert schema["demo_no_structure"] is not None
        with pytest.raises(ToolError, match="no structured output"):
            await _call(server, "no_structure", city="Oslo")
        assert await _call(server, "echo", text="still up") == "still up"


async def test_a_caller_cancelled_mid_call_leaves_the_session_usable() -> None:
    async with McpServer("demo", command=STDIO) as server:
        await _call(server, "count")
        waiting = asyncio.create_task(_call(server, "slow", seconds=30))
        await asyncio.sleep(0.3)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert (await _call(server, "count")).startswith("2 in pid")
        assert server.restarts == 0


async def test_long_text_is_cut_with_a_note() -> None:
    async with McpServer("demo", command=STDIO, max_result_chars=10) as server:
        result = await _call(server, "echo", text="x" * 25)
    assert result == "x" * 10 + "\n[... 15 more characters cut]"


async def test_a_slow_tool_times_out_and_the_session_survives() -> None:
    async with McpServer("demo", command=STDIO, timeout=0.5) as server:
        with pytest.raises(ToolTimeoutError, match="demo_slow"):
            await _call(server, "slow", seconds=30)
        first = await _call(server, "count")
        second = await _call(server, "count")
        assert server.restarts == 0
    assert first.split(" in pid ")[1] == second.split(" in pid ")[1]  # the same process
    assert (first[0], second[0]) == ("1", "2")  # state survives between calls


async def test_a_server_that_crashes_mid_call_is_restarted_on_the_next_call() -> None:
    async with McpServer("demo", command=STDIO) as server:
        before = await _call(server, "count")
        with pytest.raises(ToolError, match="closed the connection"):
            await _call(server, "crash")
        after = await _call(server, "count")
        assert server.restarts == 1
    assert before.split(" in pid ")[1] != after.split(" in pid ")[1]
    assert after.startswith("1 in pid")


async def test_tool_list_changed_refreshes_the_cache() -> None:
    async with McpServer("demo", command=STDIO) as server:
        assert "demo_extra" not in {t.name for t in await server.list_tools()}
        assert await _call(server, "grow") == "grown"
        for _ in range(100):  # the notification arrives right after the result
            if "demo_extra" in {t.name for t in await server.list_tools()}:
                break
            await asyncio.sleep(0.05)
        assert await _call(server, "extra") == "extra!"


async def test_closing_many_servers_in_any_order_from_other_tasks() -> None:
    servers = [McpServer(f"s{i}", command=STDIO) for i in range(3)]
    await asyncio.gather(*(s.connect() for s in servers))
    await servers[1].aclose()
    await asyncio.create_task(servers[2].aclose())
    await asyncio.gather(servers[0].aclose(), servers[1].aclose())  # twice is fine
    for server in servers:
        assert server._client is None


async def test_cancelling_during_connect_then_closing_raises_nothing() -> None:
    server = McpServer("late", command=STDIO, env={"MCP_TEST_START_DELAY": "30"})
    connecting = asyncio.create_task(server.connect())
    await asyncio.sleep(0.3)
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    await server.aclose()
    assert server._client is None


async def test_a_server_slow_to_start_fails_with_a_connect_error() -> None:
    from plait.mcp import McpConnectError

    server = McpServer("late", command=STDIO, env={"MCP_TEST_START_DELAY": "30"}, init_timeout=0.5)
    with pytest.raises(McpConnectError, match="init_timeout"):
        await server.connect()
    await server.aclose()


async def test_a_command_that_does_not_exist_is_a_connect_error() -> None:
    from plait.mcp import McpConnectError

    async with McpServer("nope", command=["/nonexistent/mcp-server"]) as server:
        with pytest.raises(McpConnectError, match="nope"):
            await server.list_tools()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of"),
        ({"command": STDIO, "url": "http://x"}, "exactly one of"),
        ({"command": "python server.py"}, "list of strings"),
        ({"url": "ftp://x"}, "http://"),
        ({"command": STDIO, "prefix": ""}, "prefix"),
        ({"command": STDIO, "prefix": "1x"}, "prefix"),
        ({"command": STDIO, "timeout": 0}, "timeout"),
        ({"command": STDIO, "timeout": float("inf")}, "finite"),
        ({"command": STDIO, "allow": "echo"}, "list of tool names"),
        ({"url": "http://x", "env": {"A": "1"}}, "env and cwd"),
    ],
)
def test_bad_settings_are_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(McpConfigError, match=message):
        McpServer("s", **kwargs)


async def test_an_http_server_killed_mid_call_fails_the_call_and_reconnects_later(
    http_process: HttpServerProcess,
) -> None:
    async with McpServer("web", url=http_process.url, timeout=30) as server:
        assert await _call(server, "echo", text="up") == "up"
        waiting = asyncio.create_task(_call(server, "slow", seconds=30))
        await asyncio.sleep(0.5)  # the call is in flight
        http_process.kill()
        with pytest.raises(ToolError) as info:
            await waiting
        assert not isinstance(info.value, ToolTimeoutError)
        http_process.start()
        assert await _call(server, "echo", text="back") == "back"
        assert server.restarts == 1


def test_without_the_sdk_a_server_is_a_config_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an environment without the extra sees
    with pytest.raises(McpConfigError, match=r"pip install 'plait\[mcp\]'"):
        McpServer("s", command=STDIO)


async def test_a_long_tool_description_is_cut_with_a_note() -> None:
    async with McpServer("demo", command=STDIO, allow=["echo"], max_description_chars=10) as s:
        (echo,) = await s.list_tools()
    assert echo.definition.description == "Return the [description cut at 10 characters]"


FLOOD = (
    "import sys, time\n"
    "sys.stdout.write('x' * 3_000_000)\n"  # one 'line' that never ends
    "sys.stdout.flush()\n"
    "time.sleep(60)\n"
)


async def test_a_line_longer_than_max_message_bytes_ends_the_session_naming_the_bound() -> None:
    flood = McpServer(
        "flood", command=[sys.executable, "-c", FLOOD], max_message_bytes=1_000_000, init_timeout=20
    )
    async with flood:
        with pytest.raises(McpConnectError, match="longer than 1,000,000 bytes") as info:
            await flood.list_tools()
    assert "raise the server's max_message_bytes" in str(info.value)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_result_over_max_message_bytes_fails_the_call_and_the_next_call_restarts(
    transport: str, http_url: str
) -> None:
    where: dict[str, Any] = {"command": STDIO} if transport == "stdio" else {"url": http_url}
    async with McpServer("big", **where, max_message_bytes=200_000) as server:
        with pytest.raises(ToolError, match="longer than 200,000 bytes"):
            await _call(server, "echo", text="x" * 300_000)
        assert await _call(server, "echo", text="small") == "small"
    assert server.restarts == 1


async def test_a_tool_whose_input_schema_is_over_max_schema_chars_is_left_out_naming_it() -> None:
    async with McpServer(
        "demo", command=STDIO, allow=["echo", "count"], max_schema_chars=80
    ) as server:
        assert [t.name for t in await server.list_tools()] == ["demo_count"]
        (rejected,) = server.rejected_tools
    assert isinstance(rejected, McpToolRejected) and isinstance(rejected, McpConfigError)
    assert rejected.tools == ["echo"] and "tool 'echo' has an input schema of" in str(rejected)
    assert "more than max_schema_chars=80" in str(rejected) and "block the tool" in str(rejected)
    async with McpServer("demo", command=STDIO, allow=["echo"]) as server:
        (echo,) = await server.list_tools()
    assert echo.definition.parameters["required"] == ["text"] and not server.rejected_tools


async def test_a_closed_server_refuses_every_use_naming_itself() -> None:
    server = McpServer("demo", command=STDIO, allow=["echo"])
    assert await _call(server, "echo", text="hi") == "hi"
    await server.aclose()
    assert server.closed
    with pytest.raises(McpServerClosed, match="'demo' was closed"):
        await server.list_tools()
    with pytest.raises(McpServerClosed, match="create a new McpServer"):
        await server.connect()
    with pytest.raises(ToolError, match="'demo' was closed"):
        await server.call("echo", {"text": "again"}, tool="demo_echo")
    assert server.restarts == 0
    await server.aclose()  # still idempotent
