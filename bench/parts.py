"""Content parts: per-turn overhead with a 1 MB image in the thread, and blobs stored once.

1. Per-turn overhead (``bench/overhead.py``'s method: timestamps inside the fake model and tool,
   configurations interleaved round by round, a run's figure the median over its turns, added
   cost the median over rounds of the paired difference). The thread's first message holds a
   1 MB PNG (or, in the baseline, the same text without it), so every model request of the run
   carries the image. Configurations: the default agent on the memory store, the same with
   ``SummarizationMiddleware`` (it estimates every request's tokens; its trigger is never
   reached), and the default agent on a SQLite store (in ``/dev/shm`` where there is one, so
   disk syncs do not drown the figure). Target: the image adds at most 10 µs a
   turn (no per-request copy, re-encode or re-hash of its bytes).
2. Blobs stored once: a thread of 100 images, 40 of them repeats of the other 60, appended in
   20 writes, on SQLite and (with ``--postgres URL`` or ``PLAIT_TEST_POSTGRES_URL``) Postgres:
   rows and bytes in the blob table against the sum of the images' sizes, and the size of the
   message rows (and what they would be with every blob inline, as before the blob tables).
3. A load of a thread holding 20 distinct 1 MB images, on SQLite and Postgres: with its blobs
   in memory (a thread loaded every turn: no image bytes are read from the store) against a
   load after they left memory (every byte read, as every load did before), interleaved round
   by round; the median over rounds.

Run: ``python bench/parts.py [--rounds 15] [--turns 10] [--long 200] [--postgres URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import tempfile
import zlib
from pathlib import Path
from typing import Any

from overhead import Config, StampedModel, Stamps, measure, paired, stamped_tool

from plait import Agent, Limits
from plait.messages import Blob, ImagePart, Message, TextPart, UserMessage
from plait.stores import SQLiteThreadStore, ThreadStore
from plait.stores.base import messages_to_json

ADDED_TARGET_US = 10.0
"""Issue 22: a 1 MB image in the thread adds at most 10 µs a turn."""


def png(width: int, height: int) -> bytes:
    """A real RGB PNG of random pixels (they do not compress: about ``3 * width * height``
    bytes; two calls give two different images)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )


def megabyte_png() -> bytes:
    return png(577, 577)  # 1,000,000 bytes of pixels


def first_message(image: Blob | None) -> list[Message]:
    parts: list[Any] = [TextPart("go: describe the chart")]
    if image is not None:
        parts.append(ImagePart(image))
    return [UserMessage(parts)]


def agent_run(image: Blob | None, *, middleware: str = "", sqlite: Path | None = None) -> Config:
    async def run(turns: int) -> Stamps:
        stamps = Stamps()
        extra: list[Any] = []
        if middleware == "summarization":
            from plait.context import SummarizationMiddleware

            extra.append(SummarizationMiddleware(10**9))
        store: ThreadStore | None = None
        if sqlite is not None:
            store = SQLiteThreadStore(sqlite / f"{os.urandom(6).hex()}.db")
        kwargs: dict[str, Any] = {} if store is None else {"store": store}
        agent = Agent(
            StampedModel(turns, stamps),
            tools=[stamped_tool(stamps)],
            middleware=extra,
            limits=Limits(model_calls_per_turn=turns + 1),
            **kwargs,
        )
        result = await agent.run(first_message(image), thread_id="bench")
        assert result.output == "done", result.output
        if store is not None:
            await store.aclose()
        return stamps

    return run


async def stored_once(store: ThreadStore, images: list[bytes]) -> int:
    """Append a thread of 100 image parts (in 20 writes of 5) drawn from ``images``; return the
    size its message rows had with the blobs inline (as before the blob tables)."""
    order = list(range(len(images))) + [i * 3 % len(images) for i in range(100 - len(images))]
    version = 0
    for w in range(20):
        parts = [ImagePart(Blob(images[order[5 * w + k]])) for k in range(5)]
        version = await store.append("t", [UserMessage(parts)], expected_version=version)
    loaded = (await store.load("t")).messages
    assert sum(len(m.content) for m in loaded) == 100
    return sum(len(row) for row in messages_to_json("t", loaded))


