"""The ThreadStore contract, run against every store."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from postgres_server import fresh_schema, pgbouncer_url, postgres_url

from plait.errors import ThreadBusyError, ThreadConflictError
from plait.messages import AssistantMessage, ToolCall, ToolMessage, Usage, UserMessage
from plait.stores import (
    MemoryThreadStore,
    SQLiteThreadStore,
    ThreadDataError,
    ThreadSnapshot,
    ThreadStore,
)
from plait.stores.lease import thread_lease


@pytest.fixture(params=["memory", "sqlite", "postgres", "postgres-pgbouncer"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    if request.param == "memory":
        yield MemoryThreadStore()
    elif request.param == "sqlite":
        sqlite_store = SQLiteThreadStore(tmp_path / "threads.db")
        yield sqlite_store
        await sqlite_store.aclose()
    else:
        from plait.stores.postgres import PostgresThreadStore

        # Through PgBouncer in transaction mode, without prepared statements.
        bounced = request.param == "postgres-pgbouncer"
        url = pgbouncer_url() if bounced else postgres_url()
        async with fresh_schema(postgres_url()) as schema:
            pg_store = PostgresThreadStore(
                url, schema=schema, max_size=4, prepared_statements=not bounced
            )
            await pg_store.setup()
            yield pg_store
            await pg_store.aclose()


def conversation() -> list[Any]:
    return [
        UserMessage("Read report.csv", metadata={"source": "user"}),
        AssistantMessage(
            "Looking.",
            tool_calls=[ToolCall("c1", "read_file", {"path": "report.csv"})],
            usage=Usage(10, 5),
        ),
        ToolMessage("c1", "read_file", data={"rows": [[1, "ü"], [2, "🦜"]]}),
        AssistantMessage("Two rows.", finish_reason="stop"),
    ]


def test_stores_satisfy_the_protocol(store: ThreadStore) -> None:
    assert isinstance(store, ThreadStore)


async def test_unknown_thread_loads_empty_at_version_zero(store: ThreadStore) -> None:
    assert await store.load("nobody") == ThreadSnapshot("nobody")


async def test_append_then_load_round_trips_messages_and_state(store: ThreadStore) -> None:
    messages = conversation()
    version = await store.append(
        "t", messages, expected_version=0, state={"skills": ["pdf"], "n": 1.5, "ok": None}
    )
    assert version == 1
    snapshot = await store.load("t")
    assert snapshot.messages == messages
    assert snapshot.state == {"skills": ["pdf"], "n": 1.5, "ok": None}
    assert snapshot.version == 1


async def test_appends_accumulate_in_order_and_state_is_replaced_only_when_given(
    store: ThreadStore,
) -> None:
    first, second = conversation()[:2], conversation()[2:]
    v1 = await store.append("t", first, expected_version=0, state={"step": 1, "keep": True})
    v2 = await store.append("t", second, expected_version=v1)
    snapshot = await store.load("t")
    assert (v1, v2) == (1, 2)
    assert snapshot.messages == first + second
    assert snapshot.state == {"step": 1, "keep": True}


async def test_state_only_append_is_a_versioned_write(store: ThreadStore) -> None:
    await store.append("t", conversation(), expected_version=0)
    version = await store.append("t", [], expected_version=1, state={"summary": "done"})
    snapshot = await store.load("t")
    assert version == 2
    assert snapshot.version == 2
    assert snapshot.state == {"summary": "done"}
    assert len(snapshot.messages) == 4
    with pytest.raises(ThreadConflictError):
        await store.append("t", [], expected_version=1, state={"summary": "stale"})


async def test_stale_version_conflicts_and_writes_nothing(store: ThreadStore) -> None:
    await store.append("t", conversation()[:1], expected_version=0, state={"a": 1})
    with pytest.raises(ThreadConflictError) as caught:
        await store.append("t", conversation()[1:], expected_version=0, state={"a": 2})
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    assert "run again" in str(caught.value)
    snapshot = await store.load("t")
    assert len(snapshot.messages) == 1
    assert snapshot.state == {"a": 1}
    assert snapshot.version == 1


async def test_appending_to_an_unknown_thread_at_a_later_version_conflicts(
    store: ThreadStore,
) -> None:
    with pytest.raises(ThreadConflictError):
        await store.append("new", conversation(), expected_version=3)
    assert await store.load("new") == ThreadSnapshot("new")
    assert await store.list_threads() == []


async def test_two_runs_appending_concurrently_one_wins_nothing_lost_or_duplicated(
    store: ThreadStore,
) -> None:
    await store.append("t", [UserMessage("start")], expected_version=0)
    run_a = [AssistantMessage("from a")]
    run_b = [AssistantMessage("from b")]
    results = await asyncio.gather(
        store.append("t", run_a, expected_version=1),
        store.append("t", run_b, expected_version=1),
        return_exceptions=True,
    )
    conflicts = [r for r in results if isinstance(r, ThreadConflictError)]
    assert sorted(r for r in results if isinstance(r, int)) == [2]
    assert len(conflicts) == 1
    winner = run_a if results[0] == 2 else run_b
    snapshot = await store.load("t")
    assert snapshot.version == 2
    assert [m.text for m in snapshot.messages] == ["start", winner[0].text]


async def test_many_writers_retrying_on_conflict_lose_and_duplicate_nothing(
    store: ThreadStore,
) -> None:
    async def writer(name: str) -> int:
        conflicts = 0
        for i in range(5):
            while True:
                snapshot = await store.load("t")
                try:
                    await store.append(
                        "t", [UserMessage(f"{name}-{i}")], expected_version=snapshot.version
                    )
                    break
                except ThreadConflictError:
                    conflicts += 1
                    await asyncio.sleep(0)
        return conflicts

    await asyncio.gather(*(writer(name) for name in "abcd"))
    snapshot = await store.load("t")
    texts = [m.text for m in snapshot.messages]
    assert sorted(texts) == sorted(f"{n}-{i}" for n in "abcd" for i in range(5))
    assert snapshot.version == 20
    for name in "abcd":
        assert [t for t in texts if t.startswith(name)] == [f"{name}-{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("state", "where"),
    [
        ({"plan": {1, 2}}, "state['plan']"),
        ({"deep": {"list": [1, object()]}}, "state['deep']['list'][1]"),
        ({"pair": (1, 2)}, "state['pair']"),
        ({"ints": {1: "one"}}, "state['ints'][1]"),
        ({"ratio": math.nan}, "state['ratio']"),
        ({"when": b"bytes"}, "state['when']"),
    ],
)
async def test_non_json_state_names_the_key_and_writes_nothing(
    store: ThreadStore, state: dict[str, Any], where: str
) -> None:
    await store.append("t", [UserMessage("hi")], expected_version=0, state={"ok": 1})
    with pytest.raises(ThreadDataError) as caught:
        await store.append("t", [UserMessage("lost?")], expected_version=1, state=state)
    assert caught.value.where == where
    assert where in str(caught.value)
    assert isinstance(caught.value, TypeError)
    snapshot = await store.load("t")
    assert snapshot.version == 1
    assert [m.text for m in snapshot.messages] == ["hi"]
    assert snapshot.state == {"ok": 1}


async def test_message_with_unserialisable_data_names_the_message_and_writes_nothing(
    store: ThreadStore,
) -> None:
    bad = ToolMessage("c1", "t", data={"handle": object()})
    with pytest.raises(ThreadDataError, match=rf"message 1 \(id '{bad.id}'\)"):
        await store.append("t", [UserMessage("fine"), bad], expected_version=0)
    assert await store.load("t") == ThreadSnapshot("t")


async def test_mutating_loaded_or_appended_messages_does_not_change_the_store(
    store: ThreadStore,
) -> None:
    messages = conversation()
    state = {"skills": ["pdf"]}
    await store.append("t", messages, expected_version=0, state=state)
    messages[0].metadata["source"] = "mutated after append"
    state["skills"].append("mutated")
    loaded = await store.load("t")
    loaded.messages[0].metadata["source"] = "mutated after load"
    loaded.messages.append(UserMessage("extra"))
    loaded.state["skills"].append("mutated")
    again = await store.load("t")
    assert again.messages[0].metadata == {"source": "user"}
    assert len(again.messages) == 4
    assert again.state == {"skills": ["pdf"]}


async def test_list_threads_is_most_recently_written_first(store: ThreadStore) -> None:
    for thread in ("a", "b", "c"):
        await store.append(thread, [UserMessage(thread)], expected_version=0)
    await store.append("a", [], expected_version=1, state={"touched": True})
    assert await store.list_threads() == ["a", "c", "b"]
    with pytest.raises(ThreadConflictError):
        await store.append("b", [], expected_version=0)
    assert await store.list_threads() == ["a", "c", "b"]


async def test_delete_removes_a_thread_and_reports_whether_it_existed(
    store: ThreadStore,
) -> None:
    await store.append("t", conversation(), expected_version=0, state={"a": 1})
    await store.append("other", [UserMessage("keep")], expected_version=0)
    assert await store.delete("t") is True
    assert await store.delete("t") is False
    assert await store.load("t") == ThreadSnapshot("t")
    assert await store.list_threads() == ["other"]
    assert [m.text for m in (await store.load("other")).messages] == ["keep"]
    with pytest.raises(ThreadConflictError):
        await store.append("t", [], expected_version=1)
    assert await store.append("t", [UserMessage("fresh")], expected_version=0) == 1


# --- Turn leases (plait.stores.lease): every store serialises turns on one thread -------------


def _fail_fast(store: ThreadStore) -> Any:
    """Another handle on the same data whose lease fails fast (a second worker)."""
    if isinstance(store, MemoryThreadStore):
        store._leases.wait = 0
        return store
    if isinstance(store, SQLiteThreadStore):
        return SQLiteThreadStore(store.path, lease_wait=0)
    from plait.stores.postgres import PostgresThreadStore

    assert isinstance(store, PostgresThreadStore)
    return PostgresThreadStore(store.db, lease_wait=0)


async def test_a_held_lease_makes_a_second_one_fail_fast_then_frees(store: ThreadStore) -> None:
    other = _fail_fast(store)
    async with thread_lease(store, "t"):
        with pytest.raises(ThreadBusyError, match="'t' is running a turn"):
            async with thread_lease(other, "t"):
                pass
        async with thread_lease(other, "u"):
            pass  # another thread is not affected
    async with thread_lease(other, "t"):
        pass


async def test_a_lease_is_released_when_the_body_raises(store: ThreadStore) -> None:
    with pytest.raises(RuntimeError):
        async with thread_lease(store, "t"):
            raise RuntimeError("turn failed")
    async with thread_lease(_fail_fast(store), "t"):
        pass


async def test_a_waiting_lease_is_granted_when_the_holder_leaves(store: ThreadStore) -> None:
    order: list[str] = []
    held = asyncio.Event()

    async def holder() -> None:
        async with thread_lease(store, "t"):
            held.set()
            order.append("holder in")
            await asyncio.sleep(0.2)
            order.append("holder out")

    async def waiter() -> None:
        await held.wait()
        async with thread_lease(store, "t"):
            order.append("waiter in")

    await asyncio.gather(holder(), waiter())
    assert order == ["holder in", "holder out", "waiter in"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (10**4000, "int of"),
        ("nested", "nested deeper than"),
        ({"a": "x\ud800"}, "surrogate"),
    ],
    ids=["huge int", "deep nesting", "lone surrogate"],
)
async def test_values_that_would_not_read_back_are_refused_at_the_write(
    store: ThreadStore, data: Any, problem: str
) -> None:
    if data == "nested":
        data = []
        for _ in range(150):
            data = [data]
    with pytest.raises(ThreadDataError, match=problem):
        await store.append("t", [ToolMessage("c", "n", data)], expected_version=0)
    assert (await store.load("t")).messages == []


async def test_state_text_with_a_lone_surrogate_is_a_thread_data_error(store: ThreadStore) -> None:
    with pytest.raises(ThreadDataError, match="lone surrogate"):
        await store.append("t", [], expected_version=0, state={"k": "a\udcff"})


async def test_long_digit_strings_and_bracket_heavy_text_are_stored(store: ThreadStore) -> None:
    text = "9" * 5000 + "[" * 300
    await store.append("t", [ToolMessage("c", "n", text)], expected_version=0)
    (message,) = (await store.load("t")).messages
    assert isinstance(message, ToolMessage) and message.data == text
