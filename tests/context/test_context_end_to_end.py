"""The context battery through ``Agent.run``: what the model was sent, what the thread store
kept, and the events a caller sees."""

from __future__ import annotations

import pytest

from plait import (
    Agent,
    ContextOverflowError,
    FunctionModel,
    ModelRequest,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    ContextOverflowRecovered,
    ContextOverflowUnrecoverable,
    HistorySummarized,
    OverflowRecoveryMiddleware,
    ResultEvicted,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
    TokenAccountant,
    find_orphans,
)
from plait.context.offload import READ_TOOL_NAME
from plait.context.summarization import STATE_KEY
from plait.models.scripted import ScriptEntry
from plait.stores.memory import MemoryThreadStore

LOGS = "".join(
    f"2026-01-01 12:00:{i % 60:02d} worker-{i % 7} handled request {i}\n" for i in range(800)
)


@tool
def dump_logs() -> str:
    """Return the service logs."""
    return LOGS


async def test_eviction_and_summarization_through_agent_run() -> None:
    store = MemoryThreadStore()
    backend = MemoryBackend()
    summarization = SummarizationMiddleware(900, keep_messages=3, backend=backend)
    script: list[ScriptEntry] = [ToolCall("c1", "dump_logs", {}), "The logs look healthy."]
    script += [f"Answer {i}." for i in range(6)]
    model = ScriptedModel(script)
    agent = Agent(
        model,
        tools=[dump_logs],
        middleware=[summarization, ResultEvictionMiddleware(300, backend=backend)],
        store=store,
    )
    first = await agent.run("Check the logs.", thread_id="t")
    assert any(isinstance(e, ResultEvicted) for e in first.events)
    sent_result = model.requests[1].messages[-1]
    assert isinstance(sent_result, ToolMessage) and sent_result.data["_evicted"] is True
    assert READ_TOOL_NAME in [t.name for t in model.requests[0].tools]
    path = sent_result.data["full_result_path"]
    assert path.startswith("large_tool_results/t/")
    assert await backend.read(path) == LOGS

    summarized_events = []
    for i in range(6):
        result = await agent.run(
            f"Follow-up question {i}: " + "please elaborate " * 20, thread_id="t"
        )
        summarized_events += [e for e in result.events if isinstance(e, HistorySummarized)]
    await summarization.drain()

    assert summarized_events, "the budget was crossed, a pass must have run"
    for request in model.requests:
        assert not find_orphans(request.messages)
    last = model.requests[-1]
    assert isinstance(last.messages[0], SystemMessage)
    assert "Check the logs." in last.messages[0].text
    assert last.messages[-1].text.startswith("Follow-up question 5")

    snapshot = await store.load("t")
    assert len(snapshot.messages) == 1 + 1 + 1 + 1 + 6 * 2  # raw history, all of it
    assert len(last.messages) < len(snapshot.messages)
    stored_result = snapshot.messages[2]
    assert isinstance(stored_result, ToolMessage) and stored_result.data["full_result_path"] == path
    record = snapshot.state[STATE_KEY]
    assert (
        record["covered"] >= 4
        and record["boundary_id"] == snapshot.messages[record["covered"] - 1].id
    )
    offloaded = await backend.ls("conversation_history/t")
    assert offloaded and offloaded[0].startswith("conversation_history/t/00000000-")


async def test_the_model_reads_an_evicted_result_back_in_pages() -> None:
    pages: list[str] = []

    def reader(request: ModelRequest) -> ToolCall | str:
        last = request.messages[-1]
        if isinstance(last, UserMessage):
            return ToolCall("c1", "dump_logs", {})
        assert isinstance(last, ToolMessage)
        if last.name == "dump_logs":
            return ToolCall("r0", READ_TOOL_NAME, {"path": last.data["full_result_path"]})
        header, body = last.data.split("\n", 1)
        pages.append(body)
        if "next offset" in header:
            offset = int(header.rsplit("next offset ", 1)[1].rstrip("]"))
            path = header[1:].split(":", 1)[0]
            return ToolCall(f"r{offset}", READ_TOOL_NAME, {"path": path, "offset": offset})
        return "Read everything."

    model = FunctionModel(reader)
    agent = Agent(
        model,
        tools=[dump_logs],
        middleware=[ResultEvictionMiddleware(500, backend=MemoryBackend())],
    )
    result = await agent.run("Read the whole log.", thread_id="t")
    assert result.output == "Read everything."
    assert "".join(pages) == LOGS
    assert len(pages) == -(-len(LOGS) // 2000)  # default page: max_tokens * 4 characters


def window(limit: int) -> FunctionModel:
    def answer(request: ModelRequest) -> ToolCall | str:
        size = TokenAccountant().request(request.messages, anchor_from=len(request.messages))
        if size > limit:
            raise ContextOverflowError(f"{size} tokens > {limit}", provider="fake", status=400)
        if isinstance(request.messages[-1], UserMessage) and "logs" in request.messages[-1].text:
            return ToolCall(f"c{len(request.messages)}", "dump_logs", {})
        return "ok"

    return FunctionModel(answer)


async def test_overflow_recovery_through_agent_run() -> None:
    store = MemoryThreadStore()
    model = window(2000)
    agent = Agent(
        model,
        tools=[dump_logs],
        middleware=[OverflowRecoveryMiddleware(backend=MemoryBackend(), max_input_tokens=2000)],
        store=store,
    )
    result = await agent.run("Show me the logs.", thread_id="t")
    assert result.output == "ok"
    (recovered,) = [e for e in result.events if isinstance(e, ContextOverflowRecovered)]
    assert recovered.evicted == 1
    assert len(model.requests) == 3  # call the tool; overflow; retry after compaction
    snapshot = await store.load("t")
    raw = snapshot.messages[2]
    assert isinstance(raw, ToolMessage) and raw.data == LOGS  # the store keeps the raw result
    await agent.run("Thanks, anything else?", thread_id="t")
    assert len(model.requests) == 4  # the recorded eviction keeps the next request small


async def test_overflow_that_survives_compaction_fails_the_turn_clearly() -> None:
    store = MemoryThreadStore()
    model = window(50)
    agent = Agent(
        model,
        tools=[dump_logs],
        middleware=[OverflowRecoveryMiddleware(max_input_tokens=50)],
        store=store,
    )
    with pytest.raises(ContextOverflowUnrecoverable, match="context window"):
        await agent.run("Show me the logs. " + "x" * 2000, thread_id="t")
    assert len(model.requests) == 1  # nothing to compact: no pointless retry
    snapshot = await store.load("t")
    assert [m.role for m in snapshot.messages] == ["user"]  # the input is never lost


async def test_summarization_events_stream_live() -> None:
    history_agent = Agent(
        ScriptedModel(["a", "b", "c", "d"]),
        middleware=[SummarizationMiddleware(200, keep_messages=2)],
    )
    for text in ("one " * 60, "two " * 60, "three " * 60):
        await history_agent.run(text, thread_id="s")
    stream = history_agent.stream("four", thread_id="s")
    seen = [event.type async for event in stream]
    assert "history_summarized" in seen
    assert seen.index("history_summarized") < seen.index("model_request_sent")
    assert stream.result is not None and stream.result.output == "d"
