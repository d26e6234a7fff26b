"""Seed 003, "ResultEvictionMiddleware", "SummarizationMiddleware" and "The backend seam": one
test per documented sentence, named after it.

Token figures are computed with a fresh TokenAccountant, the same estimator the middlewares use
(CHARS_PER_TOKEN = 4 plus a small per-message overhead), so threshold edges are exact.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from plait import (
    AssistantMessage,
    DispatchContext,
    Message,
    Middleware,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolResult,
    TurnContext,
    UserMessage,
)
from plait.backends import MemoryBackend
from plait.context import (
    CHARS_PER_TOKEN,
    HistoryOffloadFailed,
    HistorySummarized,
    ResultEvicted,
    ResultEvictionMiddleware,
    SummarizationInfo,
    SummarizationMiddleware,
    TokenAccountant,
    find_orphans,
)
from plait.middleware.context import Event
from plait.tools import ToolRegistry

# --- helpers -----------------------------------------------------------------------------------


def make_ctx(
    messages: list[Message] | None = None, events: list[Event] | None = None
) -> DispatchContext:
    turn = TurnContext(
        thread_id="t1",
        registry=ToolRegistry(),
        model=ScriptedModel([]),
        messages=[] if messages is None else messages,
        state={},
        emit=events.append if events is not None else (lambda e: None),
    )
    return DispatchContext(turn, 0)


async def after_tool(
    mw: ResultEvictionMiddleware,
    data: Any,
    *,
    tool: str = "fetch",
    events: list[Event] | None = None,
) -> Any:
    call = ToolCall("call_1", tool, {})
    result = await mw.after_tool_call(call, ToolResult("call_1", data), make_ctx(events=events))
    return result.data


class WriteOnlyBackend:
    """Exactly the seed's BackendWriteSurface: one async write(path, content)."""

    def __init__(self) -> None:
        self.writes: dict[str, str] = {}

    async def write(self, path: str, content: str) -> object:
        self.writes[path] = content
        return None


def conversation(pairs: int) -> list[Message]:
    out: list[Message] = []
    for i in range(pairs):
        out += [
            UserMessage(f"question {i}: " + "q" * 120),
            AssistantMessage(f"answer {i}: " + "a" * 120),
        ]
    return out


def estimate(messages: Sequence[Message]) -> int:
    return TokenAccountant().request(messages)


async def before_model(
    mw: SummarizationMiddleware, history: list[Message], events: list[Event] | None = None
) -> ModelRequest:
    return await mw.before_model_call(ModelRequest(list(history)), make_ctx(history, events))


# --- ResultEvictionMiddleware -------------------------------------------------------------------


async def test_result_eviction_moves_an_oversized_result_out_and_leaves_a_compact_reference() -> (
    None
):
    backend = MemoryBackend()
    blob = "row\n" * 20_000
    data = await after_tool(ResultEvictionMiddleware(backend=backend), blob)
    assert isinstance(data, dict) and data["_evicted"] is True
    assert len(json.dumps(data)) < len(blob) // 20


def test_result_eviction_default_max_tokens_is_2000() -> None:
    assert ResultEvictionMiddleware(backend=MemoryBackend()).max_tokens == 2000


async def test_result_eviction_when_the_estimate_exceeds_max_tokens_it_is_evicted() -> None:
    mw = ResultEvictionMiddleware(100, backend=MemoryBackend())
    at_limit = "x" * (100 * CHARS_PER_TOKEN)
    assert await after_tool(mw, at_limit) == at_limit  # exactly max_tokens: not exceeded
    assert (await after_tool(mw, at_limit + "x"))["_evicted"] is True  # one char more: 101


async def test_result_eviction_estimates_the_serialized_result() -> None:
    mw = ResultEvictionMiddleware(100, backend=MemoryBackend())
    structured = {"rows": ["y" * 50] * 10}  # small as a Python object, ~530 chars serialized
    data = await after_tool(mw, structured)
    assert data["_evicted"] is True
    serialized = json.dumps(structured, separators=(",", ":"))
    assert data["estimated_tokens"] == math.ceil(len(serialized) / CHARS_PER_TOKEN)


