"""``create_app`` in this process: the request span is the parent of the turn's GenAI spans;
the options and bounds refuse bad values; tool calls shown as text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from otel_memory import Otel, otel

from plait import (
    Agent,
    ConfigurationError,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    tool,
)
from plait.models.base import ModelResponse, ResponseComplete, StreamEvent, TextDelta
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


def blocked_agent(gate: asyncio.Event) -> Agent:
    async def answer(request: ModelRequest) -> str:
        await gate.wait()
        return "released"

    return Agent(FunctionModel(answer))


async def test_a_turn_without_events_past_idle_timeout_is_cancelled() -> None:
    gate = asyncio.Event()
    agent = blocked_agent(gate)
    app = create_app(agent, limits=ServeLimits(idle_timeout=0.3))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"X-Plait-Thread": "idle-1"},
        )
    assert answer.status_code == 504
    assert answer.json()["error"]["type"] == "deadline_exceeded"
    assert "idle_timeout" in answer.json()["error"]["message"]
    snapshot = await agent.store.load("idle-1")
    assert [m.role for m in snapshot.messages] == ["user"]  # the input persisted, nothing lost


class Trickle:
    """A model that streams ``words`` text deltas ``gap`` seconds apart, then stalls for
    ``stall`` seconds before it completes."""

    name = "trickle"

    def __init__(self, words: int, gap: float, stall: float = 0.0) -> None:
        self.words, self.gap, self.stall = words, gap, stall

    async def generate(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("served turns stream")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        for _ in range(self.words):
            await asyncio.sleep(self.gap)
            yield TextDelta("w ")
        await asyncio.sleep(self.stall)
        yield ResponseComplete(ModelResponse(content="w " * self.words, finish_reason="stop"))

    async def aclose(self) -> None:
        """Nothing to release."""


async def post_chat(agent: Agent, limits: ServeLimits, thread: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=create_app(agent, limits=limits))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"X-Plait-Thread": thread},
        )


async def test_events_keep_a_turn_longer_than_idle_timeout_alive() -> None:
    # 12 deltas 0.1 s apart: 1.2 s in all, four times the idle bound, never idle 0.3 s
    answer = await post_chat(Agent(Trickle(12, 0.1)), ServeLimits(idle_timeout=0.3), "alive")
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "w " * 12


async def test_a_turn_that_goes_quiet_after_events_is_cancelled_at_idle_timeout() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    agent = Agent(Trickle(5, 0.1, stall=30.0))
    answer = await post_chat(agent, ServeLimits(idle_timeout=0.4), "quiet")
    took = loop.time() - started
    assert answer.status_code == 504
    assert "idle_timeout" in answer.json()["error"]["message"]
    assert 0.5 + 0.4 <= took < 0.5 + 0.4 + 1.0  # the last event, then the idle bound


async def test_runs_queued_past_the_per_thread_bound_are_refused() -> None:
    gate = asyncio.Event()
    app = create_app(blocked_agent(gate), limits=ServeLimits(max_waiting_per_thread=1))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        first = (await client.post("/threads/q/runs", json={"input": "one"})).json()
        deadline = asyncio.get_running_loop().time() + 10
        while (await client.get(f"/threads/q/runs/{first['run_id']}")).json()[
            "status"
        ] != "running":
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)  # a poll bounded by the deadline above
        second = await client.post("/threads/q/runs", json={"input": "two"})
        third = await client.post("/threads/q/runs", json={"input": "three"})
        assert second.status_code == 202
        assert third.status_code == 429 and third.json()["error"]["type"] == "thread_busy"
        gate.set()
        done = (await client.get(f"/threads/q/runs/{second.json()['run_id']}/wait")).json()
        assert done["status"] == "success" and done["output"] == "released"
