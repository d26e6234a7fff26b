"""What recording a turn with ``TraceRecorder`` costs, and what it stores.

Each *turn* is one ``agent.run``: the model asks for one tool call, the tool runs, the model
answers (two model calls, one tool call). A thread of N turns grows by 4 messages per turn, so
the last turns' requests carry the whole history: if recording did work proportional to the
history it shows in the ``last 20 turns`` column.

Configurations, interleaved round by round (rotating order): ``no recorder`` (memory thread
store); ``recorder`` (the same agent with ``TraceRecorder`` first, writing to a SQLite file in the
background, the default); ``recorder, waited`` (``background=False``: each turn waits for its
write); with ``--postgres URL``, ``recorder, Postgres`` (a ``PostgresTraceStore`` in a new schema,
dropped afterwards).
Per round, each configuration runs a fresh thread of N turns; a figure is the median over rounds
of the per-round median turn wall time; ``added`` is the median over rounds of the paired
difference (recorder minus no recorder, same round). The recorder writes each turn in the
background; the time ``aclose()`` then waits for writes still in flight is printed too. The last
table shows the trace file's size and how many message rows and request rows it holds after the
longest thread.

Run: ``python bench/trace_overhead.py [--rounds 7] [--turns 200] [--postgres URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from plait import Agent, ModelRequest, ModelResponse, ToolCall
from plait.messages import ToolMessage
from plait.models.scripted import FunctionModel
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder
from plait.trace.store import TraceStore


@tool
def lookup(key: str) -> str:
    """Return a value for the key."""
    return f"value of {key}: " + "x" * 400


def _answer(request: ModelRequest) -> ModelResponse:
    if isinstance(request.messages[-1], ToolMessage):
        return ModelResponse(content="done " + "y" * 200)
    return ModelResponse(tool_calls=[ToolCall(f"c{len(request.messages)}", "lookup", {"key": "k"})])


async def _thread(turns: int, store: TraceStore | None, background: bool) -> list[float]:
    recorder = TraceRecorder(store, background=background) if store is not None else None
    agent = Agent(FunctionModel(_answer), tools=[lookup], middleware=[recorder] if recorder else [])
    times = []
    cpu = time.process_time()
    for i in range(turns):
        start = time.perf_counter()
        await agent.run(f"question {i}", thread_id="bench")
        times.append(time.perf_counter() - start)
    if recorder is not None:
        start = time.perf_counter()
        await recorder.aclose()  # waits for the writes still in flight
        _DRAINS.setdefault(background, []).append(time.perf_counter() - start)
    _CPU.append((time.process_time() - cpu) / turns)
    return times


_DRAINS: dict[bool, list[float]] = {}
_CPU: list[float] = []
"""CPU seconds per turn of the last thread (every thread of the process: background writes
included), read right after each thread."""


async def _postgres(url: str, schema: str) -> TraceStore:
    from plait.trace import PostgresTraceStore

    store = PostgresTraceStore(url, schema=schema)
    await store.setup()
    return store


def _run(name: str, turns: int, path: Path, postgres: str | None, r: int) -> list[float]:
    if name == "no recorder":
        return asyncio.run(_thread(turns, None, True))
    background = "waited" not in name

    async def main() -> list[float]:
        if not (postgres and "Postgres" in name):
            return await _thread(turns, SQLiteTraceStore(path), background)
        schema = f"bench_trace_{os.getpid()}_{r}"
        try:
            return await _thread(turns, await _postgres(postgres, schema), background)
        finally:
            import psycopg

            async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--postgres", help="also record into Postgres at this URL (a new schema)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="plait-trace-bench-"))
    names = ["no recorder", "recorder", "recorder, waited"]
    names += ["recorder, Postgres"] if args.postgres else []
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    last_file = folder / "none"
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotating order
            path = folder / f"round{r}-{len(figures[name])}-{name[-6:].strip(', ')}.sqlite3"
            times = _run(name, args.turns, path, args.postgres, r)
            figures[name].append((statistics.median(times), statistics.median(times[-20:])))
            cpu[name].append(_CPU[-1])
            if name == "recorder":
                last_file = path
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.turns} turns per thread, {args.rounds} rounds, load average {load}")
    print("per-turn wall time (ms); added = median of paired differences against no recorder;")
    print("CPU = process CPU time per turn (ms, all threads, background writes included), median")
    columns = f"{'all turns':>10} {'last 20':>9} {'added':>8} {'added, last 20':>15} {'CPU':>7}"
    print(f"{'configuration':<20} {columns}")
    base = figures["no recorder"]
    for name, rows in figures.items():
        whole = statistics.median(a for a, _ in rows) * 1e3
        last = statistics.median(b for _, b in rows) * 1e3
        pairs = [(a[0] - b[0], a[1] - b[1]) for a, b in zip(rows, base, strict=True)]
        added = statistics.median(a for a, _ in pairs) * 1e3
        added_last = statistics.median(b for _, b in pairs) * 1e3
        extra = f"{added:>8.3f} {added_last:>15.3f}" if name != "no recorder" else " " * 24
        spent = statistics.median(cpu[name]) * 1e3
        print(f"{name:<20} {whole:>10.3f} {last:>9.3f} {extra} {spent:>7.3f}")
    for background, drains in _DRAINS.items():
        label = "background" if background else "waited"
        print(
            f"aclose() after the last turn ({label}: writes in flight, then close): "
            f"{statistics.median(drains) * 1e3:.1f} ms (median)"
        )
    with sqlite3.connect(last_file) as conn:
        messages = conn.execute("SELECT count(*) FROM trace_messages").fetchone()[0]
        requests = conn.execute("SELECT count(*) FROM trace_requests").fetchone()[0]
        full = conn.execute("SELECT count(*) FROM trace_requests WHERE full = 1").fetchone()[0]
    size = last_file.stat().st_size + sum(
        p.stat().st_size for p in folder.glob(last_file.name + "-*")
    )
    print(f"\ntrace file after {args.turns} turns ({2 * args.turns} model calls)")
    print(f"{'bytes':>12} {'message rows':>13} {'request rows':>13} {'whole rows':>11}")
    print(f"{size:>12,} {messages:>13,} {requests:>13,} {full:>11,}")


if __name__ == "__main__":
    main()
