"""Provider retries: the turn reports each one (``ModelCallRetried``) without any wiring and the
telemetry records it on the ``chat`` span; ``record_retry`` still serves calls made outside a
turn. The retries are real: the official ``openai`` SDK against a local wire server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from chat_completions import sse_answer
from opentelemetry import trace
from otel_memory import Otel
from wire_server import WireServer

from plait import Agent
from plait.errors import ProviderError
from plait.messages import UserMessage
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff, RetryNotice, retry_listener
from plait.runtime import ModelCallRetried
from plait.telemetry import record_retry

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


@pytest.fixture
async def model(server: WireServer) -> AsyncIterator[OpenAIChatModel]:
    heard: list[RetryNotice] = []

    async def no_wait(seconds: float) -> None:
        return None

    backoff = Backoff(base_delay=0.25, jitter=0.0, sleep=no_wait, on_retry=heard.append)
    adapter = OpenAIChatModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url=server.url + "/v1",
        backoff=backoff,
        max_retries=2,
    )
    adapter.heard = heard  # type: ignore[attr-defined]
    yield adapter
    await adapter.aclose()


async def test_every_retry_in_a_turn_is_an_event_and_a_span_event(
    server: WireServer, model: OpenAIChatModel, otel: Otel
) -> None:
    server.reply("server_error.json", status=500)
    server.reply("rate_limit.json", status=429, headers={"retry-after": "0"})
    server.reply("text.json")

    result = await Agent(model, middleware=[otel.telemetry()]).run("capital of France?")

    assert result.output == "Paris is the capital of France."
    retried = [e for e in result.events if isinstance(e, ModelCallRetried)]
    assert [(e.dispatch, e.retry, e.max_retries, e.error.status) for e in retried] == [
        (0, 1, 2, 500),
        (0, 2, 2, 429),
    ]
    assert [e.delay for e in retried] == [0.25, 0.0]
    assert len(model.heard) == 2  # type: ignore[attr-defined]  # the backoff's own callback too
    events = otel.one("chat ").events
    assert [e.name for e in events] == ["plait.provider_retry", "plait.provider_retry"]
    assert dict(events[0].attributes or {}) == {
        "plait.retry": 1,
        "plait.max_retries": 2,
        "plait.delay": 0.25,
        "error.type": "ProviderError",
        "plait.status": 500,
    }
    assert retry_listener.get() is None  # the turn removed its listener


async def test_a_streamed_turn_reports_its_retries_too(
    server: WireServer, model: OpenAIChatModel
) -> None:
    server.reply("server_error.json", status=503)
    server.reply("stream_tool_calls.sse")
    server._replies.append(sse_answer("Sunny in both."))  # the second call streams too

    events = [e async for e in Agent(model).stream("weather?")]

    [retried] = [e for e in events if isinstance(e, ModelCallRetried)]
    assert (retried.type, retried.dispatch, retried.error.status) == ("model_call_retried", 0, 503)


async def test_record_retry_serves_calls_outside_a_turn(
    server: WireServer, model: OpenAIChatModel, otel: Otel
) -> None:
    server.reply("server_error.json", status=500)
    server.reply("text.json")
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("my call"):
        token = retry_listener.set(record_retry)
        try:
            await model.generate(ModelRequest(messages=[UserMessage("hi")]))
        finally:
            retry_listener.reset(token)
    [event] = otel.one("my call").events
    assert event.name == "plait.provider_retry"
    assert dict(event.attributes or {})["plait.status"] == 500
    record_retry(RetryNotice(ProviderError("x", provider="x", status=529), 0.5, 1, 2))
    assert trace.get_current_span().is_recording() is False  # no span: nothing recorded


async def test_record_retry_wired_as_on_retry_does_not_double_a_turns_retries(
    server: WireServer, otel: Otel
) -> None:
    async def no_wait(seconds: float) -> None:
        return None

    backoff = Backoff(base_delay=0.25, jitter=0.0, sleep=no_wait, on_retry=record_retry)
    model = OpenAIChatModel(
        "gpt-4.1-mini", api_key="sk-test", base_url=server.url + "/v1", backoff=backoff
    )
    server.reply("server_error.json", status=500)
    server.reply("text.json")
    await Agent(model, middleware=[otel.telemetry()]).run("hi")
    await model.aclose()
    assert [e.name for e in otel.one("chat ").events] == ["plait.provider_retry"]