async def test_result_eviction_writes_the_full_result_through_the_backend() -> None:
    backend = WriteOnlyBackend()
    blob = "".join(f"line {i}\n" for i in range(5_000))
    data = await after_tool(ResultEvictionMiddleware(backend=backend), blob)
    assert backend.writes == {data["full_result_path"]: blob}


async def test_result_eviction_replaces_the_payload_with_the_seed_reference_object() -> None:
    data = await after_tool(ResultEvictionMiddleware(10, backend=MemoryBackend()), "z" * 1000)
    assert set(data) == {"_evicted", "preview", "full_result_path", "estimated_tokens", "note"}
    assert data["_evicted"] is True and data["estimated_tokens"] == 250
    assert isinstance(data["preview"], str) and data["full_result_path"] in data["note"]


async def test_result_eviction_reference_carries_a_head_and_tail_preview() -> None:
    blob = "\n".join(f"line {i}" for i in range(1, 1001))
    data = await after_tool(ResultEvictionMiddleware(10, backend=MemoryBackend()), blob)
    lines = data["preview"].splitlines()
    assert lines[:5] == [f"line {i}" for i in range(1, 6)]
    middle = "".join(f"line {i}\n" for i in range(6, 996))
    assert lines[5] == f"... [{len(middle)} characters omitted] ..."
    assert lines[6:] == [f"line {i}" for i in range(996, 1001)]


async def test_result_eviction_reference_carries_the_path_to_retrieve_the_whole_thing() -> None:
    backend = MemoryBackend()
    blob = json.dumps({"items": list(range(5_000))})
    data = await after_tool(
        ResultEvictionMiddleware(100, backend=backend), {"items": list(range(5_000))}
    )
    assert json.loads(await backend.read(data["full_result_path"])) == json.loads(blob)


async def test_result_eviction_excluded_tools_are_never_evicted() -> None:
    mw = ResultEvictionMiddleware(10, backend=MemoryBackend(), excluded_tools=["read_file"])
    blob = "x" * 100_000
    assert await after_tool(mw, blob, tool="read_file") == blob
    assert (await after_tool(mw, blob, tool="grep"))["_evicted"] is True


@pytest.mark.parametrize(
    "upstream",
    [
        {"_evicted": True, "preview": "p" * 5000, "full_result_path": "elsewhere/1", "note": "n"},
        {"full_result_path": "s3://bucket/key", "preview": "p" * 5000},
    ],
)
async def test_result_eviction_a_result_already_offloaded_upstream_is_left_alone(
    upstream: dict[str, Any],
) -> None:
    backend = WriteOnlyBackend()
    events: list[Event] = []
    data = await after_tool(ResultEvictionMiddleware(10, backend=backend), upstream, events=events)
    assert data is upstream and backend.writes == {} and events == []


def test_result_eviction_runs_on_after_tool_call() -> None:
    mw = ResultEvictionMiddleware(backend=MemoryBackend())
    hooks = [
        h
        for h in ("before_model_call", "after_model_call", "before_tool_call", "after_tool_call")
        if mw.overrides(h)
    ]
    assert hooks == ["after_tool_call"]


async def test_result_eviction_emits_an_event_per_eviction() -> None:
    events: list[Event] = []
    data = await after_tool(
        ResultEvictionMiddleware(10, backend=MemoryBackend()), "e" * 400, events=events
    )
    (event,) = events
    assert isinstance(event, ResultEvicted)
    assert (event.path, event.estimated_tokens, event.chars) == (data["full_result_path"], 100, 400)


# --- SummarizationMiddleware --------------------------------------------------------------------


async def test_summarization_compresses_older_turns_before_the_request_exceeds_the_budget() -> None:
    history = conversation(20)
    budget = estimate(history)  # the request is exactly at the budget: 85% was crossed earlier
    request = await before_model(SummarizationMiddleware(budget), history)
    assert estimate(request.messages) < 0.85 * budget
    assert len(request.messages) < len(history)


