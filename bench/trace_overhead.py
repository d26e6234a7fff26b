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

The image table (issue 22): the trace store's bytes per recorded request with a 1 MB image in
the thread, ``--image-turns`` turns of two requests each, recorded as before this change (each
message body inline: the image's base64 in every message row holding it, the page's call JSON
with it) against by reference (the body holds its sha256; the bytes once in ``trace_binary``).
Three threads: the image in the first message only; the same image attached to every user
message (a screenshot sent again each turn); a tool returning the same screenshot on each call.
``call JSON`` is the size of ``/api/calls/<id>`` for the last request (what the page loads).

Run: ``python bench/trace_overhead.py [--rounds 7] [--turns 200] [--postgres URL]
[--image-turns 20]`` (``--image-turns 0`` skips the image table; ``--rounds 0`` the timings).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import struct
import tempfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from plait import Agent, ModelRequest, ModelResponse, ToolCall
from plait.messages import Message, Part, TextPart, ToolMessage, UserMessage, dump_messages
from plait.models.scripted import FunctionModel
from plait.parts import Blob, ImagePart
from plait.tools import tool
from plait.trace import SQLiteTraceStore, TraceRecorder, call_view
from plait.trace import recorder as trace_recorder
from plait.trace import requests as trace_requests
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


def _image(size: int) -> bytes:
    """A PNG of about ``size`` bytes: a real 1024 x 768 header, then incompressible data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1024, 768, 8, 2, 0, 0, 0))
    return (
        b"\x89PNG\r\n\x1a\n" + header + chunk(b"IDAT", os.urandom(size - 45)) + chunk(b"IEND", b"")
    )


SCREEN = Blob(_image(1_000_000))


@tool
def capture(n: int) -> list[Any]:
    """Capture the screen (the same picture every time)."""
    return [f"screen {n}", ImagePart(SCREEN)]


def _image_answer(request: ModelRequest) -> ModelResponse:
    if isinstance(request.messages[-1], ToolMessage):
        return ModelResponse(content="seen")
    n = len(request.messages)
    name = "capture" if any(t.name == "capture" for t in request.tools) else "lookup"
    return ModelResponse(
        tool_calls=[ToolCall(f"c{n}", name, {"n": n} if name == "capture" else {"key": "k"})]
    )


@contextmanager
def _inline_bodies() -> Iterator[None]:
    """Record as the recorder did before blobs went by reference: each message body the
    message's whole JSON, each image's base64 inside (and no binary rows)."""

    def inline(message: Message) -> tuple[str, dict[str, Any]]:
        return dump_messages([message])[1:-1], {}

    def nothing(parts: Any) -> dict[str, Any]:
        return {}

    swaps = [(trace_requests, "message_body", inline), (trace_recorder, "part_blobs", nothing)]
    saved = [(module, name, getattr(module, name)) for module, name, _ in swaps]
    for module, name, replacement in swaps:
        setattr(module, name, replacement)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


async def _image_thread(path: Path, case: str, turns: int) -> tuple[int, int]:
    """Record ``turns`` turns of ``case`` into ``path``; the requests recorded and the size of
    the last one's call JSON."""
    store = SQLiteTraceStore(path)
    recorder = TraceRecorder(store, background=False)
    tools = [capture] if case == "tool" else [lookup]
    agent = Agent(FunctionModel(_image_answer), tools=tools, middleware=[recorder])
    for i in range(turns):
        attach = case == "every turn" or (case == "first message" and i == 0)
        parts: list[Part] = [TextPart(f"question {i}")]
        parts += [ImagePart(SCREEN)] if attach else []
        await agent.run(UserMessage(parts), thread_id="images")
    (run,) = await store.runs(limit=1)
    found = await store.run(run["id"])
    assert found is not None
    last = [s for s in found[1] if s["kind"] == "model"][-1]
    view = await call_view(store, last["id"])
    await recorder.aclose()
    with sqlite3.connect(path) as conn:
        requests = conn.execute("SELECT count(*) FROM trace_requests").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return int(requests), len(json.dumps(view))


def _image_table(folder: Path, turns: int) -> None:
    print(
        f"\ntrace store with a {SCREEN.size:,}-byte image in the thread, "
        f"{turns} turns (2 requests each)"
    )
    print(
        f"{'thread':<16} {'requests':>8} {'inline bytes':>13} {'per request':>12} "
        f"{'by ref bytes':>13} {'per request':>12} {'call JSON inline':>17} {'by ref':>9}"
    )
    for case in ("no image", "first message", "every turn", "tool"):
        figures = []
        for mode in ("inline", "by reference"):
            path = folder / f"images-{case.replace(' ', '-')}-{mode.replace(' ', '-')}.sqlite3"
            if mode == "inline":
                with _inline_bodies():
                    requests, call = asyncio.run(_image_thread(path, case, turns))
            else:
                requests, call = asyncio.run(_image_thread(path, case, turns))
            size = path.stat().st_size + sum(
                p.stat().st_size for p in folder.glob(path.name + "-*")
            )
            figures.append((requests, size, call))
        (n, before, call_before), (_, after, call_after) = figures
        label = "tool, each call" if case == "tool" else case
        print(
            f"{label:<16} {n:>8} {before:>13,} {before // n:>12,} {after:>13,} {after // n:>12,} "
            f"{call_before:>17,} {call_after:>9,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--postgres", help="also record into Postgres at this URL (a new schema)")
    parser.add_argument("--image-turns", type=int, default=20, help="turns of the image table")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="plait-trace-bench-"))
    if args.rounds > 0:
        _timings(args, folder)
    if args.image_turns > 0:
        _image_table(folder, args.image_turns)


def _timings(args: argparse.Namespace, folder: Path) -> None:
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
