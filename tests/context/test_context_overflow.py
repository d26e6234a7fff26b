"""OverflowRecoveryMiddleware: compact and retry once on ContextOverflowError, then fail
clearly."""

from __future__ import annotations

import pytest

from plait import (
    AssistantMessage,
    ContextOverflowError,
    DispatchContext,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    TurnContext,
    UserMessage,
)
from plait.backends import MemoryBackend
from plait.context import (
    ContextOverflowRecovered,
    ContextOverflowUnrecoverable,
    OverflowRecoveryMiddleware,
    ResultEvicted,
    SummarizationMiddleware,
    TokenAccountant,
    find_orphans,
)
from plait.context.overflow import OVERFLOW_SOURCE
from plait.middleware.context import Event
from plait.tools import ToolRegistry

LIMIT = 3_000


def make_ctx(messages: list[Message], events: list[Event]) -> DispatchContext:
    turn = TurnContext(
        thread_id="t1",
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=messages,
        state={},
        emit=events.append,
    )
    return DispatchContext(turn, 0)


def size(request: ModelRequest) -> int:
    return TokenAccountant().request(request.messages, anchor_from=len(request.messages))


def windowed(limit: int = LIMIT) -> FunctionModel:
    """A model with a context window of ``limit`` estimated tokens."""

    def answer(request: ModelRequest) -> str:
        if size(request) > limit:
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        return "fits"

    return FunctionModel(answer)


def history_with_a_huge_result() -> list[Message]:
    return [
        UserMessage("read the log"),
        AssistantMessage(tool_calls=[ToolCall("c1", "read_log", {})]),
        ToolMessage("c1", "read_log", "log line\n" * 4_000),
        UserMessage("now summarize it"),
    ]


async def test_overflow_is_compacted_and_retried_once() -> None:
    events: list[Event] = []
    history = history_with_a_huge_result()
    ctx = make_ctx(history, events)
    backend = MemoryBackend()
    mw = OverflowRecoveryMiddleware(backend=backend, max_input_tokens=LIMIT)
    model = windowed()
    request = await mw.before_model_call(ModelRequest(list(history)), ctx)
    response = await mw.wrap_model_call(request, ctx, model.generate)
    assert response.content == "fits"
    assert len(model.requests) == 2
    retried = model.requests[1]
    assert size(retried) <= LIMIT and not find_orphans(retried.messages)
    (recovered,) = [e for e in events if isinstance(e, ContextOverflowRecovered)]
    assert recovered.original_tokens > LIMIT >= recovered.compacted_tokens
    assert recovered.evicted == 1
    (evicted,) = [e for e in events if isinstance(e, ResultEvicted)]
    assert await backend.read(evicted.path) == "log line\n" * 4_000
    # The eviction is recorded and re-applied: the next dispatch fits at the first try.
    history.extend([AssistantMessage("done"), UserMessage("thanks")])
    again = await mw.before_model_call(ModelRequest(list(history)), ctx)
    await mw.wrap_model_call(again, ctx, model.generate)
    assert len(model.requests) == 3
    replaced = again.messages[2]
    assert isinstance(replaced, ToolMessage) and replaced.metadata["source"] == OVERFLOW_SOURCE
    assert replaced.id == history[2].id and replaced.data["_evicted"] is True
    assert history[2].data == "log line\n" * 4_000  # type: ignore[union-attr]


async def test_it_fails_with_a_clear_error_after_one_retry() -> None:
    events: list[Event] = []
    history = history_with_a_huge_result()
    ctx = make_ctx(history, events)
    mw = OverflowRecoveryMiddleware(max_input_tokens=LIMIT)
    model = windowed(limit=5)
    with pytest.raises(ContextOverflowUnrecoverable, match="still too long after one") as info:
        await mw.wrap_model_call(ModelRequest(list(history)), ctx, model.generate)
    assert len(model.requests) == 2
    assert isinstance(info.value.__cause__, ContextOverflowError)
    assert info.value.provider == "fake" and info.value.status == 400
    assert isinstance(info.value, ContextOverflowError)