def test_summarization_defaults_keep_6_messages_and_trigger_ratio_0_85() -> None:
    mw = SummarizationMiddleware(1000)
    assert (mw.keep_messages, mw.trigger_ratio, mw.backend, mw.thread_id, mw.on_summarized) == (
        6,
        0.85,
        None,
        None,
        None,
    )
    assert mw.threshold == 850


def test_summarization_runs_on_before_model_call() -> None:
    mw = SummarizationMiddleware(1000)
    hooks = [
        h
        for h in ("before_model_call", "after_model_call", "before_tool_call", "after_tool_call")
        if mw.overrides(h)
    ]
    assert hooks == ["before_model_call"]


async def test_summarization_triggers_when_tokens_cross_max_input_tokens_times_ratio() -> None:
    history = conversation(10)
    tokens = estimate(history)
    at = math.floor(tokens / 0.85)  # threshold = 0.85 * at <= tokens: crossed
    below = at + 1  # threshold = 0.85 * (at + 1) > tokens: not yet
    untouched = await before_model(SummarizationMiddleware(below), history)
    assert untouched.messages == history
    summarized = await before_model(SummarizationMiddleware(at), history)
    assert isinstance(summarized.messages[0], SystemMessage)


@pytest.mark.parametrize("ratio", [0.5, 1.0])
async def test_summarization_trigger_ratio_sets_the_fraction_of_the_budget(ratio: float) -> None:
    history = conversation(10)
    tokens = estimate(history)
    budget = math.floor(tokens / ratio)
    fired = await before_model(SummarizationMiddleware(budget, trigger_ratio=ratio), history)
    held = await before_model(SummarizationMiddleware(budget + 2, trigger_ratio=ratio), history)
    assert isinstance(fired.messages[0], SystemMessage)
    assert held.messages == history


@pytest.mark.parametrize("keep", [1, 3, 6, 9])
async def test_summarization_keeps_the_most_recent_keep_messages_verbatim(keep: int) -> None:
    history = conversation(10)
    request = await before_model(SummarizationMiddleware(100, keep_messages=keep), history)
    assert request.messages[1:] == history[-keep:]
    assert all(a is b for a, b in zip(request.messages[1:], history[-keep:], strict=True))


async def test_summarization_keeps_a_tool_call_with_its_result_when_keeping_turns() -> None:
    history: list[Message] = [
        *conversation(5),
        AssistantMessage(tool_calls=[ToolCall("a", "t", {}), ToolCall("b", "t", {})]),
        ToolMessage("a", "t", "ra"),
        ToolMessage("b", "t", "rb"),
        AssistantMessage("done"),
    ]
    request = await before_model(SummarizationMiddleware(100, keep_messages=2), history)
    assert request.messages[1:] == history[-4:]  # moved back to the calling message
    assert not find_orphans(request.messages)


async def test_summarization_replaces_the_older_ones_with_a_single_extractive_summary() -> None:
    history = conversation(10)
    model = ScriptedModel([])
    ctx = make_ctx(history)
    ctx.turn.model = model
    first = await SummarizationMiddleware(100).before_model_call(ModelRequest(list(history)), ctx)
    second = await SummarizationMiddleware(100).before_model_call(
        ModelRequest(list(history)), make_ctx(list(history))
    )
    summaries = [m for m in first.messages if isinstance(m, SystemMessage)]
    assert len(summaries) == 1 and len(first.messages) == 1 + 6
    assert "question 0" in summaries[0].text  # extracted from the messages themselves
    assert first.messages[0].text == second.messages[0].text
    assert model.requests == []  # extractive: no model call


async def test_summarization_summary_is_carried_as_a_system_message_at_the_start() -> None:
    history = conversation(10)
    request = await before_model(SummarizationMiddleware(100), history)
    summary = request.messages[0]
    assert isinstance(summary, SystemMessage)
    assert summary.metadata["source"] == "plait.context.summary"
    assert all(not isinstance(m, SystemMessage) for m in request.messages[1:])


