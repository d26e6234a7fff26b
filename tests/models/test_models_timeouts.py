"""Model calls have deadlines (issue 11 §3): connect/read timeouts and one overall deadline per
call across retries, tested with the official SDKs against a local server that accepts the
connection and never answers."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from wire_server import WireServer

from plait import Agent, Limits
from plait.errors import ConfigurationError, ModelTimeoutError, ProviderError
from plait.messages import UserMessage
from plait.models import FunctionModel
from plait.models.anthropic import AnthropicModel
from plait.models.base import ModelRequest, ModelResponse, StreamEvent
from plait.models.language_model import LanguageModelMiddleware, wrap_model
from plait.models.openai import OpenAIChatModel
from plait.models.retrying import Backoff
from plait.models.timeouts import DEFAULT_MODEL_TIMEOUT, ModelTimeouts
from plait.stores import MemoryThreadStore

FIXTURES = Path(__file__).parent / "fixtures"
HELLO = ModelRequest(messages=[UserMessage("Hello?")])
FAST_BACKOFF = Backoff(base_delay=0.01, max_delay=0.01)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as wire:
        yield wire


def openai_model(server: WireServer, timeouts: ModelTimeouts, retries: int = 3) -> Any:
    return OpenAIChatModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url=server.url + "/v1",
        timeouts=timeouts,
        max_retries=retries,
        backoff=FAST_BACKOFF,
    )


def anthropic_model(server: WireServer, timeouts: ModelTimeouts, retries: int = 3) -> Any:
    return AnthropicModel(
        "claude-sonnet-4-6",
        api_key="sk-ant-test",
        base_url=server.url,
        timeouts=timeouts,
        max_retries=retries,
        backoff=FAST_BACKOFF,
    )


MODELS = {"openai": openai_model, "anthropic": anthropic_model}
STREAMS = {"openai": "openai/stream_tool_calls.sse", "anthropic": "anthropic/stream_tool_use.sse"}


@pytest.mark.parametrize("provider", MODELS)
async def test_a_server_that_never_answers_ends_at_the_overall_deadline(
    server: WireServer, provider: str
) -> None:
    for _ in range(4):
        server.stall()
    model = MODELS[provider](server, ModelTimeouts(read=60, total=0.5))
    with pytest.raises(ModelTimeoutError, match=r"within its 0.5 s deadline \(1 attempt;") as info:
        await model.generate(HELLO)
    assert info.value.provider == model.name
    assert len(server.received) == 1
    await model.aclose()


@pytest.mark.parametrize("provider", MODELS)
async def test_the_read_timeout_ends_each_attempt_and_retries_stay_bounded(
    server: WireServer, provider: str
) -> None:
    for _ in range(3):
        server.stall()
    model = MODELS[provider](server, ModelTimeouts(read=0.1, total=60), retries=2)
    with pytest.raises(ProviderError, match="gave up after 2 retries") as info:
        await model.generate(HELLO)
    assert not isinstance(info.value, ModelTimeoutError)
    assert len(server.received) == 3  # one attempt and two retries, each cut by the read timeout
    await model.aclose()


@pytest.mark.parametrize("provider", MODELS)
async def test_a_stream_that_stalls_midway_ends_at_the_overall_deadline(
    server: WireServer, provider: str
) -> None:
    server.stall(STREAMS[provider], after=2)
    model = MODELS[provider](server, ModelTimeouts(read=60, total=0.5))
    events = []
    with pytest.raises(ModelTimeoutError):
        async for event in model.stream(HELLO):
            events.append(event)
    assert len(server.received) == 1
    await model.aclose()


async def test_an_agent_turn_on_a_silent_server_fails_typed_and_keeps_the_input(
    server: WireServer,
) -> None:
    server.stall()
    store = MemoryThreadStore()
    agent = Agent(openai_model(server, ModelTimeouts(total=0.3)), store=store)
    with pytest.raises(ModelTimeoutError):
        await agent.run("Are you there?", thread_id="t")
    assert [m.text for m in (await store.load("t")).messages] == ["Are you there?"]
    await agent.model.aclose()


@pytest.mark.parametrize("provider", MODELS)
async def test_timeouts_given_with_a_client_passed_in_reach_that_client(
    server: WireServer, provider: str
) -> None:
    # The caller's client has the SDK's default read timeout (10 minutes); `timeouts=` given
    # beside it must still cut each attempt at its read timeout.
    import anthropic
    import openai

    for _ in range(2):
        server.stall()
    timeouts = ModelTimeouts(read=0.1, total=60)
    model: OpenAIChatModel | AnthropicModel
    client: openai.AsyncOpenAI | anthropic.AsyncAnthropic
    if provider == "openai":
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=server.url + "/v1")
        model = OpenAIChatModel("m", client=client, timeouts=timeouts, max_retries=1)
    else:
        client = anthropic.AsyncAnthropic(api_key="sk-ant-test", base_url=server.url)
        model = AnthropicModel("m", client=client, timeouts=timeouts, max_retries=1)
    model.backoff = FAST_BACKOFF

    with pytest.raises(ProviderError, match="gave up after 1 retry") as info:
        await model.generate(HELLO)

    assert not isinstance(info.value, ModelTimeoutError)
    assert len(server.received) == 2
    await client.close()


def test_defaults_are_documented_and_reach_the_sdk_client() -> None:
    assert ModelTimeouts() == ModelTimeouts(connect=10.0, read=300.0, total=600.0)
    model = OpenAIChatModel("gpt-4.1-mini", api_key="sk-test")
    timeout = model._client.timeout
    assert (timeout.connect, timeout.read) == (10.0, 300.0)  # type: ignore[union-attr]
    unbounded = AnthropicModel("m", api_key="k", timeouts=ModelTimeouts(read=math.inf))
    assert unbounded._client.timeout.read is None  # type: ignore[union-attr]


@pytest.mark.parametrize("field", ["connect", "read", "total"])
@pytest.mark.parametrize("bad", [0, -1, math.nan, "5", None])
def test_a_timeout_that_is_not_a_positive_number_is_a_configuration_error(
    field: str, bad: Any
) -> None:
    with pytest.raises(ConfigurationError, match=f"ModelTimeouts.{field} must be"):
        ModelTimeouts(**{field: bad})


@pytest.mark.parametrize(
    "spec", ["openai:gpt-4.1-mini", "anthropic:claude-x", "openai-compatible:m@http://127.0.0.1:9"]
)
def test_models_from_a_spec_take_timeouts_and_the_env_deadline(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plait.models.registry import MODEL_TIMEOUT_ENV, resolve_model

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.delenv(MODEL_TIMEOUT_ENV, raising=False)
    assert resolve_model(spec).timeouts == ModelTimeouts()  # type: ignore[attr-defined]
    given = ModelTimeouts(connect=1, read=2, total=3)
    assert resolve_model(spec, timeouts=given).timeouts is given  # type: ignore[attr-defined]
    monkeypatch.setenv(MODEL_TIMEOUT_ENV, "42")
    assert resolve_model(spec).timeouts.total == 42  # type: ignore[attr-defined]
    monkeypatch.setenv(MODEL_TIMEOUT_ENV, "soon")
    with pytest.raises(ConfigurationError, match="PLAIT_MODEL_TIMEOUT='soon' is not a number"):
        resolve_model(spec)


def silent_model() -> FunctionModel:
    """A user's own model that never answers (nothing of its own bounds it)."""

    async def answer(request: ModelRequest) -> str:
        await asyncio.Event().wait()
        return "never"

    return FunctionModel(answer, name="mine")


