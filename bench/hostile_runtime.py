"""Hostile runtime cases finish in bounded time and memory (issue 11 §1-3).

Each row is one hostile case run through a real agent, with its wall time (untraced run) and the
peak memory Python allocated while it ran (a second run under ``tracemalloc``):

* a provider that accepts the connection and never answers (OpenAI SDK against a local socket),
  bounded by ``ModelTimeouts(total=2)``;
* a tool that never returns, bounded by ``Limits(tool_timeout=1)``;
* a tool result of 100,000 undecodable file names (``os.fsdecode`` of invalid UTF-8), made
  storable and persisted in SQLite;
* a stream left with ``break`` mid-turn, followed at once by a new turn on the thread;
* a user's own model that never answers, bounded by the agent's ``Limits(model_timeout=2)``;
* the end of a turn on SQLite while another connection holds the file's write lock (for 60 s):
  releasing the turn lease gives up within ``LEASE_RELEASE_S`` (5 s) and the lease expires.

Then the added cost of making a tool result storable (``storable_value``), as the median of
per-call times over interleaved rounds, for clean and dirty payloads.

Run: ``python bench/hostile_runtime.py`` (needs the ``openai`` extra).
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from plait import Agent, ScriptedModel, ToolCall, tool
from plait.errors import ModelTimeoutError
from plait.models import FunctionModel
from plait.models.base import ModelRequest
from plait.models.openai import OpenAIChatModel
from plait.models.timeouts import ModelTimeouts
from plait.runtime.agent import Limits
from plait.storable import storable_value
from plait.stores import SQLiteThreadStore

ROUNDS = 7


def silent_server() -> tuple[str, Callable[[], None]]:
    """A TCP server on 127.0.0.1 that accepts connections and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
                held.append(conn)
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()

    return f"http://127.0.0.1:{listener.getsockname()[1]}/v1", close


async def never_answering_provider() -> str:
    url, close = silent_server()
    model = OpenAIChatModel(
        "gpt-4.1-mini", api_key="sk-bench", base_url=url, timeouts=ModelTimeouts(total=2)
    )
    try:
        await Agent(model).run("hello?")
    except ModelTimeoutError:
        return "ModelTimeoutError"
    finally:
        await model.aclose()
        close()
    return "no error (unexpected)"


async def never_returning_tool() -> str:
    @tool
    async def hang() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return ""

    model = ScriptedModel([ToolCall("c1", "hang"), "done"])
    result = await Agent(model, tools=[hang], limits=Limits(tool_timeout=1)).run("go")
    return f"answered: {result.output}"


async def undecodable_listing(store_dir: Path) -> str:
    names = [os.fsdecode(b"file-%d-\xff.txt" % i) for i in range(100_000)]

    @tool
    def listing() -> list[str]:
        """List a folder of undecodable names."""
        return names

    store = SQLiteThreadStore(store_dir / f"threads-{time.monotonic_ns()}.db")
    try:
        model = ScriptedModel([ToolCall("c1", "listing"), "done"])
        await Agent(model, tools=[listing], store=store).run("ls", thread_id="t")
        stored = len((await store.load("t")).messages)
    finally:
        await _close(store)
    return f"{stored} messages persisted"


async def _close(store: Any) -> None:
    closer = getattr(store, "aclose", None) or getattr(store, "close", None)
    if closer is not None:
        result = closer()
        if asyncio.iscoroutine(result):
            await result


async def stream_break_then_new_turn() -> str:
    @tool
    async def slow() -> str:
        """Take a moment."""
        await asyncio.sleep(0.05)
        return "ok"

    agent = Agent(ScriptedModel([ToolCall("c1", "slow"), "done", "again"]), tools=[slow])
    async for _ in agent.stream("go", thread_id="t"):
        break
    result = await agent.run("next", thread_id="t")
    return f"next turn: {result.output}"


async def never_answering_own_model() -> str:
    async def answer(request: ModelRequest) -> str:
        await asyncio.Event().wait()
        return ""

    try:
        await Agent(FunctionModel(answer), limits=Limits(model_timeout=2)).run("hello?")
    except ModelTimeoutError:
        return "ModelTimeoutError"
    return "no error (unexpected)"


async def lease_release_behind_a_write_lock(store_dir: Path) -> str:
    path = store_dir / f"lease-{time.monotonic_ns()}.db"
    store = SQLiteThreadStore(path)
    done, locked = threading.Event(), threading.Event()

    def hold() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        locked.set()
        done.wait(60)
        conn.execute("ROLLBACK")
        conn.close()

    holder = asyncio.ensure_future(asyncio.to_thread(hold))
    try:
        async with store.lease("t"):
            await asyncio.to_thread(locked.wait)
            ended = time.perf_counter()
        released = time.perf_counter() - ended
    finally:
        done.set()
        await holder
        await store.aclose()
    return f"turn end took {released:.2f} s, lock still held"


async def measure(case: Callable[[], Awaitable[str]]) -> tuple[float, float, str]:
    """Wall time of one untraced run (tracing slows Python several-fold), then the peak of
    memory allocated during a second, traced run."""
    start = time.perf_counter()
    outcome = await case()
    elapsed = time.perf_counter() - start
    tracemalloc.start()
    await case()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return elapsed, peak / 2**20, outcome


def storable_costs() -> list[tuple[str, float]]:
    payloads: dict[str, Any] = {
        "10 KB text": "x" * 10_000,
        "50-row dict": {"rows": [{"id": i, "name": f"item {i}"} for i in range(50)]},
        "1 MB text": "y" * 2**20,
        "50-row dict, 1 lone surrogate": {
            "rows": [{"id": i, "name": f"item {i}"} for i in range(49)] + [{"name": "\udcff"}]
        },
        "50-row dict, 1 nan": {"rows": [{"v": float(i)} for i in range(49)] + [{"v": math.nan}]},
    }
    samples: dict[str, list[float]] = {name: [] for name in payloads}
    for _ in range(ROUNDS):
        for name, value in payloads.items():  # interleaved round by round
            start = time.perf_counter()
            for _ in range(20):
                storable_value(value)
            samples[name].append((time.perf_counter() - start) / 20)
    return [(name, statistics.median(times) * 1e6) for name, times in samples.items()]


async def main() -> None:
    import openai  # noqa: F401  (imported before timing: the SDK import is not the case)

    with tempfile.TemporaryDirectory() as tmp:
        cases: list[tuple[str, Callable[[], Awaitable[str]]]] = [
            ("provider never answers (total=2 s)", never_answering_provider),
            ("tool never returns (tool_timeout=1 s)", never_returning_tool),
            ("100k undecodable names, SQLite", lambda: undecodable_listing(Path(tmp))),
            ("stream break, then a new turn", stream_break_then_new_turn),
            ("own model never answers (limit 2 s)", never_answering_own_model),
            (
                "lease release behind a write lock",
                lambda: lease_release_behind_a_write_lock(Path(tmp)),
            ),
        ]
        print(f"{'hostile case':40} {'wall s':>8} {'peak MiB':>9}  outcome")
        for name, case in cases:
            elapsed, peak, outcome = await measure(case)
            print(f"{name:40} {elapsed:8.2f} {peak:9.1f}  {outcome}")
    print()
    print(f"{'storable_value payload':34} {'median us/call':>15}")
    for name, micros in storable_costs():
        print(f"{name:34} {micros:15.1f}")


if __name__ == "__main__":
    asyncio.run(main())
