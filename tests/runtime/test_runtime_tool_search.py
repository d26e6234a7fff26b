"""Deferred tools: registered but hidden until ``search_tools`` finds them."""

from __future__ import annotations

from typing import Any

import pytest

from plait import Agent, FunctionModel, ModelRequest, ModelResponse, ScriptedModel, ToolCall, tool
from plait.context import SummarizationMiddleware
from plait.errors import ConfigurationError
from plait.runtime import ToolSearch
from plait.stores import MemoryThreadStore


@tool(deferred=True)
def refund_order(order_id: str) -> str:
    """Refund a customer order by id."""
    return f"refunded {order_id}"


@tool(deferred=True)
def export_ledger() -> str:
    """Export the accounting ledger."""
    return "ledger"


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def names(request: ModelRequest) -> list[str]:
    return [t.name for t in request.tools]


async def test_deferred_tools_are_hidden_until_searched_then_callable() -> None:
    model = ScriptedModel(
        [
            ToolCall("s1", "search_tools", {"query": "refund an order"}),
            ToolCall("r1", "refund_order", {"order_id": "A7"}),
            "done",
        ]
    )
    agent = Agent(model, tools=[ping, refund_order, export_ledger])
    assert any(isinstance(m, ToolSearch) for m in agent.middleware)
    result = await agent.run("refund A7")
    assert names(model.requests[0]) == ["ping", "search_tools"]
    assert names(model.requests[1]) == ["ping", "search_tools", "refund_order"]
    search = result.new_messages[2]
    assert search.data["tools"] == [  # type: ignore[union-attr]
        {"name": "refund_order", "description": "Refund a customer order by id."}
    ]
    assert result.new_messages[4].data == "refunded A7"  # type: ignore[union-attr]


async def test_no_deferred_tools_no_search_tool() -> None:
    model = ScriptedModel(["ok"])
    await Agent(model, tools=[ping]).run("go")
    assert names(model.requests[0]) == ["ping"]


async def test_compaction_that_drops_the_search_withdraws_the_tools() -> None:
    def respond(request: ModelRequest) -> ModelResponse | str:
        if len(request.messages) == 1 and request.messages[0].text == "find":
            return ModelResponse(tool_calls=[ToolCall("s1", "search_tools", {"query": "ledger"})])
        return "ok"

    model = FunctionModel(respond)
    agent = Agent(
        model,
        tools=[export_ledger],
        middleware=[SummarizationMiddleware(60, keep_messages=1, trigger_ratio=0.5)],
    )
    await agent.run("find", thread_id="t")
    assert "export_ledger" in names(model.requests[1])
    await agent.run("x " * 200, thread_id="t")  # pushes the history over budget
    assert "export_ledger" not in names(model.requests[-1])


async def test_search_results_of_another_shape_in_the_thread_are_ignored() -> None:
    # The thread was written by an agent whose own tool was called `search_tools` (or edited by
    # hand): its results are not ToolSearch's, and must not break the turns that follow.
    @tool(name="search_tools")
    def other_search(query: str) -> Any:
        """Another agent's search."""
        return {"tools": 5} if query == "a" else {"tools": [{"name": ["x"]}, {"name": 7}]}

    store = MemoryThreadStore()
    first = ScriptedModel(
        [
            ToolCall("a", "search_tools", {"query": "a"}),
            ToolCall("b", "search_tools", {"query": "b"}),
            "ok",
        ]
    )
    await Agent(first, tools=[other_search], store=store).run("go", thread_id="t")
    second = ScriptedModel(["still fine"])

    result = await Agent(second, tools=[ping, refund_order], store=store).run(
        "again", thread_id="t"
    )

    assert result.output == "still fine"
    assert names(second.requests[0]) == ["ping", "search_tools"]


def test_a_limit_below_one_is_a_configuration_error() -> None:
    for limit in (0, -1, 2.5, True):
        with pytest.raises(ConfigurationError, match="limit"):
            ToolSearch(limit=limit)  # type: ignore[arg-type]
