"""Structured output (plait.runtime.output): both modes, retries, validators, unions, streaming,
the final-answer tool beside other tools, and a thread that stays valid on every failure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from plait import (
    Agent,
    AssistantMessage,
    Message,
    ModelResponse,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.errors import ConfigurationError, OutputRetry, OutputValidationError
from plait.middleware import DispatchContext, Middleware
from plait.runtime.output import OutputDeltaReceived
from plait.runtime.output_schema import OutputSpec


class Ticket(BaseModel):
    title: str
    priority: int = Field(ge=1, le=5)


class Refusal(BaseModel):
    kind: Literal["refusal"]
    reason: str


class Address(BaseModel):
    city: str
    zip: str | None = None


class Person(BaseModel):
    name: str
    home: Address
    work: Address | None = None
    tags: list[str] = []


@dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


def _pairs_intact(messages: Sequence[Message]) -> bool:
    """Every tool call answered by a result right after its message, and no stray result."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            if message.result.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.result.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
    return not open_calls


async def test_tool_mode_final_result_gives_the_typed_output() -> None:
    model = ScriptedModel([ToolCall("c1", "final_result", {"title": "Disk full", "priority": 2})])
    agent = Agent(model, output_type=Ticket)
    result = await agent.run("File a ticket", thread_id="t")
    assert result.output == Ticket(title="Disk full", priority=2)
    request = model.requests[0]
    assert [t.name for t in request.tools] == ["final_result"]
    assert request.tools[0].parameters["additionalProperties"] is False
    assert request.output_schema is None
    snapshot = await agent.store.load("t")
    assert _pairs_intact(snapshot.messages)
    model.assert_complete()


async def test_native_mode_sends_the_schema_and_parses_the_text() -> None:
    model = ScriptedModel(['{"title": "Printer", "priority": 3}'])
    agent = Agent(model, output_type=Ticket, output_mode="native")
    result = await agent.run("File a ticket")
    assert result.output == Ticket(title="Printer", priority=3)
    schema = model.requests[0].output_schema
    assert schema is not None and schema.name == "Ticket" and schema.strict
    assert schema.schema["required"] == ["title", "priority"]
    assert model.requests[0].tools == []
    model.assert_complete()


async def test_native_first_answer_fails_validation_then_passes() -> None:
    model = ScriptedModel(['{"title": "x", "priority": 9}', '{"title": "x", "priority": 4}'])
    agent = Agent(model, output_type=Ticket, output_mode="native")
    result = await agent.run("go", thread_id="t")
    assert result.output.priority == 4
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "priority" in retry.text and "did not validate" in retry.text
    model.assert_complete()


async def test_tool_mode_invalid_arguments_become_the_calls_error_result() -> None:
    model = ScriptedModel(
        [
            ToolCall("c1", "final_result", {"title": "x", "priority": 0}),
            ToolCall("c2", "final_result", {"title": "x", "priority": 1}),
        ]
    )
    agent = Agent(model, output_type=Ticket)
    result = await agent.run("go", thread_id="t")
    assert result.output.priority == 1
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage) and answer.result.is_error
    assert answer.result.tool_call_id == "c1"
    assert _pairs_intact((await agent.store.load("t")).messages)
    model.assert_complete()


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_never_complies_raises_typed_error_with_the_thread_valid(mode: str) -> None:
    if mode == "native":
        model = ScriptedModel(["not json", '{"title": 1}', "never called"][:2])
    else:
        model = ScriptedModel(
            [ToolCall("c1", "final_result", {"title": "x"}), ToolCall("c2", "final_result", {})]
        )
    agent = Agent(model, output_type=Ticket, output_mode=mode)  # type: ignore[arg-type]
    with pytest.raises(OutputValidationError) as caught:
        await agent.run("go", thread_id="t")
    assert caught.value.retries == 1
    assert caught.value.errors and "priority" in caught.value.errors[0]
    assert caught.value.raw in ('{"title": 1}', "{}")
    messages = (await agent.store.load("t")).messages
    assert _pairs_intact(messages)
    assert isinstance(messages[0], UserMessage) and len(messages) >= 3
    model.assert_complete()
    # the thread is loadable and usable: the next turn runs on it
    model2 = ScriptedModel(["fine"])
    later = Agent(model2, store=agent.store)
    assert (await later.run("and now?", thread_id="t")).output == "fine"


class RefuseFinalResult(Middleware):
    """A guard that skips every ``final_result`` call before it runs."""

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        return None if call.name == "final_result" else call


