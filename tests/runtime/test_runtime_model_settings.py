"""Model settings set on the agent and per run reach every request a turn builds; streamed
reasoning becomes ReasoningDeltaReceived; foreign reasoning is reported as ReasoningDropped."""

from __future__ import annotations

from collections.abc import AsyncIterator

from plait import Agent, tool
from plait.messages import AssistantMessage, Message, ReasoningPart, TextPart, ToolCall, UserMessage
from plait.models import FunctionModel, wrap_model
from plait.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    Reasoning,
    ReasoningDelta,
    ResponseComplete,
    StreamEvent,
    TextDelta,
)
from plait.models.language_model import LanguageModelMiddleware
from plait.runtime import ReasoningDeltaReceived, ReasoningDropped


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def call_then_answer(request: ModelRequest) -> ModelResponse:
    if any(isinstance(m, AssistantMessage) for m in request.messages[-2:]):
        return ModelResponse("done")
    return ModelResponse(tool_calls=[ToolCall("c1", "ping", {})], finish_reason="tool_calls")


async def test_agent_and_run_settings_are_merged_into_every_request() -> None:
    model = FunctionModel(call_then_answer)
    thinking = Reasoning(budget_tokens=2048)
    agent = Agent(
        model,
        tools=[ping],
        temperature=0.9,
        max_tokens=50,
        model_settings=ModelSettings(temperature=0.3, reasoning=thinking, extra={"a": 1}),
    )

    await agent.run("Go.", model_settings=ModelSettings(max_tokens=100, extra={"b": 2}))

    assert len(model.requests) == 2
    for request in model.requests:
        assert request.temperature == 0.3  # model_settings win over temperature=
        assert request.max_tokens == 100  # the run's win over the agent's
        assert request.reasoning is thinking
        assert request.extra == {"a": 1, "b": 2}


async def test_without_settings_requests_carry_the_agent_arguments() -> None:
    model = FunctionModel(lambda request: "ok")
    agent = Agent(model, temperature=0.5, max_tokens=10)

    await agent.run("Go.")

    [request] = model.requests
    assert (request.temperature, request.max_tokens, request.reasoning) == (0.5, 10, None)
    assert request.extra == {}


def test_run_sync_takes_model_settings() -> None:
    model = FunctionModel(lambda request: "ok")
    agent = Agent(model)

    agent.run_sync("Go.", model_settings=ModelSettings(reasoning=Reasoning(effort="high")))

    assert model.requests[0].reasoning == Reasoning(effort="high")


class ThinkingModel:
    """Streams reasoning, then text; declares whose reasoning it replays."""

    name = "thinking"
    reasoning_provider = "anthropic"

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        thought = ReasoningPart("anthropic", "Let me think.", {"type": "thinking"})
        return ModelResponse("Answer.", reasoning=[thought])

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.generate(request)
        yield ReasoningDelta("Let me ", 0)
        yield ReasoningDelta("think.", 0)
        yield TextDelta("Answer.")
        yield ResponseComplete(response)

    async def aclose(self) -> None:
        pass


async def test_streamed_reasoning_becomes_reasoning_delta_events() -> None:
    agent = Agent(ThinkingModel(), model_settings=ModelSettings(reasoning=Reasoning()))

    stream = agent.stream("Go.")
    events = [event async for event in stream]

    deltas = [e for e in events if isinstance(e, ReasoningDeltaReceived)]
    assert [(d.dispatch, d.text, d.index) for d in deltas] == [
        (0, "Let me ", 0),
        (0, "think.", 0),
    ]
    assert stream.result is not None
    [message] = [m for m in stream.result.new_messages if isinstance(m, AssistantMessage)]
    assert isinstance(message.content[0], ReasoningPart)
    assert message.text == "Answer."


def foreign_thread() -> list[Message]:
    return [
        UserMessage("Earlier."),
        AssistantMessage(
            [
                ReasoningPart("openai-responses", "", {"type": "reasoning", "id": "rs_1"}),
                ReasoningPart("openai-responses", "", {"type": "reasoning", "id": "rs_2"}),
                ReasoningPart("anthropic", "mine", {"type": "thinking"}),
                TextPart("Earlier answer."),
            ]
        ),
    ]


async def test_foreign_reasoning_is_reported_once_per_turn_and_provider() -> None:
    model = ThinkingModel()
    agent = Agent(model)
    await agent.store.append("t", foreign_thread(), expected_version=0)

    first = await agent.run("Now.", thread_id="t")
    second = await agent.run("Again.", thread_id="t")

    for result in (first, second):
        [dropped] = [e for e in result.events if isinstance(e, ReasoningDropped)]
        assert (dropped.dispatch, dropped.provider, dropped.count) == (0, "openai-responses", 2)


async def test_a_wrapped_model_is_checked_as_its_inner_model() -> None:
    agent = Agent(wrap_model(ThinkingModel(), LanguageModelMiddleware()))
    await agent.store.append("t", foreign_thread(), expected_version=0)

    result = await agent.run("Now.", thread_id="t")

    assert [e.provider for e in result.events if isinstance(e, ReasoningDropped)] == [
        "openai-responses"
    ]


async def test_a_model_without_a_reasoning_provider_is_not_checked() -> None:
    agent = Agent(FunctionModel(lambda request: "ok"))
    await agent.store.append("t", foreign_thread(), expected_version=0)

    result = await agent.run("Now.", thread_id="t")

    assert not [e for e in result.events if isinstance(e, ReasoningDropped)]
    assert result.output == "ok"


class ToolThenAnswer(ThinkingModel):
    """Calls ``echo`` once, then answers: a turn of two dispatches."""

    async def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if len(self.requests) == 1:
            return ModelResponse("", tool_calls=[ToolCall("c1", "echo", {"text": "x"})])
        return ModelResponse("Answer.")


async def test_foreign_reasoning_in_a_multi_call_turn_is_reported_at_its_first_dispatch() -> None:
    @tool
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    model = ToolThenAnswer()
    agent = Agent(model, tools=[echo])
    await agent.store.append("t", foreign_thread(), expected_version=0)

    result = await agent.run("Now.", thread_id="t")

    assert len(model.requests) == 2  # both requests still carried the foreign parts
    dropped = [e for e in result.events if isinstance(e, ReasoningDropped)]
    assert [(e.dispatch, e.provider, e.count) for e in dropped] == [(0, "openai-responses", 2)]
