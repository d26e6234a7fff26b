"""``plait serve --workers 2`` on Postgres: one thread served by both workers in turn."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from postgres_server import fresh_schema, postgres_url
from serve_process import ServeProcess, serve_process

from plait.stores.postgres import PostgresThreadStore
from plait.trace.access import new_token


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    url = postgres_url()
    schema_cm = fresh_schema(url)
    schema = asyncio.run(schema_cm.__aenter__())

    async def setup() -> None:
        store = PostgresThreadStore(url, schema=schema)
        try:
            await store.setup()
        finally:
            await store.aclose()

    asyncio.run(setup())
    env = {"PLAIT_TEST_SERVE_STORE": url, "PLAIT_TEST_SERVE_SCHEMA": schema}
    folder = tmp_path_factory.mktemp("workers")
    try:
        with serve_process(folder, token=new_token(), workers=2, env=env) as served:
            yield served
    finally:
        asyncio.run(schema_cm.__aexit__(None, None, None))


def test_a_thread_is_served_by_worker_1_then_worker_2(
    two_workers: ServeProcess, tmp_path: Path
) -> None:
    server = two_workers
    headers = {**server.headers(), "X-Plait-Thread": "workers-1"}
    workers: list[str] = []
    sent: list[str] = []
    for turn in range(40):  # new connections until both workers have served the thread
        text = f"turn {turn}"
        with httpx.Client(timeout=60) as fresh:
            history = [{"role": "user", "content": t} for t in [text]]
            answer = fresh.post(
                server.url + "/v1/chat/completions",
                json={"model": "plait", "messages": history},
                headers=headers,
            )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == f"echo: {text}"
        sent.append(text)
        workers.append(answer.headers["x-plait-worker"])
        if len(set(workers)) == 2 and turn >= 3:
            break
    assert len(set(workers)) == 2, f"one worker answered every request: {workers}"
    thread = httpx.get(server.url + "/threads/workers-1", headers=server.headers()).json()
    contents = [m["content"] for m in thread["messages"]]
    expected = [x for t in sent for x in (t, f"echo: {t}")]
    assert contents == expected  # every turn once, in order, whichever worker served it


def _other_worker(server: ServeProcess, than: str, path: str) -> httpx.Client:
    """A client whose (kept-alive) connection is served by a worker other than ``than``."""
    for _ in range(60):  # new connections until the other worker takes one
        client = httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)
        if client.get(path).headers["x-plait-worker"] != than:
            return client
        client.close()
    raise AssertionError(f"worker {than} answered every connection")


def test_a_run_of_worker_1_is_read_waited_for_streamed_and_cancelled_from_worker_2(
    two_workers: ServeProcess,
) -> None:
    server = two_workers
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as first:
        quick = first.post("/threads/wk-runs/runs", json={"input": "add 2 3"})
        owner = quick.headers["x-plait-worker"]
        quick_id = quick.json()["run_id"]
        slow = first.post("/threads/wk-slow/runs", json={"input": "slow " + "word " * 200})
        assert slow.headers["x-plait-worker"] == owner  # one kept-alive connection
        slow_id = slow.json()["run_id"]
    other = _other_worker(server, owner, f"/threads/wk-runs/runs/{quick_id}")
    try:
        waited = other.get(f"/threads/wk-runs/runs/{quick_id}/wait")
        assert waited.headers["x-plait-worker"] != owner
        assert waited.json()["status"] == "success" and waited.json()["output"] == "sum: 5"
        streamed = other.get(f"/threads/wk-runs/runs/{quick_id}/stream").text
        assert '"output": "sum: 5"' in streamed
        seen = other.get(f"/threads/wk-slow/runs/{slow_id}").json()
        assert seen["run_id"] == slow_id and seen["status"] in ("pending", "running")
        cancelled = other.post(f"/threads/wk-slow/runs/{slow_id}/cancel")
        assert cancelled.headers["x-plait-worker"] != owner
        assert cancelled.json()["status"] == "cancelled"
        assert other.get("/threads/wk-slow/runs/nope").status_code == 404
    finally:
        other.close()
    # The cancelled turn settled: its input stays, and the thread takes a new turn.
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as c:
        again = c.post("/threads/wk-slow/runs", json={"input": "hello"}).json()
        done = c.get(f"/threads/wk-slow/runs/{again['run_id']}/wait").json()
        assert done["status"] == "success" and done["output"] == "echo: hello"


@contextlib.contextmanager
def _a_client_on_each_worker(server: ServeProcess) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    clients: dict[str, httpx.Client] = {}
    try:
        for _ in range(60):  # kept-alive connections until each worker holds one
            client = httpx.Client(base_url=server.url, headers=server.headers(), timeout=60)
            worker = client.get("/v1/models").headers["x-plait-worker"]
            if worker in clients:
                client.close()
            else:
                clients[worker] = client
            if len(clients) == 2:
                break
        assert len(clients) == 2, "one worker answered every connection"
        first, second = clients.values()
        yield first, second
    finally:
        for client in clients.values():
            client.close()


def test_the_run_a_chat_completion_names_is_found_at_once_by_the_other_worker(
    two_workers: ServeProcess,
) -> None:
    with _a_client_on_each_worker(two_workers) as (first, second):
        for n in range(10):
            answer = first.post(
                "/v1/chat/completions",
                json={"model": "plait", "messages": [{"role": "user", "content": f"hi {n}"}]},
                headers={"X-Plait-Thread": f"wk-chat-{n}"},
            )
            assert answer.status_code == 200, answer.text
            run_id = answer.headers["x-plait-run"]
            seen = second.get(f"/threads/wk-chat-{n}/runs/{run_id}")  # no wait, no retry
            assert seen.status_code == 200, seen.text
            assert seen.headers["x-plait-worker"] != answer.headers["x-plait-worker"]
            assert (seen.json()["status"], seen.json()["output"]) == ("success", f"echo: hi {n}")


def test_a_run_id_answered_by_one_worker_is_found_at_once_by_the_other(
    two_workers: ServeProcess,
) -> None:
    with _a_client_on_each_worker(two_workers) as (first, second):
        for n in range(10):
            started = first.post(f"/threads/wk-seen-{n}/runs", json={"input": "slow a b c"})
            assert started.status_code == 202
            run_id = started.json()["run_id"]
            seen = second.get(f"/threads/wk-seen-{n}/runs/{run_id}")  # no wait, no retry
            assert seen.status_code == 200, seen.text
            assert seen.headers["x-plait-worker"] != started.headers["x-plait-worker"]
