"""ScriptedModel and FunctionModel: the public fakes, generate and stream."""

from __future__ import annotations

import json

import pytest

from plait import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, ToolCall
from plait.models import ResponseComplete, TextDelta, ToolCallDelta, collect_stream
from plait.models.scripted import ScriptExhausted, ScriptIncomplete


async def test_scripted_model_answers_in_order_and_records_requests() -> None:
    model = ScriptedModel(["one", ToolCall("c1", "t", {"a": 1}), [ToolCall("c2", "t", {})]])
    r1 = await model.generate(ModelRequest(messages=[]))
    r2 = await model.generate(ModelRequest(messages=[], system_prompt="s"))
    r3 = await model.generate(ModelRequest(messages=[]))
    assert (r1.content, r1.finish_reason) == ("one", "stop")
    assert (r2.tool_calls[0].name, r2.finish_reason) == ("t", "tool_calls")
    assert len(r3.tool_calls) == 1
    assert model.requests[1].system_prompt == "s" and model.remaining == 0


async def test_scripted_model_exhausted_is_a_clear_error() -> None:
    model = ScriptedModel(["only"])
    await model.generate(ModelRequest(messages=[]))
    with pytest.raises(ScriptExhausted, match="has 1 responses and was called 2 times"):
        await model.generate(ModelRequest(messages=[]))


async def test_assert_complete_fails_on_an_unused_entry_and_passes_once_used() -> None:
    model = ScriptedModel(["first", ToolCall("c1", "lookup", {"q": "x"})])
    await model.generate(ModelRequest(messages=[]))
    unused = r"answered 1 of 2 script entries; 1 never used"
    with pytest.raises(ScriptIncomplete, match=unused) as e:
        model.assert_complete()
    assert isinstance(e.value, AssertionError) and "lookup" in str(e.value)
    await model.generate(ModelRequest(messages=[]))
    model.assert_complete()
    assert model.remaining == 0


async def test_scripted_model_streams_text_and_tool_call_deltas() -> None:
    response = ModelResponse(
        content="hello brave world",
        tool_calls=[ToolCall("c1", "search", {"query": "plait agents", "limit": 5})],
        finish_reason="tool_calls",
    )
    events = [e async for e in ScriptedModel([response]).stream(ModelRequest(messages=[]))]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello brave world"
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) >= 3 and deltas[0].id == "c1" and deltas[0].name == "search"
    assert json.loads("".join(d.args_fragment for d in deltas)) == {
        "query": "plait agents",
        "limit": 5,
    }
    assert isinstance(events[-1], ResponseComplete) and events[-1].response is response


async def test_function_model_sync_and_async() -> None:
    sync = FunctionModel(lambda r: f"{len(r.messages)} messages")
    assert (await sync.generate(ModelRequest(messages=[]))).content == "0 messages"

    async def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content=request.system_prompt.upper())

    model = FunctionModel(answer)
    final = await collect_stream(model.stream(ModelRequest(messages=[], system_prompt="hi")))
    assert final.content == "HI" and len(model.requests) == 1


NOT_RESPONSES = [None, 42, {"content": "x"}, [ToolCall("c", "t"), "text"], 3.5]


@pytest.mark.parametrize("entry", NOT_RESPONSES, ids=repr)
async def test_function_model_returning_a_non_response_is_a_typed_error_naming_it(
    entry: object,
) -> None:
    from plait.models import InvalidScriptEntry

    model = FunctionModel(lambda r: entry, name="mine")  # type: ignore[arg-type, return-value]
    with pytest.raises(InvalidScriptEntry, match="FunctionModel 'mine' returned for call 1 is "):
        await model.generate(ModelRequest(messages=[]))
    with pytest.raises(InvalidScriptEntry, match="use a ModelResponse, a str, a ToolCall"):
        await collect_stream(model.stream(ModelRequest(messages=[])))


@pytest.mark.parametrize("entry", NOT_RESPONSES, ids=repr)
def test_scripted_model_with_a_non_response_entry_fails_when_built(entry: object) -> None:
    from plait.models import InvalidScriptEntry

    with pytest.raises(InvalidScriptEntry, match="entry 1 of ScriptedModel 'scripted' is "):
        ScriptedModel(["fine", entry])  # type: ignore[list-item]


def test_a_model_response_with_wrong_field_types_is_a_typed_error() -> None:
    from plait.models import InvalidScriptEntry

    bad = ModelResponse(content=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidScriptEntry, match="content must be a str"):
        ScriptedModel([bad])


async def test_an_agent_whose_custom_model_returns_junk_gets_a_provider_error() -> None:
    from plait import Agent
    from plait.errors import ProviderError

    class Junk:
        name = "junk-model"

        async def generate(self, request: ModelRequest) -> ModelResponse:
            return 42  # type: ignore[return-value]

        async def stream(self, request: ModelRequest) -> object:
            raise NotImplementedError

    with pytest.raises(ProviderError, match="Model 'junk-model' returned int instead of a Model"):
        await Agent(Junk()).run("hi")  # type: ignore[arg-type]


async def test_an_agent_whose_model_returns_a_malformed_response_gets_a_provider_error() -> None:
    from plait import Agent
    from plait.errors import ProviderError

    class Malformed:
        name = "malformed"

        async def generate(self, request: ModelRequest) -> ModelResponse:
            return ModelResponse(content=None)  # type: ignore[arg-type]

        async def stream(self, request: ModelRequest) -> object:
            raise NotImplementedError

    with pytest.raises(ProviderError, match="'malformed' returned a ModelResponse whose content"):
        await Agent(Malformed()).run("hi")  # type: ignore[arg-type]
