"""Cancellation settles before control returns (issue 11 §2).

Many seeded random cancellation points, in the store, the model and the tools, each followed at
once by a new turn on the same thread: the new turn starts cleanly (never a
``ThreadConflictError``) and the thread's call/result pairs stay intact.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, tool
from plait.messages import AssistantMessage, Message, ToolCall, ToolMessage
from plait.models import FunctionModel
from plait.models.base import ModelRequest, ModelResponse
from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadSnapshot, ThreadStore

ROUNDS = 40


async def jitter(rng: random.Random) -> None:
    """Yield to the loop a random number of times, sometimes for a moment of real time."""
    for _ in range(rng.randrange(4)):
        await asyncio.sleep(0 if rng.random() < 0.7 else rng.uniform(0, 0.002))


class JitteryStore:
    """A real store that yields at random points before and after each call."""

    def __init__(self, inner: ThreadStore, rng: random.Random) -> None:
        self.inner = inner
        self.rng = rng

    async def load(self, thread_id: str) -> ThreadSnapshot:
        await jitter(self.rng)
        snapshot = await self.inner.load(thread_id)
        await jitter(self.rng)
        return snapshot

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        await jitter(self.rng)
        version = await self.inner.append(
            thread_id, messages, expected_version=expected_version, state=state
        )
        await jitter(self.rng)
        return version

    async def list_threads(self) -> list[str]:
        return await self.inner.list_threads()

    async def delete(self, thread_id: str) -> bool:
        return await self.inner.delete(thread_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


def build_agent(store: ThreadStore, rng: random.Random) -> Agent:
    @tool
    async def work(n: int) -> int:
        """Work a little."""
        await jitter(rng)
        return n * 2

    async def answer(request: ModelRequest) -> ModelResponse:
        await jitter(rng)
        last = request.messages[-1]
        if isinstance(last, ToolMessage) or rng.random() < 0.3:
            return ModelResponse(content="done")
        calls = [ToolCall(f"c{rng.randrange(10**9)}", "work", {"n": i}) for i in range(2)]
        return ModelResponse(tool_calls=calls, finish_reason="tool_calls")

    return Agent(FunctionModel(answer), tools=[work], store=JitteryStore(store, rng))


def assert_pairs_intact(messages: list[Message]) -> None:
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results)


@pytest.fixture(params=["memory", "sqlite"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[ThreadStore, ThreadStore]]:
    """The store the cancelled turns use, and the one the next turns use: for SQLite a second
    instance on the same file, as another process would open it (it sees only what committed)."""
    if request.param == "memory":
        memory = MemoryThreadStore()
        yield memory, memory
        return
    first = SQLiteThreadStore(tmp_path / "threads.db")
    second = SQLiteThreadStore(tmp_path / "threads.db")
    yield first, second
    await first.aclose()
    await second.aclose()


@pytest.fixture
def store(stores: tuple[ThreadStore, ThreadStore]) -> ThreadStore:
    return stores[0]


async def test_a_cancelled_run_settles_and_the_next_turn_starts_cleanly(
    stores: tuple[ThreadStore, ThreadStore],
) -> None:
    store, other = stores
    rng = random.Random(11)
    agent = build_agent(store, rng)
    next_agent = build_agent(other, rng)
    outcomes: dict[str, int] = {"cancelled": 0, "finished": 0}
    for round_ in range(ROUNDS):
        thread = f"t{round_ % 4}"
        task = asyncio.create_task(agent.run("go", thread_id=thread))
        await jitter(rng)
        await jitter(rng)
        task.cancel()
        try:
            await task
            outcomes["finished"] += 1
        except asyncio.CancelledError:
            outcomes["cancelled"] += 1
        result = await next_agent.run("next", thread_id=thread)  # never a ThreadConflictError
        assert result.output == "done"
        assert_pairs_intact((await store.load(thread)).messages)
    assert outcomes["cancelled"] > ROUNDS // 4


async def test_breaking_out_of_a_stream_settles_and_the_next_turn_starts_cleanly(
    store: ThreadStore,
) -> None:
    rng = random.Random(7)
    agent = build_agent(store, rng)
    broke = 0
    for round_ in range(ROUNDS):
        thread = f"t{round_ % 4}"
        stop_after = rng.randrange(1, 8)
        seen = 0
        async for _event in agent.stream("go", thread_id=thread):
            seen += 1
            if seen == stop_after:
                broke += 1
                break
        result = await agent.run("next", thread_id=thread)  # never a ThreadConflictError
        assert result.output == "done"
        assert_pairs_intact((await store.load(thread)).messages)
    assert broke > ROUNDS // 4


async def test_closing_a_stream_explicitly_returns_only_once_the_turn_settled(
    store: ThreadStore,
) -> None:
    rng = random.Random(3)
    agent = build_agent(store, rng)
    for round_ in range(ROUNDS // 2):
        thread = f"t{round_ % 2}"
        events: AsyncIterator[Any] = aiter(agent.stream("go", thread_id=thread))
        await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        # the stream's turn is at rest: a plain store write at the loaded version succeeds
        snapshot = await store.load(thread)
        version = await store.append(thread, [], expected_version=snapshot.version)
        assert version == snapshot.version + 1


async def test_a_dispatch_cancelled_while_its_tools_run_is_persisted_with_what_ran(
    store: ThreadStore,
) -> None:
    side_effects: list[str] = []
    started = asyncio.Event()

    @tool
    async def send_email() -> str:
        """Send an email (a side effect that must not be forgotten)."""
        side_effects.append("sent")
        return "sent"

    @tool
    async def slow() -> str:
        """Take long."""
        started.set()
        await asyncio.Event().wait()
        return "late"

    model = FunctionModel(
        lambda r: (
            [ToolCall("e", "send_email"), ToolCall("s", "slow")] if len(r.messages) == 1 else "done"
        )
    )
    agent = Agent(model, tools=[send_email, slow], store=store)
    task = asyncio.create_task(agent.run("go", thread_id="t"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    messages = (await store.load("t")).messages
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    assert results["e"].data == "sent" and not results["e"].is_error
    assert results["s"].is_error and "cancelled" in results["s"].text
    assert side_effects == ["sent"]
    # the next turn sees what ran and does not need to send it again
    assert (await agent.run("next", thread_id="t")).output == "done"
    assert side_effects == ["sent"]


async def test_aclosing_a_stream_settles_its_turn_before_the_block_ends(store: ThreadStore) -> None:
    import contextlib

    rng = random.Random(5)
    agent = build_agent(store, rng)
    for round_ in range(ROUNDS // 2):
        thread = f"t{round_ % 2}"
        async with contextlib.aclosing(agent.stream("go", thread_id=thread)) as stream:
            async for _event in stream:
                break
        snapshot = await store.load(thread)
        version = await store.append(thread, [], expected_version=snapshot.version)
        assert version == snapshot.version + 1
