"""FallbackModel through the official SDKs against the local wire servers: an outage of the
primary (529, 503, 429 after retries, a timeout) moves the call to the fallback; a bad request
or a context overflow does not. Settings and reasoning written for the primary's provider do not
reach the fallback's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_completions import sse_answer
from wire_server import WireServer

from plait import Agent
from plait.errors import ConfigurationError, ContextOverflowError, ProviderError
from plait.messages import AssistantMessage, Message, TextPart, UserMessage
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest, ModelSettings, Reasoning, ResponseComplete
from plait.models.fallback import FallbackModel, FallbackNotice, fallback_listener, is_outage
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff
from plait.models.scripted import FunctionModel
from plait.models.timeouts import ModelTimeouts
from plait.parts import ReasoningPart
from plait.runtime import ModelCallRerouted

FIXTURES = Path(__file__).parent / "fixtures"
HELLO = ModelRequest(messages=[UserMessage("Hello?")])


async def no_wait(seconds: float) -> None:
    return None


@pytest.fixture
def primary_server() -> Iterator[WireServer]:
    with WireServer(FIXTURES / "anthropic") as wire:
        yield wire


@pytest.fixture
def fallback_server() -> Iterator[WireServer]:
    with WireServer(FIXTURES / "openai") as wire:
        yield wire


def pair(primary: WireServer, fallback: WireServer, **primary_options: Any) -> FallbackModel:
    primary_options.setdefault("max_retries", 1)
    claude = AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=primary.url,
        backoff=Backoff(jitter=0.0, sleep=no_wait),
        **primary_options,
    )
    gpt = OpenAIChatModel("gpt-4.1-mini", api_key="sk-test", base_url=fallback.url + "/v1")
    return FallbackModel([claude, gpt], owns=True)


@pytest.mark.parametrize(
    ("status", "fixture"),
    [(529, "overloaded.json"), (503, "overloaded.json"), (429, "rate_limit.json")],
)
async def test_an_outage_after_the_primarys_retries_moves_to_the_fallback(
    primary_server: WireServer, fallback_server: WireServer, status: int, fixture: str
) -> None:
    for _ in range(2):  # the first attempt and the adapter's one retry
        primary_server.reply(fixture, status=status, headers={"retry-after": "0"})
    fallback_server.reply("text.json")
    model = pair(primary_server, fallback_server)
    heard: list[FallbackNotice] = []
    token = fallback_listener.set(heard.append)
    try:
        response = await model.generate(HELLO)
    finally:
        fallback_listener.reset(token)
        await model.aclose()
    assert response.content
    assert len(primary_server.received) == 2 and len(fallback_server.received) == 1
    [notice] = heard
    assert notice.error.status == status
    assert (notice.failed, notice.next) == (model.models[0].name, model.models[1].name)


async def test_a_primary_that_times_out_moves_to_the_fallback(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    primary_server.stall()
    fallback_server.reply("text.json")
    model = pair(primary_server, fallback_server, timeouts=ModelTimeouts(total=0.3), max_retries=0)
    try:
        response = await model.generate(HELLO)
    finally:
        await model.aclose()
    assert response.content and len(fallback_server.received) == 1


async def test_a_bad_request_does_not_fall_over(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad field"}}
    primary_server.reply_json(body, status=400)
    model = pair(primary_server, fallback_server)
    try:
        with pytest.raises(ProviderError, match="bad field") as caught:
            await model.generate(HELLO)
    finally:
        await model.aclose()
    assert caught.value.status == 400
    assert fallback_server.received == []


async def test_a_context_overflow_does_not_fall_over(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    primary_server.reply("prompt_too_long.json", status=400)
    model = pair(primary_server, fallback_server)
    try:
        with pytest.raises(ContextOverflowError):
            await model.generate(HELLO)
    finally:
        await model.aclose()
    assert fallback_server.received == []


async def test_a_stream_failing_before_its_first_chunk_falls_over_in_a_turn(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    for _ in range(2):
        primary_server.reply("overloaded.json", status=529, headers={"retry-after": "0"})
    fallback_server._replies.append(sse_answer("From the fallback."))
    model = pair(primary_server, fallback_server)
    agent = Agent(model)
    events = [e async for e in agent.stream("Hello?")]
    await model.aclose()
    fell = [e for e in events if isinstance(e, ModelCallRerouted)]
    assert len(fell) == 1 and fell[0].error.status == 529 and fell[0].dispatch == 0
    assert events[-1].output == "From the fallback."  # type: ignore[attr-defined]


async def test_a_stream_failing_after_its_first_chunk_fails_as_without_a_fallback(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    primary_server.reply("stream_overloaded.sse")
    model = pair(primary_server, fallback_server)
    seen = []
    try:
        with pytest.raises(ProviderError, match="overloaded_error"):
            async for event in model.stream(HELLO):
                seen.append(event)
    finally:
        await model.aclose()
    assert seen and not any(isinstance(e, ResponseComplete) for e in seen)
    assert fallback_server.received == []


async def test_the_fallback_gets_neither_the_primarys_extras_nor_its_reasoning(
    primary_server: WireServer, fallback_server: WireServer
) -> None:
    for _ in range(2):
        primary_server.reply("overloaded.json", status=529, headers={"retry-after": "0"})
    fallback_server.reply("text.json")
    thinking = ReasoningPart(
        provider="anthropic",
        text="hm",
        payload={"type": "thinking", "thinking": "hm", "signature": "SIG-CLAUDE"},
    )
    history: list[Message] = [
        UserMessage("First?"),
        AssistantMessage([thinking, TextPart("First answer.")]),
        UserMessage("Hello?"),
    ]
    request = ModelRequest(
        messages=history,
        max_tokens=4096,
        reasoning=Reasoning(budget_tokens=2048),
        extra={"top_k": 5},
    )
    model = pair(primary_server, fallback_server)
    heard: list[FallbackNotice] = []
    token = fallback_listener.set(heard.append)
    try:
        await model.generate(request)
    finally:
        fallback_listener.reset(token)
        await model.aclose()
    assert primary_server.bodies()[0]["top_k"] == 5
    sent = fallback_server.bodies()[0]
    assert "top_k" not in sent
    assert "SIG-CLAUDE" not in json.dumps(sent)
    assert heard[0].dropped == 1


def test_a_fallback_model_needs_a_fallback() -> None:
    with pytest.raises(ConfigurationError, match="at least one fallback"):
        FallbackModel([])


async def test_settings_of_another_family_are_adapted() -> None:
    from plait.models.fallback import _settings_for

    request = ModelRequest(
        messages=[UserMessage("x")],
        temperature=0.2,
        reasoning=Reasoning(budget_tokens=2048),
        extra={"k": 1},
    )
    to_openai = _settings_for(request, "anthropic", "openai")
    assert to_openai.reasoning is not None and to_openai.reasoning.budget_tokens is None
    assert to_openai.extra == {}
    to_claude = _settings_for(request, "openai", "anthropic")
    assert to_claude.temperature is None
    assert _settings_for(request, "anthropic", "anthropic") is request
    assert ModelSettings().extra == {}


async def test_an_anthropic_fallback_gets_settings_it_accepts_and_no_openai_reasoning() -> None:
    """OpenAI primary down; the Anthropic fallback gets the request without the temperature it
    refuses with thinking on, without OpenAI's body fields and without OpenAI's reasoning item
    (the request as written would fail in the Anthropic adapter: temperature with thinking)."""
    foreign = ReasoningPart(
        provider="openai-responses",
        text="hmm",
        payload={"type": "reasoning", "id": "rs_1", "encrypted_content": "ENC-OPENAI"},
    )
    request = ModelRequest(
        messages=[
            UserMessage("First?"),
            AssistantMessage([foreign, TextPart("First answer.")]),
            UserMessage("Hello?"),
        ],
        temperature=0.2,
        max_tokens=4096,
        reasoning=Reasoning(effort="low"),
        extra={"seed": 7},
    )
    with (
        WireServer(FIXTURES / "openai") as openai_wire,
        WireServer(FIXTURES / "anthropic") as claude_wire,
    ):
        openai_wire.reply("server_error.json", status=503, headers={"retry-after": "0"})
        claude_wire.reply("text.json")
        gpt = OpenAIChatModel(
            "gpt-4.1-mini", api_key="sk-test", base_url=openai_wire.url + "/v1", max_retries=0
        )
        claude = AnthropicModel(
            "claude-sonnet-4-6", api_key="sk-ant-test", base_url=claude_wire.url
        )
        model = FallbackModel([gpt, claude], owns=True)
        try:
            response = await model.generate(request)
        finally:
            await model.aclose()
        assert response.content
        sent = claude_wire.bodies()[0]
    assert "temperature" not in sent and "seed" not in sent
    assert sent["thinking"]["type"] == "enabled"
    assert "ENC-OPENAI" not in json.dumps(sent) and "rs_1" not in json.dumps(sent)
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]


@pytest.mark.parametrize(("status", "retryable"), [(500, False), (503, True), (None, True)])
@pytest.mark.parametrize("streamed", [False, True], ids=["generate", "stream"])
async def test_a_context_overflow_does_not_fall_over_whatever_its_status(
    status: int | None, retryable: bool, streamed: bool
) -> None:
    """A model of your own may raise the overflow with a 5xx (or as retryable): the type wins,
    as the module's table says; compaction, not another model, answers it."""
    overflow = ContextOverflowError(
        "prompt is too long", provider="own", status=status, retryable=retryable
    )

    def too_long(request: ModelRequest) -> str:
        raise overflow

    fallback = FunctionModel(lambda request: "From the fallback.", name="fallback")
    model = FallbackModel([FunctionModel(too_long, name="primary"), fallback])
    heard: list[FallbackNotice] = []
    token = fallback_listener.set(heard.append)
    try:
        with pytest.raises(ContextOverflowError) as caught:
            if streamed:
                _ = [event async for event in model.stream(HELLO)]
            else:
                await model.generate(HELLO)
    finally:
        fallback_listener.reset(token)
    assert caught.value is overflow
    assert fallback.requests == [] and heard == []
    assert not is_outage(overflow)
