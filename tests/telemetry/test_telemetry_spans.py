"""GenAITelemetry: the span tree, names, kinds, attributes, parent links and usage of a turn."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode
from otel_memory import Otel

from plait import (
    Agent,
    FunctionModel,
    ModelRequest,
    ModelResponse,
    ProviderError,
    ScriptedModel,
    ToolCall,
    Usage,
    tool,
)
from plait.errors import ConfigurationError
from plait.telemetry import GenAITelemetry
from plait.telemetry.semconv import capture_content_from_env


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def script() -> ScriptedModel:
    return ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})],
                usage=Usage(input_tokens=100, output_tokens=10, cache_read_tokens=40),
                model="scripted-1",
            ),
            ModelResponse(content="5", usage=Usage(input_tokens=130, output_tokens=2)),
        ]
    )


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


async def test_a_tool_turn_makes_the_invoke_agent_chat_and_execute_tool_tree(otel: Otel) -> None:
    agent = Agent(script(), tools=[add], middleware=[otel.telemetry(agent_name="calc")])
    result = await agent.run("2+3?", thread_id="thread-7")
    assert result.output == "5"
    root = otel.one("invoke_agent")
    chats = otel.named("chat ")
    tool_span = otel.one("execute_tool")
    assert root.name == "invoke_agent calc" and root.kind is SpanKind.INTERNAL
    assert root.parent is None
    assert [c.name for c in chats] == ["chat scripted", "chat scripted"]
    assert all(c.kind is SpanKind.CLIENT and parent_of(c) == root.context.span_id for c in chats)
    assert tool_span.name == "execute_tool add" and tool_span.kind is SpanKind.INTERNAL
    assert parent_of(tool_span) == root.context.span_id
    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "plait",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": "thread-7",
        "gen_ai.request.model": "scripted",
        "plait.usage.input_tokens": 230,
        "plait.usage.output_tokens": 12,
        "plait.usage.cache_read.input_tokens": 40,
        "plait.model_calls": 2,
    }
    first = attrs(chats[0])
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.conversation.id"] == "thread-7"
    assert first["gen_ai.response.model"] == "scripted-1"
    assert first["gen_ai.usage.input_tokens"] == 100
    assert first["gen_ai.usage.cache_read.input_tokens"] == 40
    assert first["gen_ai.response.finish_reasons"] == ("stop",)
    assert "gen_ai.response.model" not in attrs(chats[1])
    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }


async def test_usage_is_counted_once_children_sum_to_the_turn(otel: Otel) -> None:
    agent = Agent(script(), tools=[add], middleware=[otel.telemetry()])
    result = await agent.run("2+3?")
    chats = otel.named("chat ")
    assert sum(attrs(c)["gen_ai.usage.input_tokens"] for c in chats) == 230  # type: ignore[misc]
    assert result.usage.input_tokens == 230
    assert not [k for k in attrs(otel.one("invoke_agent")) if k.startswith("gen_ai.usage")]


async def test_streaming_makes_the_same_tree(otel: Otel) -> None:
    agent = Agent(script(), tools=[add], middleware=[otel.telemetry()])
    events = [event.type async for event in agent.stream("2+3?", thread_id="s")]
    assert events[-1] == "turn_finished"
    root = otel.one("invoke_agent")
    names = sorted(s.name for s in otel.spans() if parent_of(s) == root.context.span_id)
    assert names == ["chat scripted", "chat scripted", "execute_tool add"]
    assert attrs(otel.named("chat ")[0])["gen_ai.usage.output_tokens"] == 10


async def test_a_provider_error_marks_the_chat_and_agent_spans(otel: Otel) -> None:
    def fail(request: ModelRequest) -> str:
        raise ProviderError("upstream 500", provider="fake", status=500)

    agent = Agent(FunctionModel(fail), middleware=[otel.telemetry()])
    with pytest.raises(ProviderError):
        await agent.run("hi")
    chat, root = otel.one("chat "), otel.one("invoke_agent")
    for span in (chat, root):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs(span)["error.type"] == "ProviderError"
    assert [e.name for e in chat.events] == ["exception"]
    assert trace.get_current_span() is trace.INVALID_SPAN  # the turn's span was detached


async def test_a_failing_tool_marks_its_span_and_the_turn_goes_on(otel: Otel) -> None:
    model = ScriptedModel([ToolCall("c1", "broken", {}), "sorry"])
    agent = Agent(model, tools=[broken], middleware=[otel.telemetry()])
    assert (await agent.run("go")).output == "sorry"
    span = otel.one("execute_tool broken")
    assert span.status.status_code is StatusCode.ERROR
    assert attrs(span)["error.type"] == "tool_error"
    assert otel.one("invoke_agent").status.status_code is StatusCode.UNSET


async def test_a_cancelled_turn_ends_its_span_and_restores_the_context(otel: Otel) -> None:
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await asyncio.sleep(60)
        return "never"

    agent = Agent(FunctionModel(slow), middleware=[otel.telemetry()])
    task = asyncio.ensure_future(agent.run("wait"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for name in ("chat ", "invoke_agent"):
        assert attrs(otel.one(name))["error.type"] == "CancelledError"


async def test_a_rejected_call_is_an_event_not_a_tool_span(otel: Otel) -> None:
    model = ScriptedModel([ToolCall("c1", "no_such_tool", {}), "ok"])
    agent = Agent(model, tools=[add], middleware=[otel.telemetry()])
    await agent.run("go")
    assert otel.named("execute_tool") == []
    events = {e.name: dict(e.attributes or {}) for e in otel.one("invoke_agent").events}
    assert events["plait.tool_call_rejected"]["gen_ai.tool.name"] == "no_such_tool"
    assert events["plait.tool_call_skipped"]["plait.skipped_by"] == "rejected"


async def test_telemetry_is_off_without_a_real_provider_or_when_disabled(otel: Otel) -> None:
    assert GenAITelemetry().instruments() is None  # the global providers are the API's proxies
    assert otel.telemetry(enabled=False).instruments() is None
    agent = Agent(script(), tools=[add], middleware=[otel.telemetry(enabled=False)])
    assert (await agent.run("2+3?")).output == "5"
    assert otel.spans() == []


async def test_telemetry_pins_itself_outermost(otel: Otel) -> None:
    from plait.backends import MemoryBackend
    from plait.context import ResultEvictionMiddleware

    eviction = ResultEvictionMiddleware(backend=MemoryBackend())
    agent = Agent(script(), middleware=[eviction, otel.telemetry()])
    order = [line.split(". ", 1)[1] for line in agent.describe().splitlines()]
    assert order[2] == "GenAITelemetry [outermost]: turn_input, wrap_model_call, wrap_tool_call"
    assert [line.split(" ", 1)[0] for line in order] == [
        "RepetitionDetector",
        "ToolCallValidator",
        "GenAITelemetry",
        "ResultEvictionMiddleware:",
    ]
    off = Agent(script(), middleware=[otel.telemetry(enabled=False)])
    assert "GenAITelemetry [outermost]: tools only" in off.describe()


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("", False),
        ("true", True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("NO_CONTENT", False),
        ("EVENT_ONLY", False),
        ("false", False),
    ],
)
def test_the_content_switch_reads_the_standard_variable(value: str, on: bool) -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}
    assert capture_content_from_env(env) is on


def test_an_unknown_content_switch_value_is_a_configuration_error() -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "maybe"}
    with pytest.raises(ConfigurationError, match="SPAN_ONLY"):
        capture_content_from_env(env)


def test_json_content_helpers_clip_but_stay_valid_json() -> None:
    from plait.messages import UserMessage
    from plait.telemetry.content import input_messages

    text = input_messages([UserMessage("x" * 50)], max_chars=10)
    parts = json.loads(text)[0]["parts"]
    assert parts[0]["content"].startswith("x" * 10) and "40 more chars" in parts[0]["content"]


def test_content_capture_records_images_and_files_by_reference_and_reasoning_as_text() -> None:
    from plait.messages import (
        AssistantMessage,
        Blob,
        FilePart,
        ImagePart,
        Message,
        ReasoningPart,
        ToolMessage,
        UserMessage,
    )
    from plait.telemetry.content import input_messages

    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 4096
    image = Blob(png)
    messages: list[Message] = [
        UserMessage([ImagePart(image), FilePart("https://example.com/a.pdf", "application/pdf")]),
        AssistantMessage(
            [ReasoningPart("anthropic", "think", {"type": "thinking", "signature": "SECRETSIG"})]
        ),
        ToolMessage("c1", "shot", "ok", parts=[FilePart(Blob(b"RIFF"), "audio/wav")]),
    ]
    text = input_messages(messages)
    assert image.base64() not in text and "SECRETSIG" not in text
    user, assistant, result = (m["parts"] for m in json.loads(text))
    assert user == [
        {"type": "uri", "modality": "image", "mime_type": "image/png", "uri": image.ref,
         "size": len(png)},
        {"type": "uri", "modality": "document", "mime_type": "application/pdf",
         "uri": "https://example.com/a.pdf"},
    ]  # fmt: skip
    assert assistant == [{"type": "reasoning", "content": "think"}]
    assert result[1]["modality"] == "audio" and result[1]["size"] == 4


def test_the_content_cursor_returns_only_new_messages_and_rescans_after_a_summary() -> None:
    from plait.messages import Message, SystemMessage, UserMessage
    from plait.telemetry.instruments import ContentCursor

    history: list[Message] = [UserMessage(f"m{i}") for i in range(50)]
    note = UserMessage("projected")
    cursor = ContentCursor()
    assert cursor.new_messages([*history, note]) == [*history, note]
    grown: list[Message] = [*history, UserMessage("new one"), note]
    assert [m.text for m in cursor.new_messages(grown)] == ["new one"]
    summary = SystemMessage("summary of m0..m47")
    compacted: list[Message] = [summary, *history[48:], grown[50], note]
    assert cursor.new_messages(compacted) == [summary]


async def test_a_streamed_call_says_so_and_reports_its_time_to_first_chunk(otel: Otel) -> None:
    agent = Agent(script(), tools=[add], middleware=[otel.telemetry()])
    [event async for event in agent.stream("2+3?")]
    chats = otel.named("chat ")
    assert [attrs(c)["gen_ai.request.stream"] for c in chats] == [True, True]
    first_chunks = [attrs(c)["gen_ai.response.time_to_first_chunk"] for c in chats]
    assert all(isinstance(t, float) and t >= 0.0 for t in first_chunks)
    metrics = otel.reader.get_metrics_data()
    assert metrics is not None
    [histogram] = [
        m
        for rm in metrics.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "gen_ai.client.operation.time_to_first_chunk"
    ]
    assert histogram.unit == "s"
    points = histogram.data.data_points
    assert sum(p.count for p in points if isinstance(p, HistogramDataPoint)) == 2


async def test_a_call_that_does_not_stream_says_so_without_a_first_chunk(otel: Otel) -> None:
    await Agent(script(), tools=[add], middleware=[otel.telemetry()]).run("2+3?")
    for chat in otel.named("chat "):
        assert attrs(chat)["gen_ai.request.stream"] is False
        assert "gen_ai.response.time_to_first_chunk" not in attrs(chat)


async def test_reasoning_tokens_are_recorded_when_reported(otel: Otel) -> None:
    usage = Usage(input_tokens=50, output_tokens=40, reasoning_tokens=32, requests=1)
    agent = Agent(
        ScriptedModel([ModelResponse(content="hm", usage=usage)]), middleware=[otel.telemetry()]
    )
    result = await agent.run("think")
    assert result.usage.reasoning_tokens == 32
    chat = attrs(otel.one("chat "))
    assert chat["gen_ai.usage.reasoning.output_tokens"] == 32
    assert chat["gen_ai.usage.output_tokens"] == 40
    assert attrs(otel.one("invoke_agent"))["plait.usage.reasoning.output_tokens"] == 32


async def test_without_a_provider_the_wrappers_leave_the_chain_for_the_turn() -> None:
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.trace import NoOpTracerProvider

    from plait import DispatchContext, Middleware
    from plait.middleware import MiddlewareStack, ModelHandler, TurnContext
    from plait.tools import ToolRegistry

    idle = GenAITelemetry(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    seen: list[frozenset[object]] = []

    class Look(Middleware):
        async def wrap_model_call(
            self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
        ) -> ModelResponse:
            seen.append(ctx.turn.skip_wraps)
            return await call_next(request)

    agent = Agent(script(), tools=[add], middleware=[idle, Look()])
    assert (await agent.run("2+3?")).output == "5"
    assert seen == [frozenset({idle}), frozenset({idle})]

    async def model_handler(request: ModelRequest) -> ModelResponse:
        return ModelResponse(content="direct")

    turn = TurnContext("t", ToolRegistry([]), script(), [], {}, skip_wraps=frozenset({idle}))
    only_idle = MiddlewareStack([idle])
    assert only_idle.wrap_model(model_handler, DispatchContext(turn, 0)) is model_handler
    assert (
        only_idle.wrap_model(
            model_handler, DispatchContext(replace(turn, skip_wraps=frozenset()), 0)
        )
        is not model_handler
    )


def test_without_the_api_installed_the_import_says_which_extra_to_install() -> None:
    import subprocess
    import sys

    program = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None\n"
        "from plait.errors import ConfigurationError\n"
        "try:\n"
        "    import plait.telemetry\n"
        "except ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'plait[otel]'" in done.stdout


SDK_SET_LATER = """
import asyncio
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from plait import Agent, Middleware, ScriptedModel
from plait.telemetry import GenAITelemetry

telemetry = GenAITelemetry()
skipped = []

class Look(Middleware):
    async def wrap_model_call(self, request, ctx, call_next):
        skipped.append(telemetry in ctx.turn.skip_wraps)
        return await call_next(request)

agent = Agent(ScriptedModel(["one", "two"]), middleware=[telemetry, Look()])
asyncio.run(agent.run("before"))
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
asyncio.run(agent.run("after"))
print(skipped, sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_an_sdk_set_after_the_agent_was_built_is_used_from_the_next_turn() -> None:
    import subprocess
    import sys

    # The API lets a process set its global provider once: a process of its own.
    done = subprocess.run(
        [sys.executable, "-c", SDK_SET_LATER],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[True, False] ['chat scripted', 'invoke_agent plait']"


def test_a_content_bound_below_one_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="max_content_chars"):
        GenAITelemetry(max_content_chars=0)
