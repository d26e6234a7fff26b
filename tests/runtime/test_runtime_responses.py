"""What a model returns is checked as the runtime receives it: a user's own ``Model`` whose
response has a field of the wrong type fails the turn with ``ModelResponseError`` naming the
field and the model, not an untyped ``TypeError`` further on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from plait import Agent, Middleware
from plait.errors import ModelResponseError, ProviderError
from plait.messages import ToolCall, Usage
from plait.middleware import ModelHandler
from plait.middleware.context import DispatchContext
from plait.models.base import ModelRequest, ModelResponse, ResponseComplete, StreamEvent
from plait.runtime.events import ToolCallStarted
from plait.stores.memory import MemoryThreadStore
from plait.tools import tool


class OwnModel:
    """A user's own model answering ``response`` (the same in one piece and streamed)."""

    name = "own-model"

    def __init__(self, response: object) -> None:
        self.response = response

    async def generate(self, request: ModelRequest) -> ModelResponse:
        return self.response  # type: ignore[return-value]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield ResponseComplete(self.response)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        pass


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def call(**fields: Any) -> ToolCall:
    return ToolCall(**{"id": "c1", "name": "add", "args": {"a": 1, "b": 2}, **fields})


def bad(**fields: Any) -> ModelResponse:
    """A ``ModelResponse`` with ``fields`` as given (typed ``Any``: they are meant to be wrong)."""
    return ModelResponse(**fields)


def counts(**fields: Any) -> Usage:
    return Usage(**fields)


FAULTS = [
    pytest.param(bad(usage=counts(input_tokens="12")), "usage.input_tokens", id="str-count"),
    pytest.param(bad(usage=counts(output_tokens=-1)), "usage.output_tokens", id="negative"),
    pytest.param(bad(usage=counts(requests=True)), "usage.requests", id="bool-count"),
    pytest.param(bad(usage=counts(reasoning_tokens=1.5)), "usage.reasoning_tokens", id="float"),
    pytest.param(bad(usage={"input_tokens": 1}), "usage", id="usage-dict"),
    pytest.param(bad(content=["hi"]), "content", id="content"),
    pytest.param(bad(tool_calls=(call(),)), "tool_calls", id="tuple-of-calls"),
    pytest.param(bad(tool_calls=[{"id": "c1"}]), "tool_calls[0]", id="dict-call"),
    pytest.param(bad(tool_calls=[call(), call(id=7)]), "tool_calls[1].id", id="call-id"),
    pytest.param(bad(tool_calls=[call(name=None)]), "tool_calls[0].name", id="call-name"),
    pytest.param(bad(tool_calls=[call(args=[1, 2])]), "tool_calls[0].args", id="call-args"),
    pytest.param(bad(tool_calls=[call(raw_args=b"{")]), "tool_calls[0].raw_args", id="raw-args"),
    pytest.param(bad(finish_reason=3), "finish_reason", id="finish_reason"),
    pytest.param(bad(model=3), "model", id="model"),
    pytest.param(bad(metadata=[]), "metadata", id="metadata"),
]


@pytest.mark.parametrize(("response", "field"), FAULTS)
@pytest.mark.parametrize("streaming", [False, True], ids=["run", "stream"])
async def test_a_response_field_of_the_wrong_type_is_a_typed_error_naming_it(
    response: object, field: str, streaming: bool
) -> None:
    store = MemoryThreadStore()
    agent = Agent(OwnModel(response), tools=[add], store=store)
    started: list[object] = []
    with pytest.raises(ModelResponseError) as caught:
        if streaming:
            async for event in agent.stream("hi", thread_id="t"):
                started += [event] if isinstance(event, ToolCallStarted) else []
        else:
            await agent.run("hi", thread_id="t")
    error = caught.value
    assert (error.field, error.model, error.retryable) == (field, "own-model", False)
    assert isinstance(error, ProviderError)  # what a caller catching model failures catches
    assert str(error).startswith("Model 'own-model' returned ")
    assert f"returned a ModelResponse whose {field} is " in str(error)
    assert "check its generate()/stream()" in str(error)
    assert started == []  # no tool ran on a response the runtime refused
    snapshot = await store.load("t")
    assert [m.role for m in snapshot.messages] == ["user"]


async def test_a_model_returning_no_response_at_all_is_a_typed_error() -> None:
    with pytest.raises(ModelResponseError, match="returned NoneType instead of a ModelResponse"):
        await Agent(OwnModel(None)).run("hi")


async def test_the_message_shows_the_value_and_what_was_expected() -> None:
    agent = Agent(OwnModel(bad(usage=counts(input_tokens="12"))))
    with pytest.raises(
        ModelResponseError,
        match=r"usage\.input_tokens is '12' \(a str\), not an int >= 0 \(a token count\)",
    ):
        await agent.run("hi")


async def test_subclasses_of_the_declared_types_are_accepted() -> None:
    class Text(str):
        pass

    class Count(int):
        pass

    class Tally(Usage):
        pass

    response = ModelResponse(
        content=Text("fine"), usage=Tally(input_tokens=Count(3)), metadata={"k": 1}
    )
    result = await Agent(OwnModel(response)).run("hi")
    assert (result.output, result.usage.input_tokens) == ("fine", 3)


async def test_a_wrap_model_call_middleware_returning_a_bad_response_is_named_as_a_suspect() -> (
    None
):
    class Miscounts(Middleware):
        async def wrap_model_call(
            self, request: ModelRequest, ctx: DispatchContext, handler: ModelHandler
        ) -> ModelResponse:
            response = await handler(request)
            return response.replace(usage=counts(input_tokens="many"))

    agent = Agent(OwnModel(ModelResponse("fine")), middleware=[Miscounts()])
    with pytest.raises(ModelResponseError, match="every wrap_model_call middleware") as caught:
        await agent.run("hi")
    assert caught.value.field == "usage.input_tokens"
