"""Anthropic prompt caching: where the adapter puts its breakpoints, what the local server
(strict as the API: at most 4, TTL order) reads and writes, and what usage reports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic_server import AnthropicServer

from plait.errors import ConfigurationError
from plait.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from plait.models.anthropic import AnthropicModel
from plait.models.anthropic_cache import AnthropicCache
from plait.models.base import ModelRequest

LONG = "The quarterly figures, line by line. " * 200  # about 1,800 tokens: cacheable
TOOLS = [
    ToolDefinition("read_file", "Read a file.", {"type": "object", "properties": {}}),
    ToolDefinition("search", "Search.", {"type": "object", "properties": {}}),
]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(lambda body: [{"type": "text", "text": "ok"}]) as running:
        yield running


def _model(server: AnthropicServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-5", api_key="k", base_url=server.url, **options)


def _tool_loop() -> list[Message]:
    return [
        UserMessage("Read the report. " + LONG),
        AssistantMessage("Reading.", tool_calls=[ToolCall("t1", "read_file", {})]),
        ToolMessage("t1", "read_file", "figures: 12, 14, 19"),
        AssistantMessage("", tool_calls=[ToolCall("t2", "search", {})]),
        ToolMessage("t2", "search", "nothing else"),
    ]


def _marked(body: dict[str, Any]) -> list[str]:
    where: list[str] = []
    for i, tool in enumerate(body.get("tools", ())):
        if "cache_control" in tool:
            where.append(f"tools.{i}")
    for i, block in enumerate(body.get("system", ())):
        if "cache_control" in block:
            where.append(f"system.{i}")
    for i, message in enumerate(body["messages"]):
        for j, block in enumerate(message["content"]):
            if "cache_control" in block:
                where.append(f"messages.{i}.content.{j}")
    return where


async def test_breakpoints_go_on_tools_system_previous_end_and_newest_block(
    server: AnthropicServer,
) -> None:
    model = _model(server)
    request = ModelRequest(_tool_loop(), tools=TOOLS, system_prompt="Be exact.")

    await model.generate(request)

    body = server.received[0].body
    # messages: 0 user, 1 assistant, 2 user (t1), 3 assistant, 4 user (t2)
    assert _marked(body) == ["tools.1", "system.0", "messages.2.content.0", "messages.4.content.0"]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    await model.aclose()


async def test_a_plain_next_call_reads_what_the_last_one_wrote(server: AnthropicServer) -> None:
    model = _model(server)
    history = _tool_loop()
    first = await model.generate(ModelRequest(history, tools=TOOLS, system_prompt="Be exact."))
    history += [AssistantMessage("Done."), UserMessage("And the margin?")]
    second = await model.generate(ModelRequest(history, tools=TOOLS, system_prompt="Be exact."))

    assert first.usage.cache_read_tokens == 0
    assert first.usage.cache_write_tokens > 1024
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    assert second.usage.input_tokens > second.usage.cache_read_tokens
    await model.aclose()


async def test_one_hour_ttl_marks_every_breakpoint_and_is_reported_apart(
    server: AnthropicServer,
) -> None:
    model = _model(server, cache=AnthropicCache(ttl="1h"))
    response = await model.generate(ModelRequest(_tool_loop(), tools=TOOLS, system_prompt="X."))

    controls = [
        b["cache_control"] for b in server.received[0].body["tools"] if "cache_control" in b
    ]
    assert controls == [{"type": "ephemeral", "ttl": "1h"}]
    assert response.usage.cache_write_1h_tokens == response.usage.cache_write_tokens > 0
    await model.aclose()


async def test_projected_messages_come_after_the_newest_breakpoint(
    server: AnthropicServer,
) -> None:
    model = _model(server)
    messages = [*_tool_loop(), UserMessage("[skill body] Use the report skill.")]
    request = ModelRequest(messages, metadata={"projected_messages": 1})

    await model.generate(request)

    body = server.received[0].body
    # the skill body merged into the last user message as its block 1: left unmarked
    assert _marked(body) == ["messages.2.content.0", "messages.4.content.0"]
    await model.aclose()


async def test_no_breakpoint_on_a_thinking_block() -> None:
    def brain(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"type": "thinking", "thinking": "hm"}]

    with AnthropicServer(brain) as server:
        model = _model(server)
        answer = await model.generate(ModelRequest([UserMessage(LONG)]))
        [thinking] = answer.reasoning
        request = ModelRequest([UserMessage(LONG), AssistantMessage([thinking])])

        await model.generate(request)

        assert server.received[1].refused is None
        assert _marked(server.received[1].body) == ["messages.0.content.0"]
        assert "cache_control" not in thinking.payload  # the stored payload is never touched
        await model.aclose()


async def test_cache_none_sends_no_breakpoint(server: AnthropicServer) -> None:
    model = _model(server, cache=None)
    response = await model.generate(ModelRequest(_tool_loop(), tools=TOOLS, system_prompt="X."))

    assert _marked(server.received[0].body) == []
    assert response.usage.cache_write_tokens == 0
    await model.aclose()


def test_a_ttl_anthropic_does_not_offer_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="'5m' or '1h'"):
        AnthropicCache(ttl="10m")  # type: ignore[arg-type]


def _raw(server: AnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="k", base_url=server.url, max_retries=0)


def test_the_server_refuses_five_breakpoints_as_the_api_does(server: AnthropicServer) -> None:
    blocks: list[Any] = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
        for i in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        _raw(server).messages.create(
            model="claude-sonnet-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": blocks}],
        )


def test_the_server_refuses_a_1h_breakpoint_after_a_5m_one(server: AnthropicServer) -> None:
    with pytest.raises(anthropic.BadRequestError, match="must not come after"):
        _raw(server).messages.create(
            model="claude-sonnet-4-5",
            max_tokens=10,
            system=[{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}],
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "b",
                            "cache_control": {"type": "ephemeral", "ttl": "1h"},
                        }
                    ],
                }
            ],
        )


async def test_a_stream_reports_cache_reads_and_one_hour_writes(server: AnthropicServer) -> None:
    from plait.models.base import collect_stream

    model = _model(server, cache=AnthropicCache(ttl="1h"))
    history = _tool_loop()
    first = await collect_stream(model.stream(ModelRequest(history, system_prompt="X.")))
    history += [AssistantMessage("Done."), UserMessage("More?")]
    second = await collect_stream(model.stream(ModelRequest(history, system_prompt="X.")))

    assert first.usage.cache_write_1h_tokens == first.usage.cache_write_tokens > 1024
    assert second.usage.cache_read_tokens == first.usage.cache_write_tokens
    # input_tokens counts every prompt token: fresh, read and written
    assert second.usage.input_tokens >= second.usage.cache_read_tokens + 1
    await model.aclose()


def test_the_server_takes_a_top_level_cache_control_as_the_last_blocks_breakpoint(
    server: AnthropicServer,
) -> None:
    """Automatic caching (what LangChain's middleware sends): one breakpoint on the last
    block, counted among the 4."""
    client = _raw(server)
    automatic = {"cache_control": {"type": "ephemeral"}}
    first = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=10,
        messages=[{"role": "user", "content": LONG}],
        extra_body=automatic,
    )
    second = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=10,
        messages=[
            {"role": "user", "content": LONG},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "And the margin?"},
        ],
        extra_body=automatic,
    )
    assert first.usage.cache_creation_input_tokens and not first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    four: list[Any] = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
        for i in range(4)
    ]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks"):
        client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=10,
            messages=[{"role": "user", "content": [*four, {"type": "text", "text": "tail"}]}],
            extra_body=automatic,
        )


def test_an_empty_text_block_is_never_marked_and_a_shared_block_never_edited() -> None:
    """The API refuses ``cache_control`` on an empty text block: the breakpoint goes on the
    block before it. A marked block is a copy: the block the caller (or a cached image, or a
    stored reasoning payload) holds is left as it was."""
    from plait.models.anthropic_cache import place_breakpoints

    shared = {"type": "text", "text": "the question"}
    system = [{"type": "text", "text": "Be brief."}]
    params: dict[str, Any] = {
        "system": system,
        "messages": [{"role": "user", "content": [shared, {"type": "text", "text": ""}]}],
    }

    placed = place_breakpoints(params, ModelRequest([UserMessage("x")]), AnthropicCache(), 0)

    assert placed == 2
    content = params["messages"][0]["content"]
    assert content[0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in content[1]
    assert shared == {"type": "text", "text": "the question"}  # not edited in place
    assert params["system"][0]["cache_control"] == {"type": "ephemeral"}
