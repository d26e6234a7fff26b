"""ScriptedModel and FunctionModel: the public fakes, generate and stream."""

from __future__ import annotations

import json

import pytest

from plait import FunctionModel, ModelRequest, ModelResponse, ScriptedModel, ToolCall
from plait.models import ResponseComplete, TextDelta, ToolCallDelta, collect_stream
from plait.models.scripted import ScriptExhausted


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
