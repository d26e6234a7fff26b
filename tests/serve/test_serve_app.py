"""``create_app`` in this process: the request span is the parent of the turn's GenAI spans;
the options and bounds refuse bad values; tool calls shown as text."""

from __future__ import annotations

import httpx
import pytest
from otel_memory import Otel, otel

from plait import Agent, ConfigurationError, ScriptedModel, ToolCall, tool
from plait.serve import ServeLimits, create_app

__all__ = ["otel"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_the_request_span_is_the_parent_of_the_turn_spans(otel: Otel) -> None:
    model = ScriptedModel(["hi there"])
    agent = Agent(model, middleware=[otel.telemetry()])
    app = create_app(agent, tracer_provider=otel.tracer_provider)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post(
            "/v1/chat/completions",
            json={"model": "plait", "messages": [{"role": "user", "content": "hello"}]},
        )
    assert answer.json()["choices"][0]["message"]["content"] == "hi there"
    request = otel.one("POST /v1/chat/completions")
    turn_spans = [s for s in otel.spans() if s is not request]
    assert turn_spans
    assert all(s.context is not None and request.context is not None for s in turn_spans)
    assert request.context is not None
    assert all(s.context.trace_id == request.context.trace_id for s in turn_spans if s.context)
    roots = [
        s
        for s in turn_spans
        if s.parent is not None and s.parent.span_id == request.context.span_id
    ]
    assert roots, [s.name for s in turn_spans]
    model.assert_complete()


async def test_tool_calls_can_be_shown_as_text() -> None:
    model = ScriptedModel([ToolCall("c1", "add", {"a": 1, "b": 2}), "three"])
    app = create_app({"calc": Agent(model, tools=[add])}, tool_calls="text")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post(
            "/v1/chat/completions",
            json={"model": "calc", "messages": [{"role": "user", "content": "1+2"}]},
        )
    content = answer.json()["choices"][0]["message"]["content"]
    assert '[tool add({"a": 1, "b": 2}) → 3]' in content and content.endswith("three")
    model.assert_complete()


def test_bad_options_are_configuration_errors() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="tool_calls"):
        create_app(agent, tool_calls="shown")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="max_body_bytes"):
        ServeLimits(max_body_bytes=0)
    with pytest.raises(ConfigurationError, match="idle_timeout"):
        ServeLimits(idle_timeout=0)
    with pytest.raises(ConfigurationError, match="at least one agent"):
        create_app({})
