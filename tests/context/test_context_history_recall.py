"""Offloaded history stays within the model's reach: the summary names where the folded
messages are, and ``read_evicted_result`` pages them back (this thread's only)."""

from __future__ import annotations

import re

import pytest

from plait import (
    Agent,
    AssistantMessage,
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
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    EvictedResultUnavailable,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.context.offload import READ_TOOL_NAME
from plait.context.reader import shared_reader
from plait.context.summarization import STATE_KEY, SUMMARY_SOURCE, SummaryRecord
from plait.stores.memory import MemoryThreadStore
from plait.tools import ToolRegistry

TURNS = 60
NEXT_PAGE = re.compile(r"^\[(.+): characters \d+-(\d+); more follows")


def fact(i: int) -> str:
    return f"FACT-{i:02d}=code{i * 7919:06d}"


@tool
def fetch_log(day: int) -> str:
    """Fetch the log of one day."""
    lines = [f"2026-01-{day % 28 + 1:02d} 12:{n:02d} worker-{n % 7} ok id={n}" for n in range(60)]
    lines.insert(30, fact(day))  # in the middle: no head/tail preview shows it
    return "\n".join(lines)


class RecallingModel:
    """Calls fetch_log once per turn; on "recall", lists the history folder the summary names
    and reads every file there page by page, the way an agent would. Records everything it
    saw, so the test can check what was within its reach."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.model = FunctionModel(self.answer)
        self.calls = 0

    def answer(self, request: ModelRequest) -> list[ToolCall] | str:
        self.seen.extend(m.text for m in request.messages if not isinstance(m, AssistantMessage))
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("day "):
            return [self.call("fetch_log", {"day": int(last.text.split()[1])})]
        if isinstance(last, UserMessage) and last.text == "recall":
            summary = next(m for m in request.messages if is_summary(m))
            folder = re.search(rf'{READ_TOOL_NAME}\(path="([^"]+)"\) lists', summary.text)
            assert folder is not None, summary.text
            return [self.call(READ_TOOL_NAME, {"path": folder.group(1)})]
        follow: list[ToolCall] = []
        for message in trailing_results(request):
            if message.name != READ_TOOL_NAME:
                continue
            header, _, body = message.text.partition("\n")
            if header.endswith("read one by its path]"):
                follow += [self.call(READ_TOOL_NAME, {"path": p}) for p in body.splitlines()]
            elif (
                more := re.search(r"^\[(.+): characters \d+-(\d+); more follows", header)
            ) is not None:
                path, offset = more.group(1), int(more.group(2))
                follow.append(self.call(READ_TOOL_NAME, {"path": path, "offset": offset}))
        return follow or "ok"

    def call(self, name: str, args: dict[str, object]) -> ToolCall:
        self.calls += 1
        return ToolCall(f"c{self.calls}", name, args)


def is_summary(message: object) -> bool:
    return isinstance(message, SystemMessage) and message.metadata.get("source") == SUMMARY_SOURCE


def trailing_results(request: ModelRequest) -> list[ToolMessage]:
    out: list[ToolMessage] = []
    for message in reversed(request.messages):
        if not isinstance(message, ToolMessage):
            break
        out.append(message)
    return out


async def test_every_fact_of_a_60_turn_session_stays_within_the_models_reach() -> None:
    backend = MemoryBackend()
    summarization = SummarizationMiddleware(3000, keep_messages=4, backend=backend)
    recaller = RecallingModel()
    agent = Agent(
        recaller.model,
        tools=[fetch_log],
        middleware=[summarization],
        store=MemoryThreadStore(),
    )
    for day in range(TURNS):
        await agent.run(f"day {day}", thread_id="ops")
    await summarization.drain()
    record = SummaryRecord.from_state((await agent.store.load("ops")).state[STATE_KEY])
    assert record is not None and record.passes >= 5  # most of the session was folded
    last = "\n".join(m.text for m in recaller.model.requests[-1].messages)
    assert sum(fact(i) in last for i in range(TURNS)) < 10  # out of the context...
    recaller.seen.clear()
    await agent.run("recall", thread_id="ops")
    reach = "\n".join(recaller.seen)
    missing = [i for i in range(TURNS) if fact(i) not in reach]
    assert missing == []  # ...but every one can be read back


async def test_the_history_reader_is_confined_to_the_calling_thread() -> None:
    backend = MemoryBackend(
        {
            "conversation_history/mine/00000000-00000004.json": "my history",
            "conversation_history/other/00000000-00000004.json": "their history",
            "notes.txt": "private",
        }
    )
    mw = SummarizationMiddleware(1000, backend=backend)
    (tool,) = mw.tools()
    reader = shared_reader(backend, 1)
    assert reader.tool is tool  # one tool per backend, whoever built it first
    page = await reader.read_page(
        "mine", "conversation_history/mine/00000000-00000004.json", 0, None
    )
    assert page.endswith("\nmy history")
    listing = await reader.read_page("mine", "conversation_history/mine", 0, None)
    assert listing.splitlines()[1:] == ["conversation_history/mine/00000000-00000004.json"]
    for path in (
        "conversation_history/other/00000000-00000004.json",
        "conversation_history/other",
        "notes.txt",
    ):
        with pytest.raises(EvictedResultUnavailable):
            await reader.read_page("mine", path, 0, None)


async def test_eviction_and_summarization_on_one_backend_share_one_read_tool() -> None:
    backend = MemoryBackend({"conversation_history/fixed/0-1.json": "h"})
    summarization = SummarizationMiddleware(1000, backend=backend, thread_id="fixed")
    eviction = ResultEvictionMiddleware(10, backend=backend)
    assert summarization.tools() == eviction.tools()
    agent = Agent(FunctionModel(lambda r: "ok"), middleware=[summarization, eviction])
    await agent.run("hi", thread_id="t")  # one registry holds the shared tool once
    reader = shared_reader(backend, 1)
    # A fixed thread_id files history under that folder; the tool reads it from any thread.
    assert (await reader.read_page("t", "conversation_history/fixed/0-1.json", 0, None)).endswith(
        "h"
    )
    assert reader.folders("t") == ["conversation_history/fixed", "large_tool_results/t"]


async def test_without_a_readable_backend_the_summary_still_says_where_history_went() -> None:
    class WriteOnly:
        def __init__(self) -> None:
            self.paths: list[str] = []

        async def write(self, path: str, content: str) -> str:
            self.paths.append(path)
            return path

    backend = WriteOnly()
    mw = SummarizationMiddleware(200, keep_messages=2, backend=backend)
    assert mw.tools() == ()
    history: list[Message] = []
    for i in range(8):
        history += [UserMessage(f"question {i} " * 20), AssistantMessage(f"answer {i} " * 20)]
    turn = TurnContext(
        thread_id="t", registry=ToolRegistry(), model=ScriptedModel([]), messages=history, state={}
    )
    request = await mw.before_model_call(ModelRequest(list(history)), DispatchContext(turn, 0))
    await mw.drain()
    summary = request.messages[0]
    assert is_summary(summary) and backend.paths
    assert "in conversation_history/t/ (file names give the message range): " in summary.text
    assert backend.paths[0].rsplit("/", 1)[1] in summary.text
    assert READ_TOOL_NAME not in summary.text


def test_the_shared_reader_does_not_keep_a_backend_alive() -> None:
    import gc
    import weakref

    backend = MemoryBackend()
    SummarizationMiddleware(1000, backend=backend)
    gone = weakref.ref(backend)
    del backend
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("eviction_first", [True, False])
async def test_each_strategy_reads_back_in_its_own_page_size_whoever_built_the_tool(
    eviction_first: bool,
) -> None:
    # Before: the first middleware built on a backend set the page size for every root.
    backend = MemoryBackend(
        {"conversation_history/t/0-1.json": "h" * 9000, "large_tool_results/t/r.txt": "r" * 9000}
    )
    made = []
    for make in (
        lambda: ResultEvictionMiddleware(10, backend=backend, page_chars=1000),
        lambda: SummarizationMiddleware(1000, backend=backend, page_chars=3000),
    )[:: 1 if eviction_first else -1]:
        made.append(make())
    reader = shared_reader(backend, 1)
    evicted = await reader.read_page("t", "large_tool_results/t/r.txt", 0, None)
    history = await reader.read_page("t", "conversation_history/t/0-1.json", 0, None)
    assert evicted.splitlines()[1] == "r" * 1000
    assert history.splitlines()[1] == "h" * 3000
    # an explicit limit is capped at four of the root's own pages
    long = await reader.read_page("t", "large_tool_results/t/r.txt", 0, 9000)
    assert long.splitlines()[1] == "r" * 4000


async def test_one_root_allowed_with_two_page_sizes_uses_the_larger() -> None:
    backend = MemoryBackend({"large_tool_results/t/r.txt": "r" * 9000})
    for page in (1000, 2000):
        ResultEvictionMiddleware(10, backend=backend, page_chars=page)
    for page in (2000, 1000):
        reader = shared_reader(backend, page)
        text = await reader.read_page("t", "large_tool_results/t/r.txt", 0, None)
        assert text.splitlines()[1] == "r" * 2000
