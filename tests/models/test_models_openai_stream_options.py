"""``stream_options`` (``{"include_usage": true}``, the final usage chunk of a stream) against a
local server speaking the Chat Completions wire format through the official ``openai`` SDK.

Some OpenAI-compatible servers refuse fields they do not know with a 400. By default
(``stream_usage=None``) the model asks for usage, and on a 400 that names ``stream_options`` it
asks once more without, and never again on that model instance; ``stream_usage=True`` always
asks (a refusal is an error), ``False`` never asks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from plait.errors import ConfigurationError, ProviderError
from plait.messages import Usage, UserMessage
from plait.models.base import ModelRequest, ResponseComplete, StreamEvent
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff

FIXTURES = Path(__file__).parent / "fixtures" / "openai"
HELLO = ModelRequest(messages=[UserMessage("What is the capital of France?")])
OTHER_400 = {"object": "error", "message": "temperature must be <= 2", "code": 400}
# vLLM's answer to a request a validator refuses as a whole: the error echoes the whole body
# as its input, stream_options included, though that is not what it refuses.
ECHOED_400 = {
    "object": "error",
    "message": (
        "[{'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, When using "
        "`tool_choice`, `tools` must be set.', 'input': {'model': 'llama3.1', 'stream': True, "
        "'stream_options': {'include_usage': True}, 'tool_choice': 'required'}}]"
    ),
    "type": "BadRequestError",
    "code": 400,
}


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


@pytest.fixture
def sleeps() -> list[float]:
    return []


def compatible(server: WireServer, sleeps: list[float], **options: Any) -> OpenAIChatModel:
    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return OpenAIChatModel(
        "llama3.1",
        api_key="none",
        base_url=server.url + "/v1",
        provider_label="openai-compatible",
        backoff=Backoff(base_delay=0.5, jitter=0.0, sleep=record_sleep),
        **options,
    )


async def final(events: AsyncIterator[StreamEvent]) -> ResponseComplete:
    found = [event async for event in events]
    assert isinstance(found[-1], ResponseComplete)
    return found[-1]


def sent_options(server: WireServer) -> list[object]:
    return [body.get("stream_options") for body in server.bodies()]


@pytest.mark.parametrize("status", [400, 422])
async def test_a_refused_stream_options_is_asked_once_more_without_and_then_never(
    server: WireServer, sleeps: list[float], status: int
) -> None:
    model = compatible(server, sleeps)
    server.reply("stream_options_refused.json", status=status)
    server.reply("stream_reasoning.sse")
    server.reply("stream_reasoning.sse")

    first = await final(model.stream(HELLO))
    second = await final(model.stream(HELLO))

    assert first.response.content == second.response.content != ""
    # asked, refused, asked again without (no backoff wait); remembered for the next stream
    assert sent_options(server) == [{"include_usage": True}, None, None]
    assert sleeps == []
    await model.aclose()


async def test_a_400_that_does_not_name_stream_options_is_raised_as_it_is(
    server: WireServer, sleeps: list[float]
) -> None:
    model = compatible(server, sleeps)
    server.reply_json(OTHER_400, status=400)

    with pytest.raises(ProviderError, match="temperature must be <= 2") as caught:
        await final(model.stream(HELLO))

    assert caught.value.status == 400
    assert sent_options(server) == [{"include_usage": True}]
    await model.aclose()


async def test_stream_usage_true_always_asks_and_a_refusal_is_an_error(
    server: WireServer, sleeps: list[float]
) -> None:
    model = compatible(server, sleeps, stream_usage=True)
    server.reply("stream_options_refused.json", status=400)

    with pytest.raises(ProviderError, match="stream_options") as caught:
        await final(model.stream(HELLO))

    assert caught.value.status == 400
    assert sent_options(server) == [{"include_usage": True}]
    await model.aclose()


async def test_stream_usage_false_never_asks(server: WireServer, sleeps: list[float]) -> None:
    model = compatible(server, sleeps, stream_usage=False)
    server.reply("stream_reasoning.sse")

    done = await final(model.stream(HELLO))

    assert sent_options(server) == [None]
    assert done.response.usage.requests == 1  # the server sent usage anyway: it is kept
    assert done.response.usage != Usage(requests=1)
    await model.aclose()


@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_stream_usage_must_be_true_false_or_none(value: object) -> None:
    with pytest.raises(ConfigurationError, match="stream_usage must be True, False or None"):
        OpenAIChatModel("m", api_key="k", stream_usage=value)  # type: ignore[arg-type]


async def test_a_400_that_only_echoes_stream_options_is_not_remembered_as_a_refusal(
    server: WireServer, sleeps: list[float]
) -> None:
    model = compatible(server, sleeps)
    server.reply_json(ECHOED_400, status=400)
    server.reply_json(ECHOED_400, status=400)  # refused without stream_options too
    server.reply("stream_reasoning.sse")

    with pytest.raises(ProviderError, match="`tools` must be set"):
        await final(model.stream(HELLO))
    done = await final(model.stream(HELLO))

    # the server refuses something else: the next stream still asks for its usage
    assert model.stream_usage_refused is False
    assert sent_options(server) == [{"include_usage": True}, None, {"include_usage": True}]
    assert done.response.usage.requests == 1
    await model.aclose()
