"""GenAITelemetry with content capture, metrics, and the batteries: summarization (a model
summarizer's call nests under the turn), overflow recovery, eviction and skills."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.metrics.export import Histogram
from opentelemetry.sdk.trace import ReadableSpan
from otel_memory import Otel

from plait import (
    Agent,
    ContextOverflowError,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    Usage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    ModelSummarizer,
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.skills import MemorySource, SkillsMiddleware
from plait.telemetry.semconv import DURATION_BUCKETS, TOKEN_BUCKETS


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def dump() -> str:
    """A big result."""
    return "line of log output\n" * 2_000


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


def roles(span: ReadableSpan) -> list[str]:
    return [m["role"] for m in json.loads(str(attrs(span)["gen_ai.input.messages"]))]


async def test_content_is_off_by_default(otel: Otel) -> None:
    model = ScriptedModel([ToolCall("c1", "lookup", {"key": "k"}), "done"])
    agent = Agent(model, tools=[lookup], system_prompt="Be brief.", middleware=[otel.telemetry()])
    await agent.run("secret question")
    for span in otel.spans():
        for key, value in attrs(span).items():
            assert "secret" not in str(value), key
            assert key not in ("gen_ai.input.messages", "gen_ai.tool.call.arguments")


async def test_content_records_only_what_is_new_since_the_previous_call(otel: Otel) -> None:
    model = ScriptedModel(["first answer", ToolCall("c1", "lookup", {"key": "k"}), "done"])
    telemetry = otel.telemetry(capture_content=True)
    agent = Agent(model, tools=[lookup], system_prompt="Be brief.", middleware=[telemetry])
    await agent.run("one", thread_id="t")
    otel.exporter.clear()
    await agent.run("two", thread_id="t")  # history of turn one is not re-recorded
    first, second = otel.named("chat ")
    assert roles(first) == ["user"]
    assert "two" in str(attrs(first)["gen_ai.input.messages"])
    assert attrs(first)["plait.request.messages"] == 3
    assert json.loads(str(attrs(first)["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "Be brief."}
    ]
    assert roles(second) == ["assistant", "tool"]
    assert "gen_ai.system_instructions" not in attrs(second)  # unchanged since the first call
    output = json.loads(str(attrs(first)["gen_ai.output.messages"]))
    assert output[0]["parts"][0] == {
        "type": "tool_call",
        "id": "c1",
        "name": "lookup",
        "arguments": '{"key":"k"}',
    }
    tool_span = otel.one("execute_tool")
    assert attrs(tool_span)["gen_ai.tool.call.arguments"] == '{"key":"k"}'
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "value of k"


async def test_metrics_use_the_spec_names_units_and_buckets(otel: Otel) -> None:
    model = ScriptedModel(
        [ModelResponse(content="hi", usage=Usage(input_tokens=50, output_tokens=7))]
    )
    await Agent(model, middleware=[otel.telemetry()]).run("hello")
    data = otel.reader.get_metrics_data()
    assert data is not None
    found = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    tokens = found["gen_ai.client.token.usage"]
    duration = found["gen_ai.client.operation.duration"]
    assert (tokens.unit, duration.unit) == ("{token}", "s")
    assert isinstance(tokens.data, Histogram) and isinstance(duration.data, Histogram)
    by_type = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in tokens.data.data_points}
    assert (by_type["input"].sum, by_type["output"].sum) == (50, 7)
    assert tuple(by_type["input"].explicit_bounds) == tuple(float(b) for b in TOKEN_BUCKETS)
    [point] = duration.data.data_points
    assert tuple(point.explicit_bounds) == DURATION_BUCKETS
    assert point.count == 1
    assert dict(point.attributes or {})["gen_ai.operation.name"] == "chat"
    assert dict(point.attributes or {})["gen_ai.provider.name"] == "plait"


async def test_a_model_summarizers_call_nests_under_the_turn(otel: Otel) -> None:
    telemetry = otel.telemetry()
    summarizer = ModelSummarizer(telemetry.instrument(ScriptedModel(["the summary"])))
    summarization = SummarizationMiddleware(200, keep_messages=2, summarizer=summarizer)
    model = FunctionModel(lambda request: "ok")
    agent = Agent(model, middleware=[telemetry, summarization])
    for n in range(4):
        await agent.run(f"message number {n} " * 30, thread_id="t")
    root_ids = {s.context.span_id: s for s in otel.named("invoke_agent")}
    summary_calls = [
        s for s in otel.named("chat ") if attrs(s).get("gen_ai.request.model") != "function"
    ]
    assert summary_calls, [s.name for s in otel.spans()]
    for span in summary_calls:
        assert span.parent is not None and span.parent.span_id in root_ids
    events = [e.name for s in root_ids.values() for e in s.events]
    assert "plait.history_summarized" in events


async def test_overflow_recovery_is_an_event_on_the_chat_span_it_retried(otel: Otel) -> None:
    calls: list[int] = []

    def windowed(request: ModelRequest) -> str:
        calls.append(len(request.messages))
        if len(calls) == 2:
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        return "done" if len(calls) > 2 else ""

    script = iter([ToolCall("c1", "dump", {})])

    def answer(request: ModelRequest) -> ModelResponse | str | ToolCall:
        windowed(request)
        return next(script, "done")

    recovery = OverflowRecoveryMiddleware(backend=MemoryBackend(), max_input_tokens=2_000)
    agent = Agent(FunctionModel(answer), tools=[dump], middleware=[otel.telemetry(), recovery])
    assert (await agent.run("read the log")).output == "done"
    chats = otel.named("chat ")
    assert len(chats) == 2  # the retry is inside the one logical call
    [event] = [e for e in chats[1].events if e.name == "plait.context_overflow_recovered"]
    assert event.attributes is not None and event.attributes["plait.evicted"] == 1


async def test_eviction_is_an_event_naming_the_tool_call(otel: Otel) -> None:
    eviction = ResultEvictionMiddleware(200, backend=MemoryBackend())
    model = ScriptedModel([ToolCall("c9", "dump", {}), "done"])
    agent = Agent(model, tools=[dump], middleware=[otel.telemetry(), eviction])
    await agent.run("go")
    events = {e.name: dict(e.attributes or {}) for s in otel.spans() for e in s.events}
    evicted = events["plait.result_evicted"]
    assert evicted["plait.call_id"] == "c9" and evicted["plait.tool"] == "dump"
    assert isinstance(evicted["plait.estimated_tokens"], int)


async def test_skill_disclosure_shows_as_events_on_the_turn(otel: Otel) -> None:
    body = "---\nname: greet\ndescription: Greets.\n---\nSay hello.\n"
    skills = SkillsMiddleware(sources=[MemorySource({"greet": {"SKILL.md": body}})])
    model = ScriptedModel(
        [ToolCall("r1", "read_file", {"path": "/skills/greet/SKILL.md"}), "hello"]
    )
    agent = Agent(model, middleware=[otel.telemetry(), skills])
    await agent.run("greet me")
    root = otel.one("invoke_agent")
    names = [e.name for e in root.events]
    assert "plait.skill_catalog_loaded" in names
    catalog = next(e for e in root.events if e.name == "plait.skill_catalog_loaded")
    assert catalog.attributes is not None and catalog.attributes["plait.skills"] == 1
    read = otel.one("execute_tool read_file")
    assert read.parent is not None and read.parent.span_id == root.context.span_id


async def test_an_instrumented_model_streams_live_inside_its_chat_span(otel: Otel) -> None:
    telemetry = otel.telemetry()
    model = telemetry.instrument(
        ScriptedModel(
            [ModelResponse(content="one two three", usage=Usage(output_tokens=3)), "again"]
        )
    )
    request = ModelRequest(messages=[])
    seen_open: list[bool] = []
    async for event in model.stream(request):
        seen_open.append(otel.spans() == [])  # the span is still open while events arrive
        last = event
    assert all(seen_open) and len(seen_open) > 2
    span = otel.one("chat scripted")
    assert attrs(span)["gen_ai.usage.output_tokens"] == 3
    assert attrs(span)["gen_ai.request.stream"] is True
    assert isinstance(attrs(span)["gen_ai.response.time_to_first_chunk"], float)
    assert span.parent is None
    assert last.type == "response_complete"
    await model.generate(request)
    generated = otel.named("chat scripted")[-1]
    assert attrs(generated)["gen_ai.request.stream"] is False
    assert "gen_ai.response.time_to_first_chunk" not in attrs(generated)


async def test_an_instrumented_models_failure_marks_its_span(otel: Otel) -> None:
    def fail(request: ModelRequest) -> str:
        raise ContextOverflowError("too long", provider="fake", status=400)

    model = otel.telemetry().instrument(FunctionModel(fail))
    with pytest.raises(ContextOverflowError):
        await model.generate(ModelRequest(messages=[]))
    assert attrs(otel.one("chat function"))["error.type"] == "ContextOverflowError"


async def test_the_summarizer_call_an_overflow_causes_nests_under_that_chat(otel: Otel) -> None:
    telemetry = otel.telemetry()
    summarizer = ModelSummarizer(telemetry.instrument(ScriptedModel(["the summary"])))
    summarization = SummarizationMiddleware(100_000, keep_messages=2, summarizer=summarizer)
    recovery = OverflowRecoveryMiddleware(summarization=summarization, max_input_tokens=100_000)
    overflow_on = {4}
    calls: list[int] = []

    def answer(request: ModelRequest) -> str:
        calls.append(len(request.messages))
        if len(calls) in overflow_on:
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        return "ok"

    agent = Agent(FunctionModel(answer), middleware=[telemetry, recovery, summarization])
    for n in range(4):
        await agent.run(f"question {n} " * 20, thread_id="t")
    overflowed = otel.named("chat function")[3]
    [summary_call] = otel.named("chat scripted")
    assert summary_call.parent is not None
    assert summary_call.parent.span_id == overflowed.context.span_id
    assert "plait.context_overflow_recovered" in [e.name for e in overflowed.events]


async def test_content_capture_works_the_same_when_streaming(otel: Otel) -> None:
    model = ScriptedModel([ToolCall("c1", "lookup", {"key": "k"}), "all done"])
    agent = Agent(model, tools=[lookup], middleware=[otel.telemetry(capture_content=True)])
    async for _ in agent.stream("stream please"):
        pass
    first, second = otel.named("chat ")
    assert roles(first) == ["user"] and roles(second) == ["assistant", "tool"]
    output = json.loads(str(attrs(second)["gen_ai.output.messages"]))
    assert output == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "all done"}],
            "finish_reason": "stop",
        }
    ]


@pytest.mark.parametrize("mode", ["native", "tool"])
async def test_a_structured_output_is_json_on_the_chat_span(otel: Otel, mode: str) -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool

    entry = '{"ok": true}' if mode == "native" else ToolCall("c1", "final_result", {"ok": True})
    model = ScriptedModel([entry])
    agent = Agent(model, output_type=Verdict, output_mode=mode, middleware=[otel.telemetry()])  # type: ignore[arg-type]
    assert (await agent.run("judge")).output == Verdict(ok=True)
    chats = [s for s in otel.spans() if s.name.startswith("chat")]
    assert chats and all(attrs(c)["gen_ai.output.type"] == "json" for c in chats)
    model.assert_complete()


async def test_a_text_answer_sets_no_output_type(otel: Otel) -> None:
    agent = Agent(ScriptedModel(["hi"]), middleware=[otel.telemetry()])
    await agent.run("x")
    chats = [s for s in otel.spans() if s.name.startswith("chat")]
    assert chats and all("gen_ai.output.type" not in attrs(c) for c in chats)