async def test_summarization_with_a_backend_offloads_the_full_history_through_it() -> None:
    backend = WriteOnlyBackend()
    history = conversation(10)
    mw = SummarizationMiddleware(100, backend=backend, thread_id="thread-9")
    await before_model(mw, history)
    await mw.drain()
    ((path, content),) = backend.writes.items()
    assert path == "conversation_history/thread-9/00000000-00000014.json"
    assert [m["id"] for m in json.loads(content)] == [m.id for m in history[:14]]


async def test_summarization_offload_is_best_effort_so_failures_never_break_the_turn() -> None:
    class Failing:
        async def write(self, path: str, content: str) -> object:
            raise ConnectionError("store unreachable")

    events: list[Event] = []
    mw = SummarizationMiddleware(100, backend=Failing())
    request = await before_model(mw, conversation(10), events)
    await mw.drain()
    assert isinstance(request.messages[0], SystemMessage)
    (failed,) = [e for e in events if isinstance(e, HistoryOffloadFailed)]
    assert isinstance(failed.error, ConnectionError)


async def test_summarization_offload_never_blocks_the_turn() -> None:
    class Hanging:
        async def write(self, path: str, content: str) -> object:
            await asyncio.Event().wait()
            return None

    mw = SummarizationMiddleware(100, backend=Hanging())
    request = await asyncio.wait_for(before_model(mw, conversation(10)), timeout=1)
    assert isinstance(request.messages[0], SystemMessage)
    for task in list(mw._tasks):
        task.cancel()


async def test_summarization_on_summarized_fires_with_before_and_after_token_counts() -> None:
    infos: list[SummarizationInfo] = []
    history = conversation(10)
    mw = SummarizationMiddleware(100, keep_messages=4, on_summarized=infos.append)
    request = await before_model(mw, history)
    (info,) = infos
    assert info.original_tokens == estimate(history)
    assert info.summarized_tokens == estimate(request.messages)
    assert info.messages_removed == 16
    assert info.summarized_tokens < info.original_tokens


async def test_summarization_on_summarized_fires_only_when_a_pass_runs() -> None:
    infos: list[SummarizationInfo] = []
    history = conversation(3)
    await before_model(SummarizationMiddleware(100_000, on_summarized=infos.append), history)
    assert infos == []


async def test_summarization_on_summarized_may_be_a_coroutine_function() -> None:
    infos: list[SummarizationInfo] = []

    async def record(info: SummarizationInfo) -> None:
        infos.append(info)

    await before_model(SummarizationMiddleware(100, on_summarized=record), conversation(10))
    assert len(infos) == 1


async def test_summarization_emits_an_event_with_the_same_figures() -> None:
    infos: list[SummarizationInfo] = []
    events: list[Event] = []
    mw = SummarizationMiddleware(100, on_summarized=infos.append)
    await before_model(mw, conversation(10), events)
    (event,) = [e for e in events if isinstance(e, HistorySummarized)]
    (info,) = infos
    assert (event.original_tokens, event.summarized_tokens, event.messages_removed) == (
        info.original_tokens,
        info.summarized_tokens,
        info.messages_removed,
    )


# --- The backend seam ---------------------------------------------------------------------------


async def test_backend_seam_both_middlewares_write_through_the_same_minimal_interface() -> None:
    backend = WriteOnlyBackend()
    evict = ResultEvictionMiddleware(10, backend=backend)
    summarize = SummarizationMiddleware(100, backend=backend)
    assert isinstance(evict, Middleware) and isinstance(summarize, Middleware)
    await evict.after_tool_call(ToolCall("c", "t", {}), ToolResult("c", "x" * 400), make_ctx())
    await before_model(summarize, conversation(10))
    await summarize.drain()
    assert sorted(p.split("/")[0] for p in backend.writes) == [
        "conversation_history",
        "large_tool_results",
    ]


def test_backend_seam_token_counts_use_chars_per_token_4_and_no_tokenizer() -> None:
    assert CHARS_PER_TOKEN == 4
    assert "tiktoken" not in sys.modules
