"""The trace store contract, over SQLite and Postgres (a real server: ``.ci/postgres.sh``), and the
page's JSON API reading either: the same recorded turns give the same answers from both."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from postgres_server import fresh_schema, postgres_url
from rich.console import Console

from plait import Agent, ScriptedModel, ToolCall
from plait.cli.demo import bundled_skills
from plait.cli.demo_script import run_demo
from plait.runtime.events import ErrorOccurred
from plait.stores.postgres import PostgresThreadStore
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder, TraceStoreError, create_app
from plait.trace.postgres import PostgresTraceStore
from plait.trace.server import allowed_hosts
from plait.trace.store import RequestRow, TraceBatch, TraceStore


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TraceStore]:
    if request.param == "sqlite":
        lite = SQLiteTraceStore(tmp_path / "traces.sqlite3")
        yield lite
        await lite.aclose()
        return
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresTraceStore(postgres_url(), schema=schema)
        await pg.setup()
        yield pg
        await pg.aclose()


class Both:
    """A trace store that writes every batch to two stores (so they hold the same rows)."""

    def __init__(self, first: TraceStore, second: TraceStore) -> None:
        self.first, self.second = first, second

    async def write(self, batch: TraceBatch) -> None:
        await self.first.write(batch)
        await self.second.write(batch)

    async def aclose(self) -> None:
        return None

    async def last_request(self, thread_id: str) -> tuple[int, list[str]] | None:
        return await self.first.last_request(thread_id)

    async def runs(self, query: str = "", limit: int = 500) -> list[dict[str, Any]]:
        return await self.first.runs(query, limit)

    async def run(self, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        return await self.first.run(run_id)

    async def request(self, span_id: str) -> tuple[RequestRow, list[str], RequestRow | None] | None:
        return await self.first.request(span_id)

    async def messages(self, thread_id: str, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        return await self.first.messages(thread_id, keys)

    async def blob(self, digest: str) -> str | None:
        return await self.first.blob(digest)

    async def binary(self, sha256: str) -> tuple[str, int, bytes | None] | None:
        return await self.first.binary(sha256)

    async def binary_kept(self, digests: Sequence[str]) -> dict[str, bool]:
        return await self.first.binary_kept(digests)


async def test_a_recorded_thread_reads_back_whole(store: TraceStore) -> None:
    recorder = TraceRecorder(store)
    long = "z" * 3_000
    agent = Agent(
        ScriptedModel([ToolCall("c1", "echo", {"text": long}), "first", "second 100%_done"]),
        tools=[echo],
        middleware=[recorder],
    )
    await agent.run("one", thread_id="t")
    await agent.run("two", thread_id="t")
    await recorder.drain()
    runs = await store.runs()
    assert [r["input"] for r in runs] == ["two", "one"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert [r["input"] for r in await store.runs("100%_")] == ["two"]
    assert await store.runs("1_0") == []  # _ (and %) are matched literally
    found = await store.run(runs[1]["id"])
    assert found is not None
    _, spans = found
    assert [(s["kind"], s["name"]) for s in spans] == [
        ("model", "scripted"),
        ("tool", "echo"),
        ("model", "scripted"),
    ]
    assert await store.blob(spans[1]["data"]["full"]) == long
    last = await store.last_request("t")
    assert last is not None and last[0] == 2 and len(last[1]) == 5
    second = await store.run(runs[0]["id"])
    assert second is not None
    (model_span,) = [s for s in second[1] if s["kind"] == "model"]
    row = await store.request(model_span["id"])
    assert row is not None and row[1] == last[1] and row[2] is not None and row[2].seq == 1
    bodies = await store.messages("t", row[1])
    assert [bodies[k]["role"] for k in row[1]] == ["user", "assistant", "tool", "assistant", "user"]
    assert bodies[row[1][-1]]["body"]["content"][0]["text"] == "two"
    assert await store.run("nope") is None and await store.request("nope") is None
    assert await store.blob("0" * 16) is None and await store.last_request("other") is None


async def test_runs_and_spans_are_upserted_by_id(store: TraceStore) -> None:
    run = {
        "id": "r1",
        "thread_id": "t",
        "agent": "a",
        "started": 1.0,
        "finished": None,
        "status": "unfinished",
        "error": None,
        "input": "hi",
        "output": None,
    }
    span = {
        "id": "s1",
        "run_id": "r1",
        "kind": "tool",
        "name": "x",
        "dispatch": 0,
        "started": 1.0,
        "finished": 1.5,
        "data": {"preview": "a"},
    }
    await store.write(TraceBatch(runs=[run], spans=[span]))
    await store.write(
        TraceBatch(
            runs=[{**run, "status": "error", "error": "E: x", "finished": 2.0}],
            spans=[{**span, "data": {"preview": "a", "model_saw": "b"}}],
            blobs={"h": "text"},
        )
    )
    await store.write(TraceBatch(blobs={"h": "other"}))  # written once: the first stays
    found = await store.run("r1")
    assert found is not None
    assert (found[0]["status"], found[0]["error"], found[0]["finished"]) == ("error", "E: x", 2.0)
    assert found[1][0]["data"] == {"preview": "a", "model_saw": "b"}
    assert await store.blob("h") == "text"


async def test_postgres_before_setup_is_a_trace_error_that_never_fails_the_turn() -> None:
    async with fresh_schema(postgres_url()) as schema:
        store = PostgresTraceStore(postgres_url(), schema=schema)
        with pytest.raises(TraceStoreError, match=r"setup\(\)"):
            await store.runs()
        recorder = TraceRecorder(store)
        agent = Agent(ScriptedModel(["fine", "again"]), middleware=[recorder])
        assert (await agent.run("hi", thread_id="t")).output == "fine"
        await recorder.drain()
        result = await agent.run("more", thread_id="t")
        errors = [e for e in result.events if isinstance(e, ErrorOccurred) and e.where == "trace"]
        assert len(errors) == 1 and "setup()" in str(errors[0].error)
        await recorder.aclose()


async def test_the_trace_store_shares_the_thread_stores_pool() -> None:
    async with fresh_schema(postgres_url()) as schema:
        threads = PostgresThreadStore(postgres_url(), schema=schema)
        await threads.setup()
        traces = PostgresTraceStore(threads.db)
        recorder = TraceRecorder(traces)
        agent = Agent(ScriptedModel(["one", "two"]), store=threads, middleware=[recorder])
        await agent.run("a", thread_id="t")
        await recorder.aclose()  # leaves the shared pool open for the thread store
        await agent.run("b", thread_id="t")
        assert len((await threads.load("t")).messages) == 4
        await recorder.drain()
        assert [r["input"] for r in await traces.runs()] == ["b", "a"]
        await threads.aclose()


async def test_the_page_api_answers_the_same_from_sqlite_and_postgres(tmp_path: Path) -> None:
    lite = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    async with fresh_schema(postgres_url()) as schema:
        pg = PostgresTraceStore(postgres_url(), schema=schema)
        await pg.setup()
        recorder = TraceRecorder(Both(lite, pg), agent="demo")
        console = Console(file=io.StringIO())
        await run_demo(console, bundled_skills(), tmp_path, recorder)
        await recorder.drain()
        answers = []
        for store in (lite, pg):
            app = create_app(store, token=None)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1:7600"
            ) as client:
                got = {"runs": (await client.get("/api/runs")).json()}
                for run in got["runs"]:
                    view = (await client.get(f"/api/runs/{run['id']}")).json()
                    got[run["id"]] = view
                    for dispatch in view["dispatches"]:
                        for span in dispatch["spans"]:
                            if span["kind"] == "model":
                                call = await client.get(f"/api/calls/{span['id']}")
                                got[span["id"]] = call.json()
                answers.append(got)
        assert len(answers[0]["runs"]) == 3 and len(answers[0]) > 4  # runs, then calls
        assert answers[0] == answers[1]
        await pg.aclose()
        await lite.aclose()


async def test_the_page_api_says_what_to_do_when_the_store_cannot_be_read() -> None:
    async with fresh_schema(postgres_url()) as schema:
        store = PostgresTraceStore(postgres_url(), schema=schema)  # setup() never ran
        transport = httpx.ASGITransport(app=create_app(store, token=None))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:7600"
        ) as client:
            response = await client.get("/api/runs")
        assert response.status_code == 503
        assert "plait db upgrade" in response.json()["error"]
        await store.aclose()


async def test_a_nul_or_lone_surrogate_in_a_turn_never_loses_its_trace(store: TraceStore) -> None:
    # Postgres text cannot hold NUL, UTF-8 cannot hold a lone surrogate: a tool output, an input
    # or an answer holding either must still be recorded (readably), with no write error.
    recorder = TraceRecorder(store)
    odd = "a\x00b\ud800c" + "z" * 3_000
    agent = Agent(
        ScriptedModel([ToolCall("c1", "echo", {"text": odd}), "done\x00\udfff"]),
        tools=[echo],
        middleware=[recorder],
    )
    await agent.run("in\x00put\ud83d", thread_id="t")
    await recorder.drain()
    assert recorder.write_error is None
    (run,) = await store.runs()
    # (the runtime already made the input and answer's surrogates U+FFFD: NUL is left here)
    assert run["input"] == "in\\x00put\ufffd" and run["output"] == "done\\x00\ufffd"
    found = await store.run(run["id"])
    assert found is not None
    (tool_span,) = [s for s in found[1] if s["kind"] == "tool"]
    assert await store.blob(tool_span["data"]["full"]) == "a\\x00b\ufffdc" + "z" * 3_000
    # A batch written directly (a system prompt's blob is not made storable upstream).
    await store.write(TraceBatch(blobs={"h": "x\ud800\x00"}))
    assert await store.blob("h") == "x\\ud800\\x00"


async def test_the_page_refuses_a_foreign_host_name(tmp_path: Path) -> None:
    # DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 sends its own
    # Host; the app answers only the loopback names unless told to serve the network.
    store = SQLiteTraceStore(tmp_path / "traces.sqlite3")
    transport = httpx.ASGITransport(app=create_app(store, token=None))
    async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as client:
        assert (await client.get("/api/runs")).status_code == 400
        for host in ("127.0.0.1:7600", "localhost:7600"):
            response = await client.get("/api/runs", headers={"host": host})
            assert response.status_code == 200 and response.json() == []
    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "localhost"]
    assert allowed_hosts("127.0.0.2") == ["127.0.0.1", "localhost", "127.0.0.2"]
    assert allowed_hosts("0.0.0.0") == ["*"] and allowed_hosts("192.168.1.5") == ["*"]
    exposed = httpx.ASGITransport(app=create_app(store, token=None, hosts=allowed_hosts("0.0.0.0")))
    async with httpx.AsyncClient(transport=exposed, base_url="http://box.lan") as client:
        assert (await client.get("/api/runs")).status_code == 200
    await store.aclose()
