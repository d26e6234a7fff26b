"""``plait serve --workers 2`` on Postgres: one thread served by both workers in turn."""

from __future__ import annotations

import asyncio
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
