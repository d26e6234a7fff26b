"""OpenAIChatModel against a local server that speaks the Chat Completions wire format.

The official ``openai`` SDK talks to :class:`WireServer` through ``base_url``; fixtures under
``fixtures/openai`` are the server's replies; the server records what the SDK sent.
"""

from __future__ import annotations

import base64
import email.utils
import json
import socket
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletionChunk
from wire_server import WireServer

from plait.errors import ConfigurationError, ContentError, ContextOverflowError, ProviderError
from plait.messages import (
    AssistantMessage,
    Blob,
    FilePart,
    ImagePart,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from plait.models.base import (
    ModelRequest,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from plait.models.openai import OpenAIChatModel, OpenAIStreamAssembler
from plait.models.retrying import Backoff, RetryNotice, retry_after_seconds
from plait.tools import ToolDefinition

FIXTURES = Path(__file__).parent / "fixtures" / "openai"
HELLO = ModelRequest(messages=[UserMessage("What is the capital of France?")])
WEATHER = ToolDefinition(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
async def model(server: WireServer, sleeps: list[float]) -> AsyncIterator[OpenAIChatModel]:
    adapter = make_model(server.url + "/v1", sleeps)
    yield adapter
    await adapter.aclose()


def make_model(base_url: str, sleeps: list[float], **options: Any) -> OpenAIChatModel:
    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    options.setdefault("backoff", Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep))
    return OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", base_url=base_url, **options)


async def drain(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


# --- responses -------------------------------------------------------------------------------


async def test_plain_text_answer(server: WireServer, model: OpenAIChatModel) -> None:
    server.reply("text.json")

    response = await model.generate(HELLO)

    assert response.content == "Paris is the capital of France."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4.1-mini-2025-04-14"
    assert response.metadata == {"response_id": "chatcmpl-text-1"}
    assert model.name == "openai:gpt-4.1-mini"
    [sent] = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.body["stream"] is False


async def test_usage_includes_cached_tokens(server: WireServer, model: OpenAIChatModel) -> None:
    server.reply("text.json")

    response = await model.generate(HELLO)

    assert response.usage == Usage(
        input_tokens=1200, output_tokens=9, cache_read_tokens=1024, requests=1
    )


async def test_reasoning_tokens_are_part_of_the_output_tokens(
    server: WireServer, model: OpenAIChatModel
) -> None:
    body = json.loads((FIXTURES / "text.json").read_text())
    body["usage"]["completion_tokens"] = 209
    body["usage"]["completion_tokens_details"]["reasoning_tokens"] = 200
    server.reply_json(body)

    response = await model.generate(HELLO)

    assert response.usage.output_tokens == 209
    assert response.usage.reasoning_tokens == 200


async def test_a_streams_usage_chunk_carries_its_reasoning_tokens(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("stream_reasoning.sse")

    [*_, last] = await drain(model.stream(HELLO))

    assert isinstance(last, ResponseComplete)
    assert last.response.usage.output_tokens == 47
    assert last.response.usage.reasoning_tokens == 31


async def test_tool_call_arguments_are_parsed(server: WireServer, model: OpenAIChatModel) -> None:
    server.reply("tool_call.json")

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert response.finish_reason == "tool_calls"
    assert response.content == ""
    assert response.tool_calls == [
        ToolCall("call_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})
    ]


async def test_parallel_tool_calls_keep_their_order(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("parallel_tool_calls.json")

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert [(c.id, c.name, c.args) for c in response.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_weather", {"city": "Tokyo"}),
        ("call_c", "get_time", {}),
    ]


async def test_invalid_json_arguments_set_raw_args(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("invalid_args.json")

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert response.tool_calls == [
        ToolCall("call_bad", "get_weather", {}, raw_args='{"city": "Par'),
        ToolCall("call_list", "get_weather", {}, raw_args='["Paris"]'),
    ]


async def test_arguments_sent_as_an_object_or_null_are_taken_as_they_are(
    server: WireServer, model: OpenAIChatModel
) -> None:
    # Some OpenAI-compatible servers send `arguments` as a JSON object, or null, instead of a
    # string; the SDK passes it through unvalidated.
    def call(id: str, arguments: object) -> dict[str, object]:
        return {
            "id": id,
            "type": "function",
            "function": {"name": "get_weather", "arguments": arguments},
        }

    calls = [call("c1", {"city": "Paris"}), call("c2", None), call("c3", [1])]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    server.reply_json(
        {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}
    )

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert response.tool_calls == [
        ToolCall("c1", "get_weather", {"city": "Paris"}),
        ToolCall("c2", "get_weather", {}),
        ToolCall("c3", "get_weather", {}, raw_args="[1]"),
    ]


# --- streaming -------------------------------------------------------------------------------


async def test_stream_assembles_tool_call_deltas(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("stream_tool_calls.sse")

    events = await drain(model.stream(HELLO.replace(tools=[WEATHER])))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Checking ", "both cities."]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas if d.id] == [
        (0, "call_s1", "get_weather"),
        (1, "call_s2", "get_weather"),
    ]
    assert [d.args_fragment for d in deltas if d.index == 0 and d.args_fragment] == [
        '{"ci',
        'ty": "Pa',
        'ris"}',
    ]
    assert isinstance(events[-1], ResponseComplete)
    assert sum(isinstance(e, ResponseComplete) for e in events) == 1
    final = events[-1].response
    assert final.content == "Checking both cities."
    assert final.tool_calls == [
        ToolCall("call_s1", "get_weather", {"city": "Paris"}),
        ToolCall("call_s2", "get_weather", {"city": "Tokyo"}),
    ]
    assert final.finish_reason == "tool_calls"
    assert final.usage == Usage(310, 47, cache_read_tokens=256, requests=1)
    [sent] = server.received
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}


async def test_azure_content_filter_chunks_without_a_delta_are_skipped(
    server: WireServer, model: OpenAIChatModel
) -> None:
    # Azure's asynchronous content filter sends annotation chunks whose choice has no `delta`
    # (and empty id/model), besides a first chunk with no choices at all.
    server.reply("stream_azure_filter.sse")

    events = await drain(model.stream(HELLO))

    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Paris.")]
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.content == "Paris." and final.response.finish_reason == "stop"
    assert final.response.model == "gpt-4o-2024-08-06"
    assert final.response.metadata == {"response_id": "chatcmpl-az-1"}


async def test_streamed_arguments_sent_as_an_object_are_taken_as_they_are(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("stream_object_args.sse")

    events = await drain(model.stream(HELLO.replace(tools=[WEATHER])))

    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.tool_calls == [
        ToolCall("call_o1", "get_weather", {"city": "Paris"}),
        ToolCall("call_o2", "get_time", {}),
    ]
    fragments = [e.args_fragment for e in events if isinstance(e, ToolCallDelta)]
    assert fragments == ['{"city":"Paris"}', ""]


async def test_error_mid_stream_is_a_provider_error(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("stream_error.sse")
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderError, match="server had an error"):
        async for event in model.stream(HELLO):
            seen.append(event)

    assert seen == [TextDelta("Par")]
    assert len(server.received) == 1


# --- errors and retries ----------------------------------------------------------------------


async def test_retry_after_is_capped_at_max_delay(server: WireServer) -> None:
    sleeps: list[float] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    model = make_model(
        server.url + "/v1", sleeps, backoff=Backoff(max_delay=5.0, sleep=record_sleep)
    )
    server.reply("rate_limit.json", status=429, headers={"retry-after-ms": "90000"})
    server.reply("text.json")

    await model.generate(HELLO)
    await model.aclose()

    assert sleeps == [5.0]


async def test_streaming_request_is_retried_before_the_first_event(
    server: WireServer, model: OpenAIChatModel, sleeps: list[float]
) -> None:
    server.reply("rate_limit.json", status=429, headers={"retry-after": "1"})
    server.reply("stream_tool_calls.sse")

    events = await drain(model.stream(HELLO))

    assert isinstance(events[-1], ResponseComplete)
    assert sleeps == [1.0]


async def test_server_errors_back_off_exponentially_then_give_up(server: WireServer) -> None:
    sleeps: list[float] = []
    model = make_model(server.url + "/v1", sleeps, max_retries=2)
    for _ in range(3):
        server.reply("server_error.json", status=500)

    with pytest.raises(ProviderError) as caught:
        await model.generate(HELLO)
    await model.aclose()

    assert caught.value.status == 500
    assert caught.value.retryable is True
    assert "gave up after 2 retries;" in str(caught.value)
    assert len(server.received) == 3
    assert sleeps == [0.5, 1.0]


async def test_on_retry_hears_of_each_retry_before_its_sleep(server: WireServer) -> None:
    heard: list[RetryNotice] = []
    sleeps: list[float] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        assert len(heard) == len(sleeps)  # told before sleeping

    backoff = Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep, on_retry=heard.append)
    model = make_model(server.url + "/v1", sleeps, max_retries=2, backoff=backoff)
    for _ in range(3):
        server.reply("server_error.json", status=500)
    with pytest.raises(ProviderError):
        await model.generate(HELLO)
    await model.aclose()
    assert [(n.retry, n.max_retries, n.delay, n.error.status) for n in heard] == [
        (1, 2, 0.5, 500),
        (2, 2, 1.0, 500),
    ]


async def test_insufficient_quota_is_not_retried(
    server: WireServer, model: OpenAIChatModel, sleeps: list[float]
) -> None:
    server.reply("insufficient_quota.json", status=429)

    with pytest.raises(ProviderError, match="billing") as caught:
        await model.generate(HELLO)

    assert caught.value.retryable is False
    assert sleeps == []


async def test_context_overflow_raises_context_overflow_error(
    server: WireServer, model: OpenAIChatModel, sleeps: list[float]
) -> None:
    server.reply("context_length_exceeded.json", status=400)

    with pytest.raises(ContextOverflowError, match="maximum context length") as caught:
        await model.generate(HELLO)

    assert caught.value.status == 400
    assert caught.value.retryable is False
    assert len(server.received) == 1
    assert sleeps == []


async def test_context_overflow_from_a_compatible_server(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("vllm_context_overflow.json", status=400)

    with pytest.raises(ContextOverflowError, match="8192 tokens"):
        await model.generate(HELLO)


async def test_compatible_server_unauthorized_names_its_own_env_var(server: WireServer) -> None:
    model = make_model(server.url + "/v1", [], provider_label="openai-compatible")
    server.reply("invalid_api_key.json", status=401)

    with pytest.raises(ProviderError) as caught:
        await model.generate(HELLO)
    await model.aclose()

    assert "OPENAI_COMPATIBLE_API_KEY" in str(caught.value)
    assert server.url in str(caught.value)
    assert caught.value.provider == "openai-compatible"


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    model = make_model(f"http://127.0.0.1:{port}/v1", sleeps, max_retries=2)

    with pytest.raises(ProviderError, match="Could not reach") as caught:
        await model.generate(HELLO)
    await model.aclose()

    assert caught.value.retryable is True
    assert len(sleeps) == 2


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after": "4"}, 4.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(headers: dict[str, str], expected: float | None) -> None:
    assert retry_after_seconds(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)

    waited = retry_after_seconds({"retry-after": when})

    assert waited is not None
    assert 28 <= waited <= 30


# --- request mapping -------------------------------------------------------------------------


FULL_CONVERSATION = ModelRequest(
    system_prompt="You are a weather assistant.",
    messages=[
        UserMessage("Weather in Paris and Tokyo?"),
        AssistantMessage(
            "Looking both up.",
            tool_calls=[
                ToolCall("call_1", "get_weather", {"city": "Paris"}),
                ToolCall("call_2", "get_weather", {"city": "Tokyo"}),
            ],
        ),
        ToolMessage("call_1", "get_weather", {"temp_c": 21, "sky": "clear"}),
        ToolMessage("call_2", "get_weather", "city not found", is_error=True),
        SystemMessage("Summary so far: the user wants weather."),
        AssistantMessage(tool_calls=[ToolCall("call_3", "get_weather", {}, raw_args="{oops")]),
        ToolMessage("call_3", "get_weather", "Invalid arguments", is_error=True),
        AssistantMessage("Paris is 21°C; Tokyo was not found."),
        UserMessage("Thanks!"),
    ],
    tools=[WEATHER, ToolDefinition("get_time", "", {})],
    tool_choice="get_weather",
    temperature=0.2,
    max_tokens=256,
)


async def test_full_conversation_request_mapping(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("text.json")

    await model.generate(FULL_CONVERSATION)

    [sent] = server.bodies()
    assert sent == {
        "model": "gpt-4.1-mini",
        "stream": False,
        "messages": [
            {"role": "system", "content": "You are a weather assistant."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": "Looking both up.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Tokyo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c":21,"sky":"clear"}'},
            {"role": "tool", "tool_call_id": "call_2", "content": "city not found"},
            {"role": "system", "content": "Summary so far: the user wants weather."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_3",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_3", "content": "Invalid arguments"},
            {"role": "assistant", "content": "Paris is 21°C; Tokyo was not found."},
            {"role": "user", "content": "Thanks!"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city.",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_time",
                    "parameters": {"type": "object", "properties": {}},
                },
            },
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0.2,
        "max_completion_tokens": 256,
    }


@pytest.mark.parametrize("choice", ["auto", "none", "required"])
async def test_tool_choice_keywords_pass_through(
    server: WireServer, model: OpenAIChatModel, choice: str
) -> None:
    server.reply("text.json")

    await model.generate(HELLO.replace(tools=[WEATHER], tool_choice=choice))

    assert server.bodies()[0]["tool_choice"] == choice


async def test_tool_choice_is_dropped_without_tools(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("text.json")

    await model.generate(HELLO.replace(tool_choice="required"))

    assert "tool_choice" not in server.bodies()[0]
    assert "tools" not in server.bodies()[0]


async def test_compatible_servers_get_max_tokens(server: WireServer) -> None:
    model = make_model(server.url + "/v1", [], provider_label="openai-compatible")
    server.reply("text.json")

    await model.generate(HELLO.replace(max_tokens=64, model="llama3.1:8b"))
    await model.aclose()

    body = server.bodies()[0]
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert body["model"] == "llama3.1:8b"


# --- images and files ------------------------------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 4


def _data(url: str) -> bytes:
    header, _, payload = url.partition(",")
    assert header.endswith(";base64")
    return base64.b64decode(payload, validate=True)


async def test_images_and_files_ride_in_user_messages_and_tool_images_follow_the_results(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("text.json")
    reasoning = ReasoningPart("openai-responses", "why", {"type": "reasoning", "id": "rs_1"})
    calls = [ToolCall("c1", "shot", {}), ToolCall("c2", "shot", {})]
    request = ModelRequest(
        messages=[
            UserMessage(
                [
                    TextPart("What is this?"),
                    ImagePart(Blob(PNG), detail="low"),
                    FilePart(Blob(PDF), filename="r.pdf"),
                ]
            ),
            AssistantMessage([reasoning, TextPart("Looking.")], tool_calls=calls),
            ToolMessage("c1", "shot", "took one", parts=[ImagePart(Blob(JPEG))]),
            ToolMessage("c2", "shot", "took none"),
        ]
    )

    await model.generate(request)

    messages = server.bodies()[0]["messages"]
    user = messages[0]["content"]
    assert user[0] == {"type": "text", "text": "What is this?"}
    assert user[1]["type"] == "image_url" and user[1]["image_url"]["detail"] == "low"
    assert _data(user[1]["image_url"]["url"]) == PNG
    assert user[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert user[2]["type"] == "file" and user[2]["file"]["filename"] == "r.pdf"
    assert _data(user[2]["file"]["file_data"]) == PDF
    assert messages[1]["content"] == "Looking."  # the reasoning part is dropped
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2]["content"] == "took one"
    follow = messages[4]["content"]
    assert follow[0] == {"type": "text", "text": "Attachments of tool result c1 (shot):"}
    assert _data(follow[1]["image_url"]["url"]) == JPEG


async def test_openai_image_limits_hold_on_chat_completions(
    server: WireServer, model: OpenAIChatModel
) -> None:
    tiny = ImagePart(Blob(PNG))

    with pytest.raises(ContentError, match="at most 500"):
        await model.generate(ModelRequest(messages=[UserMessage([tiny] * 501)]))

    assert server.received == []


# --- configuration ---------------------------------------------------------------------------


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)

    with pytest.raises(ConfigurationError, match=r"pip install 'plait\[openai\]'"):
        OpenAIChatModel("gpt-4.1-mini", api_key="sk-test")


def test_missing_api_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4.1-mini")


async def test_a_client_passed_in_has_its_own_retries_turned_off(server: WireServer) -> None:
    import openai

    client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1", max_retries=5)
    model = OpenAIChatModel("gpt-4.1-mini", client=client, max_retries=0)
    server.reply("server_error.json", status=500)

    with pytest.raises(ProviderError):
        await model.generate(HELLO)
    await model.aclose()

    assert len(server.received) == 1
    assert not client.is_closed()
    await client.close()


def test_stream_calls_sharing_an_index_are_kept_apart() -> None:
    # Some compatible servers send each parallel call whole, all with index 0.
    def chunk(call: dict[str, Any], finish: str | None = None) -> ChatCompletionChunk:
        return ChatCompletionChunk.model_validate(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": "llama3.1",
                "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": finish}],
            }
        )

    assembler = OpenAIStreamAssembler()
    for call_id, city in (("call_x", "Paris"), ("call_y", "Tokyo")):
        function = {"name": "get_weather", "arguments": f'{{"city": "{city}"}}'}
        assembler.feed(chunk({"index": 0, "id": call_id, "type": "function", "function": function}))
    assembler.feed(chunk({"index": 0, "function": {"arguments": ""}}, finish="stop"))

    response = assembler.response()

    assert response.tool_calls == [
        ToolCall("call_x", "get_weather", {"city": "Paris"}),
        ToolCall("call_y", "get_weather", {"city": "Tokyo"}),
    ]
    assert response.finish_reason == "tool_calls"


async def test_switching_to_chat_completions_drops_claudes_reasoning_with_an_event(
    server: WireServer, model: OpenAIChatModel
) -> None:
    from plait import Agent
    from plait.messages import AssistantMessage, Message, ReasoningPart, TextPart, UserMessage
    from plait.models.base import Reasoning
    from plait.models.openai_mapping import to_openai_request
    from plait.runtime.events import ReasoningDropped

    payload = {"type": "thinking", "thinking": "hm", "signature": "s"}
    thought = ReasoningPart("anthropic", "hm", payload)
    server.reply("text.json")
    history: list[Message] = [UserMessage("hi"), AssistantMessage([thought, TextPart("hello")])]
    result = await Agent(model).run([*history, UserMessage("and now?")], thread_id="t")
    dropped = [e for e in result.events if isinstance(e, ReasoningDropped)]
    assert [(e.provider, e.count) for e in dropped] == [("anthropic", 1)]
    assert result.output
    assert "hm" not in json.dumps(server.received[-1].body)
    effort = ModelRequest([UserMessage("x")], reasoning=Reasoning(effort="high"))
    assert to_openai_request(effort, model="o4-mini")["reasoning_effort"] == "high"
    assert "reasoning_effort" not in to_openai_request(ModelRequest([UserMessage("x")]), model="m")


async def test_provider_specific_fields_are_sent_in_the_body(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("text.json")
    server.reply("stream_reasoning.sse")
    request = ModelRequest(messages=[UserMessage("hi")], extra={"service_tier": "flex"})

    await model.generate(request)
    await drain(model.stream(request))

    assert [sent.body["service_tier"] for sent in server.received] == ["flex", "flex"]
