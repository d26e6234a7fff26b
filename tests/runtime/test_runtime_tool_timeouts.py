"""Every tool call has a deadline: ``Limits.tool_timeout`` and ``@tool(timeout=...)`` (issue 11 §3).

A timed-out call is cancelled and answered with an error result (the call/result pair stays
intact), a ``ToolTimeoutReached`` event says so, and the turn goes on.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest

from plait import Agent, tool
from plait.errors import ConfigurationError
from plait.messages import ToolCall, ToolMessage
from plait.models import ScriptedModel
from plait.runtime.agent import DEFAULT_TOOL_TIMEOUT, Limits
from plait.runtime.events import ToolTimeoutReached
from plait.stores import MemoryThreadStore

cancelled: list[str] = []


@tool
async def never_returns() -> str:
    """Wait forever."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.append("never_returns")
        raise
    return "unreachable"


@tool(timeout=0.05)
async def own_short_timeout() -> str:
    """Wait forever, with its own short timeout."""
    await asyncio.Event().wait()
    return "unreachable"


@tool(timeout=math.inf)
async def no_timeout() -> str:
    """Take a little longer than the agent's tool timeout."""
    await asyncio.sleep(0.2)
    return "finished"


@tool
async def quick() -> str:
    """Answer at once."""
    return "quick"


@tool
async def raises_its_own_timeout() -> str:
    """Fail with a TimeoutError of its own (e.g. a socket timeout)."""
    raise TimeoutError("socket timed out")


async def run(calls: list[ToolCall], tools: list[Any], limits: Limits) -> tuple[Any, Any]:
    store = MemoryThreadStore()
    agent = Agent(ScriptedModel([calls, "done"]), tools=tools, store=store, limits=limits)
    result = await agent.run("go", thread_id="t")
    snap = await store.load("t")
    return result, {m.tool_call_id: m for m in snap.messages if isinstance(m, ToolMessage)}


async def test_a_tool_that_never_returns_is_cancelled_and_answered_with_an_error() -> None:
    cancelled.clear()
    result, by_id = await run(
        [ToolCall("a", "never_returns"), ToolCall("b", "quick")],
        [never_returns, quick],
        Limits(tool_timeout=0.05),
    )
    assert result.output == "done"
    assert by_id["a"].is_error
    assert by_id["a"].data.startswith("Tool 'never_returns' timed out after 0.05 s")
    assert by_id["b"].data == "quick" and not by_id["b"].is_error
    assert cancelled == ["never_returns"]
    timed_out = [e for e in result.events if isinstance(e, ToolTimeoutReached)]
    assert [(e.call.id, e.timeout) for e in timed_out] == [("a", 0.05)]


async def test_a_tools_own_timeout_wins_over_the_limit() -> None:
    result, by_id = await run(
        [ToolCall("a", "own_short_timeout"), ToolCall("b", "no_timeout")],
        [own_short_timeout, no_timeout],
        Limits(tool_timeout=0.1),
    )
    assert "timed out after 0.05 s" in by_id["a"].data
    assert by_id["b"].data == "finished"
    assert [e.call.id for e in result.events if isinstance(e, ToolTimeoutReached)] == ["a"]


async def test_a_blocking_sync_tool_cannot_be_stopped_but_the_turn_moves_on() -> None:
    release = threading.Event()

    @tool(blocking=True, timeout=0.05)
    def stuck() -> str:
        """Block a worker thread."""
        release.wait(30)
        return "late"

    try:
        result, by_id = await run([ToolCall("a", "stuck")], [stuck], Limits())
    finally:
        release.set()
    assert result.output == "done"
    assert by_id["a"].is_error and "timed out" in by_id["a"].data


async def test_a_timeout_error_raised_by_the_tool_itself_is_an_ordinary_failure() -> None:
    result, by_id = await run(
        [ToolCall("a", "raises_its_own_timeout")], [raises_its_own_timeout], Limits()
    )
    assert by_id["a"].data == "Tool 'raises_its_own_timeout' failed: TimeoutError: socket timed out"
    assert not [e for e in result.events if isinstance(e, ToolTimeoutReached)]


def test_the_default_timeout_is_documented_and_applies() -> None:
    assert Limits().tool_timeout == DEFAULT_TOOL_TIMEOUT == 300.0
    assert quick.timeout is None  # None: the agent's Limits.tool_timeout applies


@pytest.mark.parametrize("bad", [0, -1, math.nan, "10", True])
def test_a_timeout_that_is_not_a_positive_number_is_a_configuration_error(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="must be a number of seconds > 0"):
        Limits(tool_timeout=bad)

    with pytest.raises(ConfigurationError, match="tool 'f'"):

        @tool(timeout=bad)
        def f() -> str:
            """Nothing."""
            return ""


async def test_a_tool_that_waits_then_finishes_in_time_gets_its_result_through() -> None:
    @tool
    async def waits() -> str:
        """Suspend a few times, then answer."""
        for _ in range(3):
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        return "after waiting"

    result, by_id = await run([ToolCall("a", "waits")], [waits], Limits(tool_timeout=30))
    assert by_id["a"].data == "after waiting" and not by_id["a"].is_error
    assert not [e for e in result.events if isinstance(e, ToolTimeoutReached)]
