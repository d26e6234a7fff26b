"""Failures both provider adapters report alike, each official SDK against its local wire server.

A 429 waits the server's ``retry-after``, then succeeds; a 401 names the key's variable; a 403
says the key lacks access (not that it is invalid); a body that is not JSON and a reply that is
not a model answer are typed ``ProviderError``s, whole answer or stream; a stream whose body
ends before the model's finish reason is a retryable ``ProviderError`` after the text it gave;
any other client error carries the provider's own message; a proxy's 413 page is a context
overflow. Each row of :data:`PROVIDERS` holds what differs: the wire bodies, the fixture and the
key's variable.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from plait.errors import ContextOverflowError, ProviderError
from plait.messages import UserMessage
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest, StreamEvent, TextDelta
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff

FIXTURES = Path(__file__).parent / "fixtures"
HELLO = ModelRequest(messages=[UserMessage("What is the capital of France?")])


@dataclass(frozen=True)
class Provider:
    """One adapter and what its API sends where the other's sends the same thing its own way."""

    name: str
    key_variable: str
    unauthorized_fixture: str
    unauthorized_says: str
    forbidden: dict[str, Any]
    forbidden_says: str
    broken_stream: bytes
    other_shape: bytes
    not_found_fixture: str
    not_found_says: str
    build: Callable[[str, Backoff], AnthropicModel | OpenAIChatModel]
    """The adapter on the wire server's URL."""