async def blob_figures(postgres: str | None) -> list[tuple[str, int, int, int, int, int, int]]:
    images = [png(80 + i, 60) for i in range(60)]
    order = list(range(60)) + [i * 3 % 60 for i in range(40)]
    order_sum = sum(len(images[i]) for i in order)
    distinct = sum(len(d) for d in images)
    rows: list[tuple[str, int, int, int, int, int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteThreadStore(Path(tmp) / "t.db")
        inline = await stored_once(store, images)
        await store.aclose()
        import sqlite3

        with sqlite3.connect(Path(tmp) / "t.db") as conn:
            count, size = conn.execute(
                "SELECT COUNT(*), SUM(LENGTH(data)) FROM message_blobs"
            ).fetchone()
            (messages,) = conn.execute("SELECT SUM(LENGTH(json)) FROM messages").fetchone()
        conn.close()
        rows.append(("SQLite", count, size, order_sum, distinct, messages, inline))
    if postgres:
        import psycopg

        from plait.stores.postgres import PostgresThreadStore

        schema = f"bench_parts_{os.urandom(4).hex()}"
        pg = PostgresThreadStore(postgres, schema=schema, max_size=2)
        await pg.setup()
        try:
            inline = await stored_once(pg, images)
            async with pg.db.connection() as conn:
                cur = await conn.execute(
                    pg.db.sql(
                        "SELECT COUNT(*), SUM(octet_length(data)) FROM {s}.plait_message_blobs"
                    )
                )
                count, size = await cur.fetchone()  # type: ignore[misc]
                cur = await conn.execute(
                    pg.db.sql("SELECT SUM(octet_length(json)) FROM {s}.plait_messages")
                )
                (messages,) = await cur.fetchone()  # type: ignore[misc]
            rows.append(
                ("Postgres", int(count), int(size), order_sum, distinct, int(messages), inline)
            )
        finally:
            await pg.aclose()
            async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as c:
                await c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]
    return rows


async def load_figures(
    postgres: str | None, rounds: int, shm: str | None
) -> list[tuple[str, float, float]]:
    """Milliseconds per load of a 20 x 1 MB-image thread: blobs in memory, and not."""
    import gc
    import time

    images = [megabyte_png() for _ in range(20)]  # random pixels: 20 distinct images
    rows: list[tuple[str, float, float]] = []

    async def figures(name: str, store: ThreadStore) -> None:
        message = UserMessage([ImagePart(Blob(d)) for d in images])
        await store.append("t", [message], expected_version=0)
        del message
        live: list[float] = []
        cold: list[float] = []
        for _ in range(rounds):
            held = (await store.load("t")).messages  # in memory from here on
            start = time.perf_counter()
            again = (await store.load("t")).messages
            live.append(time.perf_counter() - start)
            assert again == held
            del held, again
            gc.collect()
            start = time.perf_counter()
            gone = (await store.load("t")).messages
            cold.append(time.perf_counter() - start)
            del gone
            gc.collect()
        rows.append((name, 1000 * statistics.median(live), 1000 * statistics.median(cold)))

    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        sqlite = SQLiteThreadStore(Path(tmp) / "load.db")
        await figures("SQLite", sqlite)
        await sqlite.aclose()
    if postgres:
        import psycopg

        from plait.stores.postgres import PostgresThreadStore

        schema = f"bench_load_{os.urandom(4).hex()}"
        pg = PostgresThreadStore(postgres, schema=schema, max_size=2)
        await pg.setup()
        try:
            await figures("Postgres", pg)
        finally:
            await pg.aclose()
            async with await psycopg.AsyncConnection.connect(postgres, autocommit=True) as c:
                await c.execute(f'DROP SCHEMA "{schema}" CASCADE')  # type: ignore[arg-type]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--long", type=int, default=200)
    parser.add_argument("--postgres", default=os.environ.get("PLAIT_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    image = Blob(megabyte_png())
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None  # no disk syncs in the figures
    with tempfile.TemporaryDirectory(dir=shm) as tmp:
        configs: dict[str, Config] = {
            "text": agent_run(None),
            "1 MB image": agent_run(image),
            "text +summarization": agent_run(None, middleware="summarization"),
            "1 MB image +summarization": agent_run(image, middleware="summarization"),
            "text, SQLite": agent_run(None, sqlite=Path(tmp)),
            "1 MB image, SQLite": agent_run(image, sqlite=Path(tmp)),
        }
        short, _ = measure(configs, args.turns, args.rounds, tail=args.turns)
        long, last = measure(configs, args.long, max(3, args.rounds // 3), tail=50)
    print(
        f"per-turn overhead, µs (median; {args.rounds} rounds of {args.turns} turns, "
        f"{max(3, args.rounds // 3)} rounds of {args.long}); image {image.size:,} bytes"
    )
    cols = (f"{args.turns} turns", f"{args.long} turns", f"{args.long}: last 50")
    print(f"{'configuration':<28}{cols[0]:>12}{cols[1]:>12}{cols[2]:>14}")
    for name in configs:
        values = [statistics.median(m[name]) for m in (short, long, last)]
        print(f"{name:<28}{values[0]:>12.1f}{values[1]:>12.1f}{values[2]:>14.1f}")
    print()
    print("added by the image, µs (median of paired differences, same round)")
    print(f"{'configuration':<36}{cols[0]:>12}{cols[1]:>12}{cols[2]:>14}  target")
    for base in ("text", "text +summarization", "text, SQLite"):
        name = base.replace("text", "1 MB image", 1)
        values = [paired(m, name, base) for m in (short, long, last)]
        print(
            f"{name + ' - text':<36}{values[0]:>12.1f}{values[1]:>12.1f}{values[2]:>14.1f}"
            f"  ≤ {ADDED_TARGET_US:.0f} µs"
        )
    print()
    print("a thread of 100 images (60 distinct, 40 repeats), 20 appends")
    print(
        f"{'store':<10}{'blob rows':>10}{'blob bytes':>12}{'100 images':>12}"
        f"{'60 distinct':>13}{'message rows':>14}{'rows inline':>13}"
    )
    for store, count, size, total, distinct, messages, inline in asyncio.run(
        blob_figures(args.postgres)
    ):
        print(
            f"{store:<10}{count:>10}{size:>12,}{total:>12,}{distinct:>13,}{messages:>14,}"
            f"{inline:>13,}"
        )
    print("(rows inline: the message rows with every blob written inline, as before)")
    print()
    print(f"a load of a thread of 20 x 1 MB images, ms (median of {args.rounds} rounds)")
    print(f"{'store':<10}{'in memory':>12}{'not in memory':>15}")
    for store, live, cold in asyncio.run(load_figures(args.postgres, args.rounds, shm)):
        print(f"{store:<10}{live:>12.2f}{cold:>15.2f}")


if __name__ == "__main__":
    main()
