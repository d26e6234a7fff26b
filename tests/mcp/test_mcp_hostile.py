"""A server whose tool list is hostile, next to a good server and local tools: the turn answers,
the other tools work, and an event names the cause (issue 29). Real servers over stdio: the
hostile one speaks JSON-RPC itself (``tests/support/mcp_hostile_server.py``), the good one is
FastMCP (``tests/support/mcp_server.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from mcp_hostile_server import COMMAND, LONG, serve_http
from mcp_server import STDIO

from plait import Agent, ScriptedModel, ToolCall, ToolMessage, tool
from plait.mcp import (
    McpConfigError,
    McpServer,
    McpServerSkipped,
    McpToolListError,
    McpToolRejected,
    McpToolset,
    McpToolsSkipped,
)
from plait.runtime import ToolSearch


@tool
def local(text: str) -> str:
    """A local tool."""
    return f"local {text}"


@dataclass(frozen=True)
class Case:
    """A hostile ``tools/list``: what a turn must report, and which of its tools stay."""

    name: str
    event: type[McpServerSkipped | McpToolsSkipped]
    cause: str
    left_out: list[str]  # the server's own names, for McpToolsSkipped
    kept: list[str]  # the hostile server's tools that stay, prefixed
    prefix: str = "bad"


CASES = [
    Case("malformed", McpServerSkipped, "malformed result (tools: Input should be a valid list)",
         [], []),
    Case("nameless", McpServerSkipped, "malformed result (tools.1.name: Field required)", [], []),
    Case("pages", McpServerSkipped, "malformed result (its pages repeat a cursor)", [], []),
    Case("sanitize", McpToolsSkipped, "tools 'a.b', 'a b' both become 'bad_a_b'",
         ["a.b", "a b"], ["bad_echo"]),
    Case("cut", McpToolsSkipped, f"both become 'bad_{LONG[:60]}' (prefixed",
         [LONG + "_a", LONG + "_b"], ["bad_echo"]),
    Case("many", McpServerSkipped, "lists more than max_tools=500 tools; raise max_tools",
         [], []),
    Case("schema", McpToolsSkipped, "more than max_schema_chars=20,000", ["big"], ["bad_echo"]),
    Case("search_tools", McpToolsSkipped,
         "its tool 'tools' becomes 'search_tools', the name of an agent or middleware tool",
         ["tools"], ["search_echo", "search_search_tools"], prefix="search"),
]  # fmt: skip


def tool_names(request: object) -> list[str]:
    return sorted(t.name for t in request.tools)  # type: ignore[attr-defined]


def replies(messages: list[Any]) -> dict[str, Any]:
    return {m.tool_call_id: m.data for m in messages if isinstance(m, ToolMessage)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_a_hostile_tool_list_leaves_out_only_what_is_bad_and_the_turn_answers(
    case: Case,
) -> None:
    hostile = McpServer("bad", command=[*COMMAND, case.name], prefix=case.prefix)
    good = McpServer("good", command=STDIO, allow=["echo"])
    calls = [ToolCall("c1", "local", {"text": "a"}), ToolCall("c2", "good_echo", {"text": "b"})]
    calls += [ToolCall(f"k{i}", name, {"text": name}) for i, name in enumerate(case.kept)]
    model = ScriptedModel([calls, "answered"])
    async with McpToolset([hostile, good]) as mcp:
        agent = Agent(model, tools=[local], middleware=[mcp, ToolSearch()])
        result = await agent.run("go")
    model.assert_complete()
    assert result.output == "answered"
    expected = ["good_echo", "local", "search_tools", *case.kept]
    assert tool_names(model.requests[0]) == sorted(expected)
    data = replies(result.new_messages)
    assert data == {"c1": "local a", "c2": "b"} | {f"k{i}": n for i, n in enumerate(case.kept)}
    (event,) = [e for e in result.events if isinstance(e, McpServerSkipped | McpToolsSkipped)]
    assert type(event) is case.event and event.server == "bad"
    assert case.cause in event.reason and event.reason.startswith("MCP server 'bad'")
    if isinstance(event, McpToolsSkipped):
        assert event.tools == case.left_out


@pytest.mark.parametrize("case", ["malformed", "many"])
async def test_an_unusable_tool_list_is_a_typed_error_and_retried_like_an_unreachable_server(
    case: str,
) -> None:
    hostile = McpServer("bad", command=[*COMMAND, case])
    model = ScriptedModel(["one", "two"])
    async with McpToolset([hostile], retry_seconds=1e-6) as mcp:
        agent = Agent(model, tools=[local], middleware=[mcp])
        first = await agent.run("go", thread_id="t")
        await agent.run("go", thread_id="t")  # starts the retry in the background
        await mcp.wait_for_retries()
        with pytest.raises(McpToolListError) as info:
            await hostile.list_tools()
    (skipped,) = [e for e in first.events if isinstance(e, McpServerSkipped)]
    assert skipped.failures == 1 and mcp._down["bad"].failures == 2
    assert info.value.server == "bad" and str(info.value) == skipped.reason
    assert not isinstance(info.value, McpConfigError)  # the server is at fault, not the settings


@pytest.mark.parametrize("case", ["malformed", "sanitize"])
async def test_a_hostile_tool_list_over_http_is_left_out_the_same_way(case: str) -> None:
    model = ScriptedModel([ToolCall("c1", "local", {"text": "a"}), "answered"])
    with serve_http(case) as url:
        async with McpToolset([McpServer("bad", url=url)]) as mcp:
            result = await Agent(model, tools=[local], middleware=[mcp]).run("go")
    assert result.output == "answered" and replies(result.new_messages) == {"c1": "local a"}
    reports = [e for e in result.events if isinstance(e, McpServerSkipped | McpToolsSkipped)]
    if case == "malformed":
        assert tool_names(model.requests[0]) == ["local"]
        assert [type(e) for e in reports] == [McpServerSkipped]
        assert "malformed result (tools: Input should be a valid list)" in reports[0].reason
    else:
        assert tool_names(model.requests[0]) == ["bad_echo", "local"]
        assert [(type(e), getattr(e, "tools", None)) for e in reports] == [
            (McpToolsSkipped, ["a.b", "a b"])
        ]


async def test_the_limits_are_settings_raised_they_keep_the_tools() -> None:
    many = McpServer("many", command=[*COMMAND, "many"], max_tools=501)
    big = McpServer("big", command=[*COMMAND, "schema"], max_schema_chars=40_000)
    async with many, big:
        assert len(await many.list_tools()) == 501 and not many.rejected_tools
        assert [t.name for t in await big.list_tools()] == ["big_echo", "big_big"]


async def test_a_name_two_servers_tools_share_is_left_out_of_both_in_a_turn() -> None:
    # prefix "a" + tool "b_echo" and prefix "a_b" + tool "echo" are both "a_b_echo"
    one = McpServer("one", command=STDIO, prefix="a", allow=["b_echo", "count"])
    two = McpServer("two", command=STDIO, prefix="a_b", allow=["echo"])
    model = ScriptedModel([ToolCall("c1", "a_count"), "answered"])
    async with McpToolset([one, two]) as mcp:
        result = await Agent(model, tools=[local], middleware=[mcp]).run("go")
        with pytest.raises(McpConfigError, match="'one' and 'two' both have a tool named"):
            await mcp.list_tools()  # asked for the whole set, the toolset still refuses it
    assert result.output == "answered" and tool_names(model.requests[0]) == ["a_count", "local"]
    skipped = [(e.server, e.tools) for e in result.events if isinstance(e, McpToolsSkipped)]
    assert skipped == [("one", ["b_echo"]), ("two", ["echo"])]
    reasons = [e.reason for e in result.events if isinstance(e, McpToolsSkipped)]
    assert all("becomes 'a_b_echo', a name MCP servers 'one' and 'two' share" in r for r in reasons)


async def test_left_out_tools_are_reported_on_every_turn_until_fixed() -> None:
    hostile = McpServer("bad", command=[*COMMAND, "sanitize"])
    model = ScriptedModel(["one", "two"])
    async with McpToolset([hostile]) as mcp:
        agent = Agent(model, middleware=[mcp])
        runs = [await agent.run("go", thread_id="t") for _ in range(2)]
    for run in runs:
        (event,) = [e for e in run.events if isinstance(e, McpToolsSkipped)]
        assert event.tools == ["a.b", "a b"] and event.type == "mcp_tools_skipped"
    (rejected,) = hostile.rejected_tools
    assert isinstance(rejected, McpToolRejected) and rejected.tools == ["a.b", "a b"]