PROVIDERS = [
    Provider(
        name="anthropic",
        key_variable="ANTHROPIC_API_KEY",
        unauthorized_fixture="authentication_error.json",
        unauthorized_says="invalid x-api-key",
        forbidden={
            "type": "error",
            "error": {
                "type": "permission_error",
                "message": "Your API key does not have permission to use the specified resource.",
            },
        },
        forbidden_says="does not have permission",
        broken_stream=b"event: message_start\ndata: {oops\n\n",
        other_shape=b'{"type": "message", "id": "m"}',
        not_found_fixture="not_found.json",
        not_found_says="model: claude-nope",
        build=lambda url, backoff: AnthropicModel(
            "claude-sonnet-4-6", api_key="sk-ant-test", base_url=url, backoff=backoff
        ),
    ),
    Provider(
        name="openai",
        key_variable="OPENAI_API_KEY",
        unauthorized_fixture="invalid_api_key.json",
        unauthorized_says="Incorrect API key",
        forbidden={
            "error": {
                "message": "Project `proj_abc` does not have access to model `gpt-4.1-mini`",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
        forbidden_says="does not have access to model",
        broken_stream=b"data: {oops\n\n",
        other_shape=b'{"object": "list", "data": []}',
        not_found_fixture="model_not_found.json",
        not_found_says="does not exist",
        build=lambda url, backoff: OpenAIChatModel(
            "gpt-4.1-mini", api_key="sk-test", base_url=url + "/v1", backoff=backoff
        ),
    ),
]


@pytest.fixture(params=PROVIDERS, ids=[p.name for p in PROVIDERS])
def provider(request: pytest.FixtureRequest) -> Provider:
    chosen: Provider = request.param
    return chosen


@pytest.fixture
def server(provider: Provider) -> Iterator[WireServer]:
    with WireServer(FIXTURES / provider.name) as wire:
        yield wire


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
async def model(
    provider: Provider, server: WireServer, sleeps: list[float]
) -> AsyncIterator[AnthropicModel | OpenAIChatModel]:
    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    adapter = provider.build(server.url, Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep))
    yield adapter
    await adapter.aclose()


async def drain(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def test_rate_limit_waits_retry_after_then_succeeds(
    server: WireServer, model: AnthropicModel | OpenAIChatModel, sleeps: list[float]
) -> None:
    server.reply("rate_limit.json", status=429, headers={"retry-after": "3"})
    server.reply("text.json")

    response = await model.generate(HELLO)

    assert response.content == "Paris is the capital of France."
    assert len(server.received) == 2
    assert sleeps == [3.0]


async def test_unauthorized_names_the_env_var(
    provider: Provider,
    server: WireServer,
    model: AnthropicModel | OpenAIChatModel,
    sleeps: list[float],
) -> None:
    server.reply(provider.unauthorized_fixture, status=401)

    with pytest.raises(ProviderError, match=provider.key_variable) as caught:
        await model.generate(HELLO)

    assert caught.value.status == 401
    assert caught.value.retryable is False
    assert provider.unauthorized_says in str(caught.value)
    assert sleeps == []


async def test_forbidden_says_the_key_lacks_access_not_that_it_is_invalid(
    provider: Provider,
    server: WireServer,
    model: AnthropicModel | OpenAIChatModel,
    sleeps: list[float],
) -> None:
    # 403: the key was accepted; it may not use this model (or region). "Set a valid key" would
    # send the user after the wrong problem.
    server.reply_json(provider.forbidden, status=403)

    with pytest.raises(ProviderError, match=provider.forbidden_says) as caught:
        await model.generate(HELLO)

    message = str(caught.value)
    assert caught.value.status == 403 and caught.value.retryable is False
    assert "refused access" in message and "permission" in message
    assert "rejected the credentials" not in message and provider.key_variable in message
    assert sleeps == []


async def test_a_body_that_is_not_json_is_a_provider_error(
    provider: Provider,
    server: WireServer,
    model: AnthropicModel | OpenAIChatModel,
    sleeps: list[float],
) -> None:
    # A proxy or a server that is not the API answers 200 with something else: the SDK's
    # JSONDecodeError must not escape untyped, whole answer or stream.
    server.reply_raw(b"<html>Gateway</html>", content_type="application/json")
    server.reply_raw(provider.broken_stream, content_type="text/event-stream")

    with pytest.raises(ProviderError, match="not valid JSON") as caught:
        await model.generate(HELLO)
    assert caught.value.retryable is False and sleeps == []
    with pytest.raises(ProviderError, match="not valid JSON"):
        await drain(model.stream(HELLO))
    assert len(server.received) == 2


async def test_a_reply_that_is_not_a_model_answer_is_a_provider_error(
    provider: Provider, server: WireServer, model: AnthropicModel | OpenAIChatModel
) -> None:
    # A web page (a captive portal, a wrong base URL) or JSON of another shape: the SDK hands
    # it over as it is, and it must not fail later as an AttributeError/TypeError.
    server.reply_raw(b"<html>Sign in to the network</html>", content_type="text/html")
    server.reply_raw(provider.other_shape)

    with pytest.raises(ProviderError, match="not a model answer") as caught:
        await model.generate(HELLO)
    assert "Sign in to the network" in str(caught.value)
    with pytest.raises(ProviderError, match="not a model answer"):
        await model.generate(HELLO)


async def test_other_client_errors_carry_the_provider_message(
    provider: Provider,
    server: WireServer,
    model: AnthropicModel | OpenAIChatModel,
    sleeps: list[float],
) -> None:
    server.reply(provider.not_found_fixture, status=404)

    with pytest.raises(ProviderError, match=provider.not_found_says) as caught:
        await model.generate(HELLO)

    assert type(caught.value) is ProviderError
    assert caught.value.status == 404
    assert caught.value.retryable is False
    assert sleeps == []


async def test_a_413_page_from_a_proxy_is_a_context_overflow(
    server: WireServer, model: AnthropicModel | OpenAIChatModel, sleeps: list[float]
) -> None:
    server.reply_raw(
        b"<html><body>413 Request Entity Too Large</body></html>",
        status=413,
        content_type="text/html",
    )

    with pytest.raises(ContextOverflowError, match="413 Request Entity Too Large") as caught:
        await model.generate(HELLO)

    assert caught.value.status == 413 and caught.value.retryable is False
    assert sleeps == []


async def test_a_stream_that_ends_before_the_model_finished_is_an_error(
    provider: Provider,
    server: WireServer,
    model: AnthropicModel | OpenAIChatModel,
    sleeps: list[float],
) -> None:
    # The body ends cleanly, but no finish reason came: the answer was cut short (a proxy
    # timing out, a server restarting); it must not pass for a whole answer.
    server.reply("stream_cut_short.sse")
    seen: list[StreamEvent] = []

    with pytest.raises(ProviderError, match="ended before the model finished") as caught:
        async for event in model.stream(HELLO):
            seen.append(event)

    assert seen == [TextDelta("Par")]
    assert caught.value.retryable is True and caught.value.provider == provider.name
    assert len(server.received) == 1 and sleeps == []