async def test_a_final_result_call_refused_before_it_runs_still_spends_a_retry() -> None:
    """A skipped ``final_result`` never reaches the tool, yet counts as a try: with one retry the
    second refused call ends the turn with ``OutputValidationError`` (not the model-call limit),
    and each refused call still has its result."""
    calls = [ToolCall(f"c{i}", "final_result", {"title": "T", "priority": 1}) for i in (1, 2, 3)]
    model = ScriptedModel(calls)
    agent = Agent(model, output_type=Ticket, middleware=[RefuseFinalResult()])
    with pytest.raises(OutputValidationError) as caught:
        await agent.run("go", thread_id="t")
    assert caught.value.errors == ["call rejected"]
    assert json.loads(caught.value.raw) == {"title": "T", "priority": 1}
    assert len(model.requests) == 2  # the third scripted call is never asked for
    messages = (await agent.store.load("t")).messages
    assert _pairs_intact(messages)
    assert [m.result.tool_call_id for m in messages if isinstance(m, ToolMessage)] == ["c1", "c2"]


async def test_text_answer_in_tool_mode_gets_a_retry_prompt() -> None:
    model = ScriptedModel(
        ["Here it is: Disk full", ToolCall("c1", "final_result", {"title": "D", "priority": 1})]
    )
    agent = Agent(model, output_type=Ticket)
    result = await agent.run("go")
    assert result.output.title == "D"
    prompt = model.requests[1].messages[-1]
    assert isinstance(prompt, UserMessage) and "final_result" in prompt.text
    model.assert_complete()


async def test_union_output_in_both_modes() -> None:
    refusal = {"response": {"kind": "refusal", "reason": "no"}}
    model = ScriptedModel([ToolCall("c1", "final_result", refusal)])
    agent: Agent[Ticket | Refusal] = Agent(model, output_type=Ticket | Refusal)
    result = await agent.run("go")
    assert result.output == Refusal(kind="refusal", reason="no")
    params = model.requests[0].tools[0].parameters
    assert params["required"] == ["response"] and "anyOf" in params["properties"]["response"]
    native = ScriptedModel([json.dumps({"response": {"title": "a", "priority": 5}})])
    agent2 = Agent(native, output_type=Ticket, output_mode="native")
    out = await agent2.run("go", output_type=Ticket | Refusal)  # type: ignore[arg-type]
    assert out.output == Ticket(title="a", priority=5)
    model.assert_complete()
    native.assert_complete()


@pytest.mark.parametrize(
    ("output_type", "args", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Movie, {"title": "M", "year": 1999}, {"title": "M", "year": 1999}),
        (list[int], {"response": [1, 2]}, [1, 2]),
        (int, {"response": 7}, 7),
    ],
)
async def test_dataclass_typeddict_list_and_scalar(
    output_type: object, args: dict[str, object], expected: object
) -> None:
    model = ScriptedModel([ToolCall("c1", "final_result", args)])
    agent = Agent(model, output_type=output_type)  # type: ignore[arg-type]
    assert (await agent.run("go")).output == expected
    model.assert_complete()


def test_nested_model_with_refs_and_optionals_is_strict_compatible() -> None:
    spec: OutputSpec[Person] = OutputSpec(Person)
    schema = spec.schema
    assert schema["$defs"]["Address"]["additionalProperties"] is False
    assert schema["$defs"]["Address"]["required"] == ["city", "zip"]
    assert schema["required"] == ["name", "home", "work", "tags"]
    assert {"type": "null"} in schema["properties"]["tags"]["anyOf"]
    assert "default" not in json.dumps(schema)
    # the model sends null for what was optional: the defaults apply
    person = spec.validate_json(
        '{"name": "A", "home": {"city": "B", "zip": null}, "work": null, "tags": null}'
    )
    assert person == Person(name="A", home=Address(city="B"))


async def test_output_validator_rejects_with_a_reason_the_model_reads() -> None:
    model = ScriptedModel(
        [
            ToolCall("c1", "final_result", {"title": "TODO", "priority": 1}),
            ToolCall("c2", "final_result", {"title": "Real", "priority": 1}),
        ]
    )
    agent = Agent(model, output_type=Ticket)

    @agent.output_validator
    async def no_placeholders(ticket: Ticket) -> Ticket:
        if ticket.title == "TODO":
            raise OutputRetry("The title is a placeholder; write the real one.")
        return ticket

    result = await agent.run("go")
    assert result.output.title == "Real"
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage) and "placeholder" in str(answer.result.data)
    model.assert_complete()


