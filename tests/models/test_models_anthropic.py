"""AnthropicModel against a local server that speaks the Messages wire format.

The official ``anthropic`` SDK talks to :class:`WireServer` through ``base_url``; fixtures under
``fixtures/anthropic`` are the server's replies; the server records what the SDK sent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from plait.errors import ConfigurationError, ContextOverflowError, ProviderError
from plait.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from plait.models.anthropic import AnthropicModel
from plait.models.base import (
    ModelRequest,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from plait.models.retrying import Backoff
from plait.tools import ToolDefinition

FIXTURES = Path(__file__).parent / "fixtures" / "anthropic"
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
async def model(server: WireServer, sleeps: list[float]) -> AsyncIterator[AnthropicModel]:
    adapter = make_model(server, sleeps)
    yield adapter
    await adapter.aclose()


def make_model(server: WireServer, sleeps: list[float], **options: Any) -> AnthropicModel:
    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    options.setdefault("backoff", Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep))
    options.setdefault("cache", None)  # the mapping alone; breakpoints: test_models_anthropic_cache
    return AnthropicModel(
        "claude-sonnet-4-6", api_key="sk-ant-test", base_url=server.url, **options
    )


async def drain(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


# --- responses -------------------------------------------------------------------------------


async def test_plain_text_answer(server: WireServer, model: AnthropicModel) -> None:
    server.reply("text.json")

    response = await model.generate(HELLO)

    assert response.content == "Paris is the capital of France."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert response.model == "claude-sonnet-4-6-20260217"
    assert response.metadata == {"response_id": "msg_text_1"}
    assert model.name == "anthropic:claude-sonnet-4-6"
    [sent] = server.received
    assert sent.path == "/v1/messages"
    assert "sk-ant-test" in sent.headers.get("x-api-key", sent.headers.get("authorization", ""))
    assert sent.body["max_tokens"] == 4096
    assert sent.body["stream"] is False


async def test_usage_counts_cached_tokens_as_input(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("text.json")

    response = await model.generate(HELLO)

    assert response.usage == Usage(
        input_tokens=20 + 1000 + 100,
        output_tokens=9,
        cache_read_tokens=1000,
        cache_write_tokens=100,
        requests=1,
    )


async def test_thinking_tokens_are_the_reasoning_part_of_the_output_tokens(
    server: WireServer, model: AnthropicModel
) -> None:
    body = json.loads((FIXTURES / "text.json").read_text())
    body["usage"]["output_tokens"] = 120
    body["usage"]["output_tokens_details"] = {"thinking_tokens": 111}
    server.reply_json(body)

    response = await model.generate(HELLO)

    assert response.usage.output_tokens == 120
    assert response.usage.reasoning_tokens == 111


async def test_without_thinking_details_reasoning_tokens_stay_zero(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("text.json")

    assert (await model.generate(HELLO)).usage.reasoning_tokens == 0


async def test_a_streams_message_delta_carries_its_thinking_tokens(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("stream_thinking.sse")

    [*_, last] = await drain(model.stream(HELLO))

    assert isinstance(last, ResponseComplete)
    assert last.response.usage.output_tokens == 47
    assert last.response.usage.reasoning_tokens == 29


async def test_tool_call_arguments_are_parsed(server: WireServer, model: AnthropicModel) -> None:
    server.reply("tool_use.json")

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert response.finish_reason == "tool_calls"
    assert response.content == "I'll look up the weather."
    assert response.tool_calls == [
        ToolCall("toolu_weather_1", "get_weather", {"city": "Paris", "unit": "celsius"})
    ]


async def test_parallel_tool_calls_keep_their_order(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("parallel_tool_use.json")

    response = await model.generate(HELLO.replace(tools=[WEATHER]))

    assert [(c.id, c.name, c.args) for c in response.tool_calls] == [
        ("toolu_a", "get_weather", {"city": "Paris"}),
        ("toolu_b", "get_weather", {"city": "Tokyo"}),
        ("toolu_c", "get_time", {}),
    ]
    assert response.usage == Usage(420, 90, requests=1)


# --- streaming -------------------------------------------------------------------------------


async def test_stream_assembles_tool_call_deltas(server: WireServer, model: AnthropicModel) -> None:
    server.reply("stream_tool_use.sse")

    events = await drain(model.stream(HELLO.replace(tools=[WEATHER])))

    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Checking ", "both cities."]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas if d.id] == [
        (0, "toolu_s1", "get_weather"),
        (1, "toolu_s2", "get_weather"),
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
        ToolCall("toolu_s1", "get_weather", {"city": "Paris"}),
        ToolCall("toolu_s2", "get_weather", {"city": "Tokyo"}),
    ]
    assert final.finish_reason == "tool_calls"
    assert final.usage == Usage(350, 47, cache_read_tokens=300, requests=1)
    assert final.model == "claude-sonnet-4-6-20260217"
    [sent] = server.received
    assert sent.body["stream"] is True


async def test_streamed_invalid_json_arguments_set_raw_args(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("stream_invalid_args.sse")

    events = await drain(model.stream(HELLO.replace(tools=[WEATHER])))

    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.tool_calls == [
        ToolCall("toolu_bad", "get_weather", {}, raw_args='{"city": "Par')
    ]
    assert final.response.finish_reason == "length"


async def test_error_event_mid_stream_is_a_retryable_provider_error(
    server: WireServer, model: AnthropicModel, sleeps: list[float]
) -> None:
    server.reply("stream_overloaded.sse")
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderError, match="overloaded_error") as caught:
        async for event in model.stream(HELLO):
            seen.append(event)

    assert seen == [TextDelta("Par")]
    assert caught.value.retryable is True
    assert len(server.received) == 1
    assert sleeps == []


async def test_a_stream_that_reaches_message_stop_is_whole_even_without_a_stop_reason(
    server: WireServer, model: AnthropicModel
) -> None:
    # message_stop ends every stream; a proxy that drops message_delta still delivered it all.
    server.reply("stream_stop_without_reason.sse")

    events = await drain(model.stream(HELLO))

    final = events[-1]
    assert isinstance(final, ResponseComplete)
    assert final.response.content == "Par" and final.response.finish_reason == "stop"


# --- errors and retries ----------------------------------------------------------------------


async def test_overloaded_backs_off_exponentially_then_gives_up(server: WireServer) -> None:
    sleeps: list[float] = []
    model = make_model(server, sleeps, max_retries=3)
    for _ in range(4):
        server.reply("overloaded.json", status=529)

    with pytest.raises(ProviderError, match="Overloaded") as caught:
        await model.generate(HELLO)
    await model.aclose()

    assert caught.value.status == 529
    assert caught.value.retryable is True
    assert "gave up after 3 retries" in str(caught.value)
    assert len(server.received) == 4
    assert sleeps == [0.5, 1.0, 2.0]


async def test_server_can_veto_a_retry(
    server: WireServer, model: AnthropicModel, sleeps: list[float]
) -> None:
    server.reply("overloaded.json", status=529, headers={"x-should-retry": "false"})

    with pytest.raises(ProviderError):
        await model.generate(HELLO)

    assert sleeps == []


async def test_prompt_too_long_raises_context_overflow_error(
    server: WireServer, model: AnthropicModel, sleeps: list[float]
) -> None:
    server.reply("prompt_too_long.json", status=400)

    with pytest.raises(ContextOverflowError, match="prompt is too long") as caught:
        await model.generate(HELLO)

    assert caught.value.status == 400
    assert caught.value.retryable is False
    assert len(server.received) == 1
    assert sleeps == []


@pytest.mark.parametrize("stream", [False, True])
async def test_request_too_large_413_raises_context_overflow_error(
    server: WireServer, model: AnthropicModel, sleeps: list[float], stream: bool
) -> None:
    server.reply("request_too_large.json", status=413)

    with pytest.raises(ContextOverflowError, match="maximum allowed number of bytes") as caught:
        if stream:
            await drain(model.stream(HELLO))
        else:
            await model.generate(HELLO)

    assert caught.value.status == 413
    assert caught.value.retryable is False
    assert len(server.received) == 1
    assert sleeps == []


# --- request mapping -------------------------------------------------------------------------


FULL_CONVERSATION = ModelRequest(
    system_prompt="You are a weather assistant.",
    messages=[
        UserMessage("Weather in Paris and Tokyo?"),
        AssistantMessage(
            "Looking both up.",
            tool_calls=[
                ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
                ToolCall("toolu_2", "get_weather", {"city": "Tokyo"}),
            ],
        ),
        ToolMessage("toolu_1", "get_weather", {"temp_c": 21, "sky": "clear"}),
        ToolMessage("toolu_2", "get_weather", "city not found", is_error=True),
        UserMessage("Also, be brief."),
        SystemMessage("Summary so far: the user wants weather."),
        AssistantMessage("Paris is 21°C; Tokyo was not found."),
        UserMessage("Thanks!"),
    ],
    tools=[WEATHER, ToolDefinition("get_time", "", {})],
    tool_choice="required",
    temperature=0.2,
    max_tokens=256,
)


async def test_full_conversation_request_mapping(server: WireServer, model: AnthropicModel) -> None:
    server.reply("text.json")

    await model.generate(FULL_CONVERSATION)

    [sent] = server.bodies()
    assert sent == {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "stream": False,
        "system": [
            {"type": "text", "text": "You are a weather assistant."},
            {"type": "text", "text": "Summary so far: the user wants weather."},
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Tokyo?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking both up."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_2",
                        "name": "get_weather",
                        "input": {"city": "Tokyo"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": '{"temp_c":21,"sky":"clear"}',
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "city not found",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Also, be brief."},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "Paris is 21°C; Tokyo was not found."}],
            },
            {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city.",
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
            {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
        ],
        "tool_choice": {"type": "any"},
        "temperature": 0.2,
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
async def test_tool_choice_mapping(
    server: WireServer, model: AnthropicModel, choice: str, expected: dict[str, str]
) -> None:
    server.reply("text.json")

    await model.generate(HELLO.replace(tools=[WEATHER], tool_choice=choice))

    assert server.bodies()[0]["tool_choice"] == expected


async def test_whitespace_only_text_is_left_out_so_the_thread_is_not_wedged(
    server: WireServer, model: AnthropicModel
) -> None:
    # The API rejects a text block of whitespace alone ("text content blocks must contain
    # non-whitespace text"); one stored in the thread (a model's "\n\n" before its tool call)
    # would make every later request on that thread fail with a 400.
    server.reply("text.json")
    request = ModelRequest(
        system_prompt="  ",
        messages=[
            UserMessage("Go."),
            SystemMessage("\n"),
            AssistantMessage("\n\n", tool_calls=[ToolCall("t1", "get_time", {})]),
            ToolMessage("t1", "get_time", " \n"),
            UserMessage(" "),
            AssistantMessage("\t"),
            UserMessage("And now?"),
        ],
    )

    await model.generate(request)

    [sent] = server.bodies()
    assert "system" not in sent
    assert sent["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Go."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_time", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1"},
                {"type": "text", "text": "And now?"},
            ],
        },
    ]


async def test_tool_results_come_before_text_in_a_merged_user_message(
    server: WireServer, model: AnthropicModel
) -> None:
    server.reply("text.json")
    request = ModelRequest(
        messages=[
            UserMessage("Go."),
            AssistantMessage(tool_calls=[ToolCall("t1", "get_time", {})]),
            UserMessage("(interjection)"),
            ToolMessage("t1", "get_time", "12:00"),
        ]
    )

    await model.generate(request)

    last = server.bodies()[0]["messages"][-1]
    assert [block["type"] for block in last["content"]] == ["tool_result", "text"]


# --- configuration ---------------------------------------------------------------------------


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)

    with pytest.raises(ConfigurationError, match=r"pip install 'plait\[anthropic\]'"):
        AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test")


def test_missing_api_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path))

    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-6")
