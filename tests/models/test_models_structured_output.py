"""Structured output through the official SDKs against the local wire servers: native and tool
mode on Chat Completions, Responses and Anthropic, with the servers holding schemas to the
providers' strict rules."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from anthropic_server import AnthropicServer
from pydantic import BaseModel, Field
from responses_server import ResponsesServer
from wire_server import WireServer

from plait import Agent, Model, ToolMessage, UserMessage
from plait.errors import OutputValidationError, ProviderError
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest, OutputSchema
from plait.models.openai import OpenAIChatModel
from plait.models.openai_responses import OpenAIResponsesModel
from plait.runtime.output import OutputDeltaReceived

FIXTURES = Path(__file__).parent / "fixtures" / "openai"


class Address(BaseModel):
    city: str
    zip: str | None = None


class Ticket(BaseModel):
    title: str = Field(min_length=1)
    priority: int = Field(ge=1, le=5)
    home: Address
    cc: list[Address] = []


TICKET = {"title": "Disk", "priority": 2, "home": {"city": "Oslo", "zip": None}, "cc": None}
EXPECTED = Ticket(title="Disk", priority=2, home=Address(city="Oslo"))


def completion(content: str | None = None, calls: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(a)},
            }
            for i, (n, a) in enumerate(calls)
        ]
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "gpt-4.1-mini",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture
def wire() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as server:
        yield server


@pytest.fixture
async def chat(wire: WireServer) -> AsyncIterator[OpenAIChatModel]:
    model = OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", base_url=wire.url, max_retries=0)
    yield model
    await model.aclose()


# --- Chat Completions ----------------------------------------------------------------------


async def test_chat_native_sends_a_strict_schema_the_server_accepts(
    wire: WireServer, chat: OpenAIChatModel
) -> None:
    wire.reply_json(completion(json.dumps(TICKET)))
    result = await Agent(chat, output_type=Ticket).run("file it")
    assert result.output == EXPECTED
    fmt = wire.bodies()[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert "$ref" in json.dumps(schema) and schema["$defs"]["Address"]["required"] == [
        "city",
        "zip",
    ]


async def test_chat_server_refuses_a_schema_that_is_not_strict(chat: OpenAIChatModel) -> None:
    loose = OutputSchema("Loose", {"type": "object", "properties": {"a": {"type": "string"}}})
    with pytest.raises(ProviderError, match="additionalProperties"):
        await chat.generate(ModelRequest([UserMessage("x")], output_schema=loose))


async def test_chat_native_first_answer_fails_then_passes(
    wire: WireServer, chat: OpenAIChatModel
) -> None:
    wire.reply_json(completion(json.dumps({**TICKET, "priority": 7})))
    wire.reply_json(completion(json.dumps(TICKET)))
    result = await Agent(chat, output_type=Ticket).run("file it")
    assert result.output == EXPECTED
    retry = wire.bodies()[1]["messages"][-1]
    assert retry["role"] == "user" and "priority" in json.dumps(retry)


async def test_chat_tool_mode_offers_final_result(wire: WireServer, chat: OpenAIChatModel) -> None:
    wire.reply_json(completion(None, [("final_result", TICKET)]))
    agent = Agent(chat, output_type=Ticket, output_mode="tool")
    result = await agent.run("file it", thread_id="t")
    assert result.output == EXPECTED
    body = wire.bodies()[0]
    assert "response_format" not in body
    assert [t["function"]["name"] for t in body["tools"]] == ["final_result"]


async def test_chat_stream_native_yields_the_output(
    wire: WireServer, chat: OpenAIChatModel
) -> None:
    from chat_completions import sse_answer

    wire._replies.append(sse_answer(json.dumps(TICKET)))
    stream = Agent(chat, output_type=Ticket).stream("file it")
    deltas = [e async for e in stream if isinstance(e, OutputDeltaReceived)]
    assert deltas and deltas[-1].partial["title"] == "Disk"
    assert stream.result is not None and stream.result.output == EXPECTED


# --- Responses -----------------------------------------------------------------------------


@pytest.fixture
def responses() -> Iterator[ResponsesServer]:
    with ResponsesServer() as server:
        yield server


async def _run(model: Model, mode: str, thread: str = "t") -> Ticket:
    async with aclosing(model):
        agent = Agent(model, output_type=Ticket, output_mode=mode)  # type: ignore[arg-type]
        return (await agent.run("file it", thread_id=thread)).output


async def test_responses_native_uses_text_format(responses: ResponsesServer) -> None:
    responses.turn(reasoning=None, text=json.dumps(TICKET))
    model = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=responses.url)
    assert await _run(model, "auto") == EXPECTED
    fmt = responses.received[0]["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "Ticket" and fmt["strict"] is True
    assert responses.rejected == []


async def test_responses_tool_mode(responses: ResponsesServer) -> None:
    responses.turn(calls=[("final_result", TICKET)])
    model = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=responses.url)
    assert await _run(model, "tool") == EXPECTED
    assert "text" not in responses.received[0]
    assert responses.rejected == []


async def test_responses_server_refuses_a_loose_schema(responses: ResponsesServer) -> None:
    model = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=responses.url)
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    loose = OutputSchema("Loose", schema)  # "a" not in required: strict mode refuses it
    async with aclosing(model):
        with pytest.raises(ProviderError, match="Missing 'a'"):
            await model.generate(ModelRequest([UserMessage("x")], output_schema=loose))


# --- Anthropic -----------------------------------------------------------------------------


def _anthropic(server: AnthropicServer) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url, max_retries=0
    )


async def test_anthropic_native_uses_output_config() -> None:
    with AnthropicServer(lambda body: [{"type": "text", "text": json.dumps(TICKET)}]) as server:
        assert await _run(_anthropic(server), "native") == EXPECTED
        fmt = server.received[0].body["output_config"]["format"]
        assert fmt["type"] == "json_schema" and '"minimum"' not in json.dumps(fmt["schema"])
        assert server.received[0].refused is None


async def test_anthropic_refuses_numeric_constraints_it_does_not_take() -> None:
    with AnthropicServer(lambda body: []) as server:
        model = _anthropic(server)
        schema = OutputSchema("N", {"type": "integer", "minimum": 1})
        async with aclosing(model):
            # the adapter moves the constraint into the description, so the server takes it
            request = ModelRequest([UserMessage("x")], output_schema=schema)
            await model.generate(request)
        assert server.received[0].refused is None
        body = server.received[0].body["output_config"]["format"]["schema"]
        assert "minimum" not in body and "minimum" in body["description"]


async def test_anthropic_tool_mode_never_complies_leaves_a_valid_thread() -> None:
    bad = {**TICKET, "priority": 0}

    def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
        if "later" in json.dumps(body["messages"][-1]):
            return [{"type": "text", "text": "ok"}]
        return [{"type": "tool_use", "name": "final_result", "input": bad}]

    with AnthropicServer(brain) as server:
        model = _anthropic(server)
        async with aclosing(model):
            agent = Agent(model, output_type=Ticket, output_mode="tool")
            with pytest.raises(OutputValidationError) as caught:
                await agent.run("file it", thread_id="t")
            assert "priority" in caught.value.errors[0]
            assert json.loads(caught.value.raw)["priority"] == 0
            messages = (await agent.store.load("t")).messages
            assert sum(isinstance(m, ToolMessage) for m in messages) == 2
            # the persisted thread is one the strict server takes: a later turn runs on it
            text_agent = Agent(model, store=agent.store)
            assert (await text_agent.run("later", thread_id="t")).output == "ok"
        assert all(r.refused is None for r in server.received)
