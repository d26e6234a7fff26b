"""OpenAI prompt caching: ``prompt_cache_key`` (the thread id) and ``prompt_cache_retention``
go to OpenAI itself only; an OpenAI-compatible server is sent neither."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from wire_server import WireServer

from plait.errors import ConfigurationError
from plait.messages import UserMessage
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIChatModel
from plait.models.openai_cache import OpenAIPromptCache, is_openai_host
from plait.models.openai_responses import OpenAIResponsesModel

FIXTURES = Path(__file__).parent / "fixtures" / "openai"
REQUEST = ModelRequest([UserMessage("Hi")], metadata={"thread_id": "thread-7"})


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


def test_openai_itself_gets_the_thread_id_as_prompt_cache_key() -> None:
    chat = OpenAIChatModel("gpt-5-mini", api_key="k")  # the SDK's default: api.openai.com
    responses = OpenAIResponsesModel("gpt-5-mini", api_key="k")

    assert chat.request_body(REQUEST)["prompt_cache_key"] == "thread-7"
    assert responses.request_body(REQUEST)["prompt_cache_key"] == "thread-7"
    assert "prompt_cache_retention" not in chat.request_body(REQUEST)


def test_an_own_key_and_the_retention_option_are_sent() -> None:
    cache = OpenAIPromptCache(key="tenant-a", retention="24h")
    body = OpenAIChatModel("gpt-5-mini", api_key="k", prompt_cache=cache).request_body(REQUEST)

    assert body["prompt_cache_key"] == "tenant-a"
    assert body["prompt_cache_retention"] == "24h"


async def test_a_compatible_server_is_sent_no_cache_field(server: WireServer) -> None:
    server.reply("text.json")
    model = OpenAIChatModel(
        "llama", api_key="k", base_url=server.url + "/v1", provider_label="openai-compatible"
    )

    await model.generate(REQUEST)

    [sent] = server.bodies()
    assert "prompt_cache_key" not in sent
    assert "prompt_cache_retention" not in sent
    await model.aclose()


async def test_send_true_sends_the_key_through_the_sdk(server: WireServer) -> None:
    server.reply("text.json")
    model = OpenAIChatModel(
        "gpt-5-mini",
        api_key="k",
        base_url=server.url + "/v1",
        prompt_cache=OpenAIPromptCache(send=True),
    )

    await model.generate(REQUEST)

    assert server.bodies()[0]["prompt_cache_key"] == "thread-7"
    await model.aclose()


def test_no_thread_no_key_and_none_turns_it_off() -> None:
    bare = ModelRequest([UserMessage("Hi")])
    assert "prompt_cache_key" not in OpenAIChatModel("m", api_key="k").request_body(bare)
    off = OpenAIChatModel("m", api_key="k", prompt_cache=None)
    assert "prompt_cache_key" not in off.request_body(REQUEST)


def test_hosts_and_bad_options() -> None:
    assert is_openai_host("https://api.openai.com/v1/")
    assert not is_openai_host("http://localhost:11434/v1")
    assert not is_openai_host("https://api.openai.com.evil.example/v1")
    with pytest.raises(ConfigurationError, match="retention"):
        OpenAIPromptCache(retention="1h")  # type: ignore[arg-type]


async def test_the_local_server_caches_prefixes_in_128_token_steps_above_1024() -> None:
    from responses_server import ResponsesServer, Turn

    long = "The quarterly figures, line by line. " * 200
    with ResponsesServer(prompt_cache=True) as server:
        model = OpenAIResponsesModel(
            "gpt-5-mini",
            api_key="k",
            base_url=server.url,
            prompt_cache=OpenAIPromptCache(send=True),
        )
        for _ in range(3):
            server.turn(Turn(reasoning=None, text="ok"))
        meta = {"thread_id": "t"}
        first = await model.generate(ModelRequest([UserMessage(long)], metadata=meta))
        grown = [UserMessage(long), UserMessage("And the margin?")]
        second = await model.generate(ModelRequest(grown, metadata=meta))
        other = await model.generate(ModelRequest(grown, metadata={"thread_id": "u"}))
        await model.aclose()

    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens >= 1024
    assert (second.usage.cache_read_tokens - 1024) % 128 == 0
    assert second.usage.cache_read_tokens <= first.usage.input_tokens
    assert other.usage.cache_read_tokens == 0  # another prompt_cache_key: another cache
    assert server.received[0]["prompt_cache_key"] == "t"