async def test_nothing_to_compact_fails_without_a_second_call() -> None:
    events: list[Event] = []
    history: list[Message] = [UserMessage("x" * 40_000)]
    ctx = make_ctx(history, events)
    model = windowed()
    with pytest.raises(ContextOverflowUnrecoverable, match="nothing left to summarize"):
        await OverflowRecoveryMiddleware().wrap_model_call(
            ModelRequest(list(history)), ctx, model.generate
        )
    assert len(model.requests) == 1


async def test_without_a_backend_results_are_truncated_not_lost_silently() -> None:
    events: list[Event] = []
    history = history_with_a_huge_result()
    ctx = make_ctx(history, events)
    model = windowed()
    mw = OverflowRecoveryMiddleware(max_input_tokens=LIMIT)
    await mw.wrap_model_call(ModelRequest(list(history)), ctx, model.generate)
    result = model.requests[1].messages[2]
    assert isinstance(result, ToolMessage) and result.data["_truncated"] is True
    assert "cut to fit" in result.data["note"]


async def test_a_long_history_is_summarized_through_the_given_middleware() -> None:
    events: list[Event] = []
    history: list[Message] = []
    for i in range(60):
        history += [UserMessage(f"q{i} " + "q" * 300), AssistantMessage(f"a{i} " + "a" * 300)]
    ctx = make_ctx(history, events)
    summarization = SummarizationMiddleware(100_000, keep_messages=4)
    mw = OverflowRecoveryMiddleware(summarization=summarization, max_input_tokens=LIMIT)
    model = windowed()
    request = await summarization.before_model_call(ModelRequest(list(history)), ctx)
    assert request.messages == history  # far below its own threshold
    await mw.wrap_model_call(request, ctx, model.generate)
    retried = model.requests[1]
    assert isinstance(retried.messages[0], SystemMessage)
    assert retried.messages[1:] == history[-4:]
    record = summarization.record(ctx.turn)
    assert record is not None and record.covered == 116
    (recovered,) = [e for e in events if isinstance(e, ContextOverflowRecovered)]
    assert recovered.summarized and recovered.evicted == 0


async def test_the_private_summary_is_reapplied_on_later_requests() -> None:
    events: list[Event] = []
    history: list[Message] = []
    for i in range(60):
        history += [UserMessage(f"q{i} " + "q" * 300), AssistantMessage(f"a{i} " + "a" * 300)]
    ctx = make_ctx(history, events)
    mw = OverflowRecoveryMiddleware(max_input_tokens=LIMIT, keep_messages=4)
    model = windowed()
    await mw.wrap_model_call(ModelRequest(list(history)), ctx, model.generate)
    history.append(UserMessage("next"))
    later = await mw.before_model_call(ModelRequest(list(history)), ctx)
    assert isinstance(later.messages[0], SystemMessage)
    assert later.messages[1:] == history[-5:]


async def test_an_unrecoverable_overflow_from_an_inner_layer_is_not_retried_again() -> None:
    calls = 0

    async def inner(request: ModelRequest) -> object:
        nonlocal calls
        calls += 1
        raise ContextOverflowUnrecoverable("gave up", provider="x")

    events: list[Event] = []
    history = history_with_a_huge_result()
    with pytest.raises(ContextOverflowUnrecoverable, match="gave up"):
        await OverflowRecoveryMiddleware().wrap_model_call(
            ModelRequest(history),
            make_ctx(history, events),
            inner,  # type: ignore[arg-type]
        )
    assert calls == 1


