"""A frozen Postgres server: time from freezing it to the typed error, against the deadline.

    python bench/postgres_stall.py [--deadline 2] [--rounds 3]

Starts a throwaway cluster and its PgBouncer (``.ci/postgres.sh``, as the tests do), then for each
way in (direct, through PgBouncer) and each call (a store ``append``, a ``load``, a lease
acquisition, a backend write) freezes the server (``SIGSTOP`` on the postmaster and its
backends), times the call from the freeze to its ``StoreTimeoutError``, and thaws it. Two more
rows: a ``load`` with a 600 s deadline cancelled while it waits on the frozen server (time from
``cancel()`` to its ``CancelledError``; psycopg alone takes up to 10 s there), and a whole turn
whose dispatch write meets the frozen server (time from the freeze, made by the model, to
``agent.run`` raising: the write's deadline, then the lease release's, which is cut at the
same deadline). Target for each call: the deadline + 1 s. Medians and maxima over ``--rounds``.
A direct call spends 0.5 s (``CANCEL_TIMEOUT_S``) of its margin on a cancel request the frozen
server never acknowledges; behind PgBouncer none is sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))

from postgres_server import ThrowawayCluster, throwaway_cluster

from plait import Agent
from plait.backends.postgres import PostgresBackend
from plait.backends.postgres_deadline import CANCEL_TIMEOUT_S
from plait.errors import PlaitError, StoreTimeoutError
from plait.messages import UserMessage
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel
from plait.stores.postgres import PostgresThreadStore


async def until_usable(store: PostgresThreadStore) -> None:
    give_up = time.monotonic() + 60
    while True:
        try:
            await store.load("warm-up")
            return
        except PlaitError:
            if time.monotonic() > give_up:
                raise
            await asyncio.sleep(0.05)


async def timed_error(cluster: ThrowawayCluster, call: Callable[[], Awaitable[object]]) -> float:
    cluster.freeze()
    try:
        started = time.perf_counter()
        try:
            await call()
        except StoreTimeoutError:
            return time.perf_counter() - started
        raise AssertionError("the call returned on a frozen server")
    finally:
        cluster.thaw()


async def timed_cancel(cluster: ThrowawayCluster, store: PostgresThreadStore) -> float:
    pool = await store.db.pool()
    cluster.freeze()
    try:
        call = asyncio.create_task(store.load("t"))
        for _ in range(6000):  # until the load holds the connection (30 s at most)
            if not pool.get_stats().get("pool_available", 0):
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.1)  # let it wait on the server a little
        started = time.perf_counter()
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            return time.perf_counter() - started
        raise AssertionError("the cancelled load returned")
    finally:
        cluster.thaw()


async def timed_turn(cluster: ThrowawayCluster, store: PostgresThreadStore, thread: str) -> float:
    frozen_at = 0.0

    def freeze_then_answer(request: ModelRequest) -> ModelResponse:
        nonlocal frozen_at
        cluster.freeze()
        frozen_at = time.perf_counter()
        return ModelResponse(content="never stored")

    try:
        await Agent(FunctionModel(freeze_then_answer), store=store).run("go", thread_id=thread)
    except StoreTimeoutError:
        return time.perf_counter() - frozen_at
    finally:
        cluster.thaw()
    raise AssertionError("the turn finished on a frozen server")


async def measure(
    cluster: ThrowawayCluster, deadline: float, rounds: int
) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {}
    ways = {"direct": (cluster.url, True), "pgbouncer": (cluster.pgbouncer_url, False)}
    for round_ in range(rounds):
        for way, (url, prepared) in ways.items():
            found = await one_round(cluster, url, prepared, deadline, f"t-{way}-{round_}")
            for name, value in found.items():
                figures.setdefault(f"{name}|{way}", []).append(value)
    return figures


async def one_round(
    cluster: ThrowawayCluster, url: str, prepared: bool, deadline: float, thread: str
) -> dict[str, float]:
    store = PostgresThreadStore(
        url,
        schema="bench",
        prepared_statements=prepared,
        timeout=deadline,
        lease_ttl=max(1.0, deadline),
    )
    blobs = PostgresBackend(store.db)
    patient = PostgresThreadStore(
        url, schema="bench", prepared_statements=prepared, timeout=600, max_size=1
    )
    await store.setup()
    version = await store.append(thread, [UserMessage("kept")], expected_version=0)

    async def lease() -> None:
        async with store.lease(f"{thread}-lease"):
            pass

    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "store append": lambda: store.append(
            thread, [UserMessage("lost")], expected_version=version
        ),
        "store load": lambda: store.load(thread),
        "lease acquire": lease,
        "backend write": lambda: blobs.write(f"{thread}/blob", "lost"),
    }
    found: dict[str, float] = {}
    for name, call in calls.items():
        found[name] = await timed_error(cluster, call)
        await until_usable(store)
    await until_usable(patient)
    found["cancelled load"] = await timed_cancel(cluster, patient)
    await until_usable(store)
    found["turn"] = await timed_turn(cluster, store, f"{thread}-turn")
    await until_usable(store)
    await patient.aclose()
    await store.aclose()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with throwaway_cluster() as cluster:
        figures = asyncio.run(measure(cluster, args.deadline, args.rounds))
    d = args.deadline
    # A turn waits out two calls: its write, then its lease release (cut at the same deadline).
    targets = {
        "cancelled load": (0.0, "cancel + 1 s"),
        "turn": (2 * (d + CANCEL_TIMEOUT_S), "2 x (deadline + 0.5 s) + 1 s"),
    }
    print(
        f"frozen Postgres, deadline {d:g} s, {args.rounds} rounds, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'call':<16}{'via':<11}{'bound':>8}{'median':>9}{'max':>8}{'over bound':>12}"
        f"  {'target':<20}"
    )
    for key, values in figures.items():
        name, way = key.split("|")
        bound, target = targets.get(name, (d, "deadline + 1 s"))
        worst = max(values)
        met = "met" if worst <= bound + 1.0 else "NOT met"
        print(
            f"{name:<16}{way:<11}{bound:>7.2f}s{statistics.median(values):>8.2f}s"
            f"{worst:>7.2f}s{worst - bound:>+11.2f}s  {target} ({met})"
        )


if __name__ == "__main__":
    main()