@pytest.mark.parametrize("streaming", [False, True], ids=["run", "stream"])
async def test_a_users_own_model_is_bounded_by_the_agents_model_timeout(streaming: bool) -> None:
    # Regression: only the adapters had a deadline; a silent custom model held the turn forever.
    store = MemoryThreadStore()
    agent = Agent(silent_model(), store=store, limits=Limits(model_timeout=0.2))
    with pytest.raises(ModelTimeoutError, match=r"'mine' .* 0.2 s deadline .*Limits\(model_t"):
        if streaming:
            async for _event in agent.stream("Are you there?", thread_id="t"):
                pass
        else:
            await agent.run("Are you there?", thread_id="t")
    assert [m.text for m in (await store.load("t")).messages] == ["Are you there?"]


class FutureModel:
    """A model whose ``generate`` is a plain function handing back a future (work started
    elsewhere, e.g. ``loop.run_in_executor``), not a coroutine; this one never resolves."""

    name = "future"

    def generate(self, request: ModelRequest) -> Awaitable[ModelResponse]:
        return asyncio.get_running_loop().create_future()

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Nothing to release."""


async def test_a_model_call_that_is_an_awaitable_but_not_a_coroutine_is_bounded_too() -> None:
    # Regression: agent_deadline awaited a non-coroutine awaitable without any deadline.
    agent = Agent(FutureModel(), limits=Limits(model_timeout=0.2))  # type: ignore[arg-type]
    async with asyncio.timeout(10):  # a hang (the bug) fails here instead of blocking the run
        with pytest.raises(ModelTimeoutError, match=r"'future' .* 0.2 s deadline .*Limits"):
            await agent.run("Are you there?")


async def test_an_adapter_keeps_its_own_deadline_and_is_not_timed_twice(
    server: WireServer,
) -> None:
    server.stall()
    agent = Agent(openai_model(server, ModelTimeouts(total=0.4)), limits=Limits(model_timeout=0.05))
    with pytest.raises(ModelTimeoutError, match=r"0.4 s deadline .*ModelTimeouts\(total"):
        await agent.run("Are you there?")
    await agent.model.aclose()


async def test_an_adapter_seen_through_language_model_middleware_is_not_timed_twice(
    server: WireServer,
) -> None:
    # Regression: wrap_model's WrappedModel hid the adapter's ModelTimeouts, so the agent's
    # model_timeout cut the call short and blamed Limits(model_timeout=...).
    server.stall()
    adapter = openai_model(server, ModelTimeouts(total=0.4))
    wrapped = wrap_model(adapter, LanguageModelMiddleware(), LanguageModelMiddleware())
    assert wrapped.timeouts is adapter.timeouts  # type: ignore[attr-defined]
    agent = Agent(wrapped, limits=Limits(model_timeout=0.05))
    with pytest.raises(ModelTimeoutError, match=r"0.4 s deadline .*ModelTimeouts\(total"):
        await agent.run("Are you there?")
    await agent.model.aclose()


def test_the_agents_model_timeout_has_a_documented_default_and_is_checked() -> None:
    assert Limits().model_timeout == DEFAULT_MODEL_TIMEOUT == ModelTimeouts().total == 600.0
    with pytest.raises(ConfigurationError, match=r"Limits\.model_timeout must be"):
        Limits(model_timeout=0)
