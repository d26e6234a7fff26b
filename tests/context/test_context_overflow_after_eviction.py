"""Review regression for overflow recovery: its estimates after an earlier recovery must count
the evicted results as they are now (the references), not as they were."""

from __future__ import annotations

from plait import (
    AssistantMessage,
    ContextOverflowError,
    DispatchContext,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    TurnContext,
    UserMessage,
)
from plait.backends import MemoryBackend
from plait.context import ContextOverflowRecovered, OverflowRecoveryMiddleware, TokenAccountant
from plait.middleware.context import Event
from plait.tools import ToolRegistry


def size(request: ModelRequest) -> int:
    return TokenAccountant().request(request.messages, anchor_from=len(request.messages))


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
