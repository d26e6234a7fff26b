"""What recording a turn with ``TraceRecorder`` costs, and what it stores.

Each *turn* is one ``agent.run``: the model asks for one tool call, the tool runs, the model
answers (two model calls, one tool call). A thread of N turns grows by 4 messages per turn, so
the last turns' requests carry the whole history: if recording did work proportional to the
history it shows in the ``last 20 turns`` column.

Configurations, interleaved round by round (rotating order): ``no recorder`` (memory thread
store) and ``recorder`` (the same agent with ``TraceRecorder`` first, writing to a SQLite file).
Per round, each configuration runs a fresh thread of N turns; a figure is the median over rounds
of the per-round median turn wall time; ``added`` is the median over rounds of the paired
difference (recorder minus no recorder, same round). The recorder writes each turn in the
background; the time ``aclose()`` then waits for writes still in flight is printed too. The last
table shows the trace file's size and how many message rows and request rows it holds after the
longest thread.

Run: ``python bench/trace_overhead.py [--rounds 7] [--turns 200]``.
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


@tool
def lookup(key: str) -> str:
    """Return a value for the key."""
    return f"value of {key}: " + "x" * 400


def _answer(request: ModelRequest) -> ModelResponse:
    if isinstance(request.messages[-1], ToolMessage):
        return ModelResponse(content="done " + "y" * 200)
    return ModelResponse(tool_calls=[ToolCall(f"c{len(request.messages)}", "lookup", {"key": "k"})])


async def _thread(turns: int, trace: Path | None) -> list[float]:
    recorder = TraceRecorder(SQLiteTraceStore(trace)) if trace else None
    agent = Agent(FunctionModel(_answer), tools=[lookup], middleware=[recorder] if recorder else [])
    times = []
    for i in range(turns):
        start = time.perf_counter()
        await agent.run(f"question {i}", thread_id="bench")
        times.append(time.perf_counter() - start)
    if recorder is not None:
        start = time.perf_counter()
        await recorder.aclose()  # waits for the writes still in flight
        _DRAINS.append(time.perf_counter() - start)
    return times


_DRAINS: list[float] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="plait-trace-bench-"))
    figures: dict[str, list[tuple[float, float]]] = {"no recorder": [], "recorder": []}
    last_file = folder / "none"
    for r in range(args.rounds):
        order = ["no recorder", "recorder"] if r % 2 == 0 else ["recorder", "no recorder"]
        for name in order:
            trace = folder / f"round{r}.sqlite3" if name == "recorder" else None
            times = asyncio.run(_thread(args.turns, trace))
            figures[name].append((statistics.median(times), statistics.median(times[-20:])))
            if trace is not None:
                last_file = trace
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.turns} turns per thread, {args.rounds} rounds, load average {load}")
    print("per-turn wall time (ms)")
    print(f"{'configuration':<14} {'all turns':>10} {'last 20 turns':>14}")
    for name, rows in figures.items():
        whole = statistics.median(a for a, _ in rows) * 1e3
        last = statistics.median(b for _, b in rows) * 1e3
        print(f"{name:<14} {whole:>10.3f} {last:>14.3f}")
    pairs = zip(figures["recorder"], figures["no recorder"], strict=True)
    added = [(a[0] - b[0], a[1] - b[1]) for a, b in pairs]
    print(
        f"{'added':<14} {statistics.median(a for a, _ in added) * 1e3:>10.3f} "
        f"{statistics.median(b for _, b in added) * 1e3:>14.3f}"
    )
    drain = statistics.median(_DRAINS) * 1e3
    print(f"writes still in flight after the last turn: drained in {drain:.1f} ms (median)")
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