async def test_with_eviction_given_results_land_where_read_evicted_result_reads() -> None:
    from plait.context import ResultEvictionMiddleware

    events: list[Event] = []
    history = history_with_a_huge_result()
    ctx = make_ctx(history, events)
    backend = MemoryBackend()
    eviction = ResultEvictionMiddleware(backend=backend, root="offloaded")
    for tool in eviction.tools():
        ctx.turn.registry.register(tool)
    mw = OverflowRecoveryMiddleware(eviction=eviction, max_input_tokens=LIMIT)
    request = await mw.before_model_call(ModelRequest(list(history)), ctx)
    await mw.wrap_model_call(request, ctx, windowed().generate)
    (evicted,) = [e for e in events if isinstance(e, ResultEvicted)]
    assert evicted.path.startswith("offloaded/t1/")
    reader = ctx.turn.registry.resolve("read_evicted_result")
    from plait.tools import ToolContext

    page = await reader.invoke(
        reader.validate({"path": evicted.path, "offset": 0, "limit": 9}),
        ToolContext(ToolCall("r", "read_evicted_result", {}), ctx.turn, ctx),
    )
    assert "log line" in str(page)
    with pytest.raises(Exception, match="only eviction="):
        OverflowRecoveryMiddleware(eviction=eviction, backend=MemoryBackend())


async def test_a_second_recovery_estimates_the_request_with_its_evicted_results() -> None:
    events: list[Event] = []
    history: list[Message] = [
        UserMessage("read both logs"),
        AssistantMessage(tool_calls=[ToolCall("c1", "read_log", {})]),
        ToolMessage("c1", "read_log", "log line\n" * 4_000),
        AssistantMessage(tool_calls=[ToolCall("c2", "read_log", {})]),
        ToolMessage("c2", "read_log", "short log\n" * 240),
    ]
    turn = TurnContext(
        thread_id="t",
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=history,
        state={},
        emit=events.append,
    )
    ctx = DispatchContext(turn, 0)
    # keep_messages above the history length: recovery can only evict, never summarize.
    mw = OverflowRecoveryMiddleware(
        backend=MemoryBackend(), max_input_tokens=3_000, keep_messages=50
    )
    rejected: list[ModelRequest] = []
    windows = iter([3_000, 10**6, 2_800, 10**6])

    def answer(request: ModelRequest) -> str:
        if size(request) > next(windows):
            rejected.append(request)
            raise ContextOverflowError("prompt is too long", provider="fake", status=400)
        return "fits"

    model = FunctionModel(answer)
    request = await mw.before_model_call(ModelRequest(list(history)), ctx)
    await mw.wrap_model_call(request, ctx, model.generate)
    history += [AssistantMessage("done"), UserMessage("and now this: " + "q" * 9_000)]
    request = await mw.before_model_call(ModelRequest(list(history)), ctx)
    await mw.wrap_model_call(request, ctx, model.generate)

    first, second = [e for e in events if isinstance(e, ContextOverflowRecovered)]
    assert first.original_tokens == size(rejected[0]) > 3_000
    # The huge log is a reference by now; it must not be counted at its old size.
    assert second.original_tokens == size(rejected[1]) < first.original_tokens
    assert second.compacted_tokens < 3_000 and second.evicted == 1


async def test_without_a_read_tool_on_eviction_overflow_names_no_reader_that_refuses() -> None:
    # Before: the summary's read_evicted_result (same backend, its own folder) was in the
    # registry, so results evicted here under the eviction's root (which read_tool=False kept
    # unreadable) told the model to read a path the shared reader refuses.
    from plait.context import ResultEvictionMiddleware

    events: list[Event] = []
    history = history_with_a_huge_result()
    ctx = make_ctx(history, events)
    backend = MemoryBackend()
    summary = SummarizationMiddleware(100_000, backend=backend)
    for tool in summary.tools():
        ctx.turn.registry.register(tool)
    eviction = ResultEvictionMiddleware(backend=backend, root="offloaded", read_tool=False)
    mw = OverflowRecoveryMiddleware(eviction=eviction, max_input_tokens=LIMIT)
    assert mw.tools() == ()
    model = windowed()
    request = await mw.before_model_call(ModelRequest(list(history)), ctx)
    await mw.wrap_model_call(request, ctx, model.generate)
    (evicted,) = [e for e in events if isinstance(e, ResultEvicted)]
    assert evicted.path.startswith("offloaded/t1/")
    assert "read_evicted_result" in ctx.turn.registry
    replaced = model.requests[1].messages[2]
    assert isinstance(replaced, ToolMessage) and replaced.data["_evicted"] is True
    assert "read_evicted_result" not in str(replaced.data)