async def test_final_result_offered_with_three_other_tools() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return f"found {query}"

    @tool
    def lookup(key: str) -> str:
        """Look up."""
        return key.upper()

    @tool
    def count(text: str) -> int:
        """Count."""
        return len(text)

    model = ScriptedModel(
        [
            [ToolCall("a", "search", {"query": "q"}), ToolCall("b", "lookup", {"key": "k"})],
            [
                ToolCall("c", "count", {"text": "abc"}),
                ToolCall("d", "final_result", {"title": "T", "priority": 2}),
            ],
        ]
    )
    agent = Agent(model, tools=[search, lookup, count], output_type=Ticket)
    result = await agent.run("go", thread_id="t")
    assert result.output == Ticket(title="T", priority=2)
    names = sorted(t.name for t in model.requests[0].tools)
    assert names == ["count", "final_result", "lookup", "search"]
    messages = (await agent.store.load("t")).messages
    assert _pairs_intact(messages)
    results = {m.result.tool_call_id: m.result.data for m in messages if isinstance(m, ToolMessage)}
    assert results["c"] == 3 and results["d"] == "Final result accepted."
    model.assert_complete()


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_stream_yields_partial_objects_then_the_typed_output(mode: str) -> None:
    answer: dict[str, str | int] = {"title": "A long streamed title", "priority": 2}
    entry: ModelResponse | ToolCall = (
        ModelResponse(content=json.dumps(answer))
        if mode == "native"
        else ToolCall("c1", "final_result", answer)
    )
    model = ScriptedModel([entry])
    agent = Agent(model, output_type=Ticket, output_mode=mode)  # type: ignore[arg-type]
    stream = agent.stream("go")
    partials = [e.partial async for e in stream if isinstance(e, OutputDeltaReceived)]
    assert stream.result is not None and stream.result.output == Ticket.model_validate(answer)
    assert partials and partials[-1] == answer
    assert any(p != answer for p in partials)  # something arrived before the whole object
    model.assert_complete()


def test_bad_configuration_is_a_typed_error() -> None:
    model = ScriptedModel([])

    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigurationError, match="final_result"):
        Agent(model, tools=[final_result], output_type=Ticket)
    with pytest.raises(ConfigurationError, match="output_retries"):
        Agent(model, output_type=Ticket, output_retries=-1)

    class Opaque:
        pass

    with pytest.raises(ConfigurationError, match="structured output"):
        Agent(model, output_type=Opaque)


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_the_stored_answer_is_revalidated_on_load(mode: str) -> None:
    answer = {"title": "Kept", "priority": 3}
    entries: list[str | ToolCall] = (
        ['{"title": "x", "priority": 0}', json.dumps(answer)]
        if mode == "native"
        else [
            ToolCall("c1", "final_result", {"title": "x", "priority": 0}),
            ToolCall("c2", "final_result", answer),
        ]
    )
    model = ScriptedModel(entries)
    agent = Agent(model, output_type=Ticket, output_mode=mode)  # type: ignore[arg-type]
    result = await agent.run("go", thread_id="t")
    assert await agent.stored_output("t") == result.output == Ticket(title="Kept", priority=3)
    with pytest.raises(ValueError, match="kind"):
        await agent.stored_output("t", output_type=Refusal)
    with pytest.raises(LookupError):
        await agent.stored_output("empty")
    model.assert_complete()


async def test_final_result_is_never_evicted() -> None:
    from plait.backends import MemoryBackend
    from plait.context import ResultEvictionMiddleware

    model = ScriptedModel([ToolCall("c1", "final_result", {"title": "T" * 400, "priority": 1})])
    eviction = ResultEvictionMiddleware(1, backend=MemoryBackend())
    agent = Agent(model, output_type=Ticket, middleware=[eviction])
    result = await agent.run("go", thread_id="t")
    assert result.output.priority == 1
    stored = [m for m in (await agent.store.load("t")).messages if isinstance(m, ToolMessage)]
    assert stored[0].result.data == "Final result accepted."
    model.assert_complete()


async def test_a_retry_survives_summarization_with_its_pair_intact() -> None:
    from plait.context import SummarizationMiddleware

    history: list[Message] = [UserMessage("x" * 400), AssistantMessage("y" * 400)] * 3
    model = ScriptedModel(
        [
            ToolCall("c1", "final_result", {"title": "x", "priority": 0}),
            ToolCall("c2", "final_result", {"title": "ok", "priority": 1}),
        ]
    )
    summarize = SummarizationMiddleware(200, keep_messages=2, trigger_ratio=0.5)
    agent = Agent(model, output_type=Ticket, middleware=[summarize])
    await agent.store.append("t", history, expected_version=0)
    result = await agent.run("go", thread_id="t")
    assert result.output.title == "ok"
    assert len(model.requests[0].messages) < len(history) + 1  # the older turns were folded
    second = list(model.requests[1].messages)
    # the rejected final_result call and its error result reached the model together
    calls = [m for m in second if isinstance(m, AssistantMessage) and m.tool_calls]
    assert calls and calls[-1].tool_calls[0].id == "c1"
    assert isinstance(second[-1], ToolMessage) and second[-1].result.tool_call_id == "c1"
    assert _pairs_intact([m for m in second if not isinstance(m, SystemMessage)])
    model.assert_complete()
