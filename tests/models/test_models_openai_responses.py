"""OpenAIResponsesModel against a strict local Responses API server, through the official SDK.

:class:`ResponsesServer` verifies every reasoning item it issued comes back verbatim before its
function call, validates images and files, and streams the real event sequence.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from responses_server import ResponsesServer

from plait import Agent
from plait.errors import ConfigurationError, ProviderError
from plait.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    TextPart,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from plait.models import OpenAIResponsesModel, wrap_model
from plait.models.base import (
    Model,
    ModelRequest,
    ModelResponse,
    Reasoning,
    ReasoningDelta,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    collect_stream,
)
from plait.models.language_model import CallKind, LanguageModelMiddleware
from plait.tools import tool

ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)
THINK = Reasoning(effort="low", summary="auto")


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as wire:
        yield wire


@pytest.fixture
async def model(server: ResponsesServer) -> AsyncIterator[OpenAIResponsesModel]:
    adapter = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=server.url)
    yield adapter
    await adapter.aclose()


async def call(model: Model, request: ModelRequest, stream: bool) -> ModelResponse:
    if stream:
        return await collect_stream(model.stream(request))
    return await model.generate(request)


def request(messages: list[Message], **fields: Any) -> ModelRequest:
    fields.setdefault("reasoning", THINK)
    return ModelRequest(messages=messages, tools=[ADD], **fields)


# --- the tool loop ---------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_a_20_call_tool_loop_with_reasoning_replays_every_reasoning_item(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    for i in range(20):
        server.turn(reasoning=f"Step {i}: add {i} and 1.", calls=[("add", {"a": i, "b": 1})])
    server.turn(reasoning="All added.", text="The sums are done.")
    messages: list[Message] = [UserMessage("Add each number to 1, one call at a time.")]

    for _ in range(21):
        response = await call(model, request(messages), stream)
        messages.append(response.to_message())
        for tool_call in response.tool_calls:
            total = tool_call.args["a"] + tool_call.args["b"]
            messages.append(ToolMessage(tool_call.id, tool_call.name, str(total)))

    assert server.rejected == []
    assert response.content == "The sums are done." and response.finish_reason == "stop"
    assert len(server.received) == 21
    last_input = server.received[-1]["input"]
    replayed = [item for item in last_input if item.get("type") == "reasoning"]
    assert [item["summary"][0]["text"] for item in replayed] == [
        f"Step {i}: add {i} and 1." for i in range(20)
    ]
    first = messages[1]
    assert isinstance(first, AssistantMessage)
    [part] = [p for p in first.content if isinstance(p, ReasoningPart)]
    assert part.provider == "openai-responses" and part.text == "Step 0: add 0 and 1."
    assert replayed[0] == part.payload  # verbatim
    assert [m.data for m in messages if isinstance(m, ToolMessage)] == [
        str(i + 1) for i in range(20)
    ]


class Think(LanguageModelMiddleware):
    """Turns reasoning on for every call (what ``Agent(model_settings=...)`` will do)."""

    async def transform_params(self, request: ModelRequest, kind: CallKind) -> ModelRequest:
        return request.replace(reasoning=THINK)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
async def test_an_agent_runs_a_20_call_tool_loop_with_reasoning_on(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    for i in range(20):
        server.turn(reasoning=f"Step {i}.", calls=[("add", {"a": i, "b": 1})])
    server.turn(reasoning="Done.", text="All 20 sums are done.")
    agent = Agent(wrap_model(model, Think()), tools=[add])

    if stream:
        run = agent.stream("Add them", thread_id="t")
        async for _ in run:
            pass
        result = run.result
    else:
        result = await agent.run("Add them", thread_id="t")

    assert result is not None and result.output == "All 20 sums are done."
    assert server.rejected == [] and len(server.received) == 21
    stored = await agent.store.load("t")
    assert stored is not None
    parts = [
        part
        for message in stored.messages
        if isinstance(message, AssistantMessage)
        for part in message.content
        if isinstance(part, ReasoningPart)
    ]
    assert [part.text for part in parts] == [*(f"Step {i}." for i in range(20)), "Done."]
    assert all(part.payload["encrypted_content"] for part in parts)
    tool_outputs = [m.text for m in stored.messages if isinstance(m, ToolMessage)]
    assert tool_outputs == [str(i + 1) for i in range(20)]


async def test_a_stream_maps_reasoning_text_and_tool_call_events(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(reasoning="I should add.", text="Adding.", calls=[("add", {"a": 2, "b": 3})])

    events: list[StreamEvent] = [
        event async for event in model.stream(request([UserMessage("2+3?")]))
    ]

    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert reasoning == "I should add." and text == "Adding."
    assert calls[0].name == "add" and calls[0].id is not None
    assert "".join(c.args_fragment for c in calls) == '{"a": 2, "b": 3}'
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.tool_calls[0].args == {"a": 2, "b": 3}
    assert final.response.finish_reason == "tool_calls"
    assert final.response.reasoning[0].payload["encrypted_content"]


# --- reasoning replay is enforced -------------------------------------------------------------


class EditEncryptedContent(LanguageModelMiddleware):
    async def transform_params(self, request: ModelRequest, kind: CallKind) -> ModelRequest:
        messages: list[Message] = []
        for message in request.messages:
            if isinstance(message, AssistantMessage):
                content = [
                    ReasoningPart(
                        p.provider,
                        p.text,
                        {**p.payload, "encrypted_content": p.payload["encrypted_content"] + "x"},
                    )
                    if isinstance(p, ReasoningPart)
                    else p
                    for p in message.content
                ]
                message = AssistantMessage(content, tool_calls=message.tool_calls)
            messages.append(message)
        return request.replace(messages=messages)


class DropReasoning(LanguageModelMiddleware):
    async def transform_params(self, request: ModelRequest, kind: CallKind) -> ModelRequest:
        messages: list[Message] = [
            AssistantMessage(
                [p for p in m.content if not isinstance(p, ReasoningPart)],
                tool_calls=m.tool_calls,
            )
            if isinstance(m, AssistantMessage)
            else m
            for m in request.messages
        ]
        return request.replace(messages=messages)


async def first_round(server: ResponsesServer, model: Model, stream: bool) -> list[Message]:
    server.turn(calls=[("add", {"a": 1, "b": 1})])
    messages: list[Message] = [UserMessage("1+1?")]
    response = await call(model, request(messages), stream)
    [tool_call] = response.tool_calls
    return [*messages, response.to_message(), ToolMessage(tool_call.id, "add", "2")]


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_an_edited_encrypted_content_is_a_provider_error(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    messages = await first_round(server, model, stream)
    server.turn(text="2")
    edited = wrap_model(model, EditEncryptedContent())

    with pytest.raises(ProviderError, match="middleware must not edit reasoning parts") as caught:
        await call(edited, request(messages), stream)

    assert caught.value.status == 400 and not caught.value.retryable
    assert server.rejected[-1]["error"]["code"] == "invalid_encrypted_content"


async def test_a_call_sent_without_its_reasoning_item_is_refused(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    messages = await first_round(server, model, stream=False)
    server.turn(text="2")

    with pytest.raises(ProviderError, match="without its required 'reasoning' item"):
        await wrap_model(model, DropReasoning()).generate(request(messages))

    assert (await model.generate(request(messages))).content == "2"  # intact: accepted


async def test_reasoning_from_another_provider_is_not_sent(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(reasoning=None, text="ok")
    foreign = ReasoningPart("anthropic", "hmm", {"type": "thinking", "signature": "s"})
    messages: list[Message] = [
        UserMessage("hi"),
        AssistantMessage([foreign, TextPart("hello")]),
        UserMessage("again"),
    ]

    await model.generate(request(messages))

    [body] = server.received
    assert [item.get("type") for item in body["input"]] == ["message"] * 3
    assert body["input"][1]["content"] == [
        {"type": "output_text", "text": "hello", "annotations": []}
    ]


async def test_a_failed_stream_is_a_retryable_provider_error(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(fail="The server is overloaded.")

    with pytest.raises(ProviderError, match="overloaded") as caught:
        await collect_stream(model.stream(request([UserMessage("hi")])))

    assert caught.value.retryable


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_an_incomplete_response_finishes_with_length(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    server.turn(text="The answer is cut", incomplete="max_output_tokens")

    response = await call(model, request([UserMessage("hi")], max_tokens=5), stream)

    assert response.finish_reason == "length" and response.content == "The answer is cut"


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_reasoning_cut_short_before_any_text_is_not_replayed_alone(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    # An answer cut at max_output_tokens while the model was still reasoning holds only the
    # reasoning item; the API refuses it back without the item it led to.
    server.turn(incomplete="max_output_tokens")
    messages: list[Message] = [UserMessage("hi")]
    cut = await call(model, request(messages, max_tokens=5), stream)
    assert cut.finish_reason == "length" and cut.reasoning and not cut.content
    messages += [cut.to_message(), UserMessage("go on")]
    server.turn(text="done")

    assert (await call(model, request(messages), stream)).content == "done"

    assert [item.get("role", item["type"]) for item in server.received[-1]["input"]] == [
        "user",
        "user",
    ]


async def test_the_server_refuses_a_reasoning_item_alone_or_twice(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    import openai

    messages = await first_round(server, model, stream=False)
    assistant = messages[1]
    assert isinstance(assistant, AssistantMessage)
    [reasoning] = assistant.content
    assert isinstance(reasoning, ReasoningPart)
    server.turn(text="2")
    user = {"type": "message", "role": "user", "content": "and?"}
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url, max_retries=0)

    with pytest.raises(openai.BadRequestError, match="without its required following item"):
        items: Any = [user, reasoning.payload, user]
        await client.responses.create(model="gpt-5-mini", input=items, store=False)
    answer = {"type": "message", "role": "assistant", "content": "2"}
    with pytest.raises(openai.BadRequestError, match="Duplicate item found with id"):
        items = [user, reasoning.payload, answer, reasoning.payload, answer, user]
        await client.responses.create(model="gpt-5-mini", input=items, store=False)
    await client.close()


async def test_a_stream_cut_before_completed_is_a_retryable_error(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(text="Half an answer", cut_short=True)

    with pytest.raises(ProviderError, match="ended before the model finished") as caught:
        await collect_stream(model.stream(request([UserMessage("hi")])))

    assert caught.value.retryable


async def test_without_encrypted_content_reasoning_is_not_replayed_when_nothing_is_stored(
    server: ResponsesServer,
) -> None:
    plain = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=server.url, include=())
    messages = await first_round(server, plain, stream=False)
    server.turn(text="2")

    assert (await plain.generate(request(messages))).content == "2"

    assert "include" not in server.received[0]
    assert [item["type"] for item in server.received[1]["input"]] == [
        "message",
        "function_call",
        "function_call_output",
    ]
    await plain.aclose()


# --- request and response mapping -------------------------------------------------------------


async def test_the_request_is_stateless_and_maps_every_setting(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(reasoning=None, text="ok")
    req = ModelRequest(
        messages=[UserMessage("hi")],
        tools=[ADD],
        system_prompt="Be brief.",
        tool_choice="add",
        temperature=0.5,
        max_tokens=500,
        reasoning=Reasoning(effort="high", summary="detailed"),
        extra={"service_tier": "flex"},
    )

    await model.generate(req)

    [body] = server.received
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "Be brief."
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert body["max_output_tokens"] == 500 and body["temperature"] == 0.5
    assert body["tool_choice"] == {"type": "function", "name": "add"}
    assert body["tools"][0] == {
        "type": "function",
        "name": "add",
        "description": "Add two integers.",
        "parameters": ADD.parameters,
        "strict": False,
    }
    assert body["service_tier"] == "flex"
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]


def test_an_anthropic_thinking_budget_is_a_configuration_error(
    model: OpenAIResponsesModel,
) -> None:
    with pytest.raises(ConfigurationError, match="effort="):
        model.request_body(request([UserMessage("hi")], reasoning=Reasoning(budget_tokens=2048)))


@pytest.mark.parametrize("stream", [False, True], ids=["generate", "stream"])
async def test_usage_maps_cached_and_reasoning_tokens(
    server: ResponsesServer, model: OpenAIResponsesModel, stream: bool
) -> None:
    server.turn(
        text="ok", input_tokens=1500, cached_tokens=1024, output_tokens=300, reasoning_tokens=256
    )

    response = await call(model, request([UserMessage("hi")]), stream)

    assert response.usage == Usage(
        input_tokens=1500,
        output_tokens=300,
        cache_read_tokens=1024,
        requests=1,
        reasoning_tokens=256,
    )
    assert response.model == "gpt-5-mini"
    assert response.metadata["response_id"].startswith("resp_")


async def test_arguments_that_are_not_json_are_kept_raw(
    server: ResponsesServer, model: OpenAIResponsesModel
) -> None:
    server.turn(calls=[("add", '{"a": 1,')])

    response = await model.generate(request([UserMessage("1+?")]))

    assert response.tool_calls[0].args == {} and response.tool_calls[0].raw_args == '{"a": 1,'
