"""Many worker processes, one thread store: load, kill -9 and server-restart faults.

    python bench/store_load.py --store postgresql://... [--workers 8 --turns 200 --threads 50]
    python bench/store_load.py --store URL --store /tmp/x.sqlite3 --rounds 3  # vs SQLite
    python bench/store_load.py --store URL --kill 2         # kill -9 two random workers mid-run
    python bench/store_load.py --store URL --restart DIR    # restart the server (.ci/postgres.sh)
    --schema NAME puts the Postgres tables in that schema (default public).

Each worker process runs ``--turns`` turns on threads picked at random among ``--threads``. A
turn is two dispatches: the model calls the ``record`` tool (which writes its call id to a side
table, so every execution is counted), then answers. After the run the script checks, over every
thread: each message id stored once; every completed turn's messages stored exactly once; no tool
executed twice for one call id; every call has its result and every result its call; every
failure typed. With ``--verify`` (implied by faults) it then runs one more turn on every thread
with a lease wait longer than the lease, proving each is usable. It prints turns/s and the p50/p99
store latency per dispatch (one ``append``) and the p50 turn latency, as medians over
``--rounds`` rounds in which the stores alternate; it exits 1 if a check fails (tests use that).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from plait import Agent
from plait.errors import PlaitError, ThreadBusyError, ThreadConflictError
from plait.messages import AssistantMessage, ToolCall, ToolMessage, new_id
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel
from plait.stores.base import ThreadStore
from plait.tools import tool

LEASE_TTL_S = 2.0
LEASE_WAIT_S = 20.0


SCHEMA = os.environ.get("PLAIT_LOAD_SCHEMA", "public")


def open_store(target: str, *, lease_wait: float = LEASE_WAIT_S) -> ThreadStore:
    if target.startswith("postgres"):
        from plait.stores.postgres import PostgresThreadStore

        return PostgresThreadStore(
            target,
            schema=SCHEMA,
            lease_ttl=LEASE_TTL_S,
            lease_wait=lease_wait,
            max_size=4,
            pool_timeout=10,
        )
    from plait.stores.sqlite import SQLiteThreadStore

    return SQLiteThreadStore(target)


async def close_store(store: ThreadStore) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
    elif hasattr(store, "close"):
        store.close()


class TimedStore:
    """Delegates to ``store``, recording how long each ``append`` (one dispatch) took."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.append_s: list[float] = []
        self.load = store.load
        self.list_threads = store.list_threads
        self.delete = store.delete
        if hasattr(store, "lease"):
            self.lease = store.lease

    async def append(self, *args: Any, **kwargs: Any) -> int:
        started = time.perf_counter()
        try:
            return int(await self.store.append(*args, **kwargs))
        finally:
            self.append_s.append(time.perf_counter() - started)


class RunLog:
    """The side table of tool executions (a SQLite file shared by the workers)."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS runs (call_id TEXT, thread TEXT, pid INT)")

    def record(self, call_id: str, thread: str) -> None:
        self.conn.execute("INSERT INTO runs VALUES (?, ?, ?)", (call_id, thread, os.getpid()))


def make_agent(store: Any, log: RunLog) -> Agent:
    @tool
    def record(call_id: str, thread: str) -> str:
        """Record one execution of this call."""
        log.record(call_id, thread)
        return "recorded"

    async def respond(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return ModelResponse(content="done")
        call_id = f"call_{new_id()}"
        thread = str(last.metadata.get("thread", ""))
        return ModelResponse(
            tool_calls=[ToolCall(call_id, "record", {"call_id": call_id, "thread": thread})]
        )

    return Agent(FunctionModel(respond), tools=[record], store=store)


async def worker(target: str, log_path: str, out: str, turns: int, threads: int, seed: int) -> None:
    from plait.messages import UserMessage

    rng = random.Random(seed)
    store = TimedStore(open_store(target))
    agent = make_agent(store, RunLog(log_path))
    outcome: dict[str, Any] = {"completed": [], "errors": {}, "turn_s": []}
    started = time.perf_counter()
    for i in range(turns):
        thread = f"t{rng.randrange(threads)}"
        begun = time.perf_counter()
        try:
            result = await agent.run(
                UserMessage(f"{seed}-{i}", metadata={"thread": thread}), thread_id=thread
            )
        except (ThreadBusyError, ThreadConflictError, PlaitError) as exc:
            name = type(exc).__name__
            outcome["errors"][name] = outcome["errors"].get(name, 0) + 1
            continue
        outcome["turn_s"].append(time.perf_counter() - begun)
        outcome["completed"].append([thread, [m.id for m in result.new_messages]])
    outcome["elapsed_s"] = time.perf_counter() - started
    outcome["append_s"] = store.append_s
    await close_store(store.store)
    await asyncio.to_thread(Path(out).write_text, json.dumps(outcome))


async def verify(
    target: str, log_path: str, threads: int, outcomes: list[dict[str, Any]], usable: bool
) -> list[str]:
    """Every check of the module docstring; returns the problems found."""
    problems: list[str] = []
    store = open_store(target, lease_wait=LEASE_TTL_S * 5)
    ids_seen: dict[str, int] = {}
    calls_in_threads: set[str] = set()
    for n in range(threads):
        snapshot = await store.load(f"t{n}")
        open_calls: set[str] = set()
        for message in snapshot.messages:
            ids_seen[message.id] = ids_seen.get(message.id, 0) + 1
            if isinstance(message, AssistantMessage):
                if open_calls:
                    problems.append(f"t{n}: calls {open_calls} have no result")
                open_calls = {c.id for c in message.tool_calls}
                calls_in_threads |= open_calls
            elif isinstance(message, ToolMessage):
                if message.tool_call_id not in open_calls:
                    problems.append(f"t{n}: result {message.tool_call_id} has no call")
                open_calls.discard(message.tool_call_id)
        if open_calls:
            problems.append(f"t{n}: calls {open_calls} have no result")
    problems += [f"message {i} stored {k} times" for i, k in ids_seen.items() if k > 1]
    for outcome in outcomes:
        for thread, ids in outcome["completed"]:
            problems += [
                f"{thread}: completed message {i} missing" for i in ids if i not in ids_seen
            ]
    runs = sqlite3.connect(log_path).execute("SELECT call_id, COUNT(*) FROM runs GROUP BY call_id")
    for call_id, count in runs:
        if count > 1:
            problems.append(f"tool call {call_id} executed {count} times")
    if usable:
        agent = make_agent(store, RunLog(log_path))
        for n in range(threads):
            try:
                await agent.run("still usable?", thread_id=f"t{n}")
            except PlaitError as exc:
                problems.append(f"t{n} not usable after the run: {exc}")
    await close_store(store)
    return problems


def prepare(target: str) -> None:
    async def run() -> None:
        store = open_store(target)
        setup = getattr(store, "setup", None)
        if setup is not None:
            await setup()
            for n in range(200):
                await store.delete(f"t{n}")
        await close_store(store)

    asyncio.run(run())


def run_load(args: argparse.Namespace) -> dict[str, Any]:
    prepare(args.store)
    tmp = Path(tempfile.mkdtemp(prefix="plait-load-"))
    log_path = str(tmp / "runs.sqlite3")
    RunLog(log_path)
    procs = []
    started = time.perf_counter()
    for w in range(args.workers):
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            str(tmp / f"w{w}.json"),
            "--store",
            args.store,
            "--turns",
            str(args.turns),
            "--threads",
            str(args.threads),
            "--seed",
            str(w),
            "--log",
            log_path,
        ]
        procs.append(subprocess.Popen(cmd))
    if args.kill or args.restart:
        time.sleep(args.fault_after)
    for victim in random.sample(procs, min(args.kill, len(procs))):
        os.kill(victim.pid, signal.SIGKILL)
    if args.restart:
        subprocess.run(
            [str(Path(__file__).parents[1] / ".ci" / "postgres.sh"), "restart", args.restart],
            check=True,
        )
    for proc in procs:
        proc.wait()
    elapsed = time.perf_counter() - started
    outcomes = [json.loads(p.read_text()) for p in sorted(tmp.glob("w*.json"))]
    problems = asyncio.run(
        verify(
            args.store,
            log_path,
            args.threads,
            outcomes,
            args.verify or bool(args.kill or args.restart),
        )
    )
    appends = sorted(s for o in outcomes for s in o["append_s"])
    turns = [s for o in outcomes for s in o["turn_s"]]
    errors: dict[str, int] = {}
    for outcome in outcomes:
        for name, count in outcome["errors"].items():
            errors[name] = errors.get(name, 0) + count
    completed = sum(len(o["completed"]) for o in outcomes)
    return {
        "store": "postgres" if args.store.startswith("postgres") else "sqlite",
        "workers": args.workers,
        "finished_workers": len(outcomes),
        "turns_completed": completed,
        "turns_per_s": completed / elapsed,
        "append_p50_ms": 1000 * statistics.median(appends) if appends else 0.0,
        "append_p99_ms": 1000 * appends[int(0.99 * (len(appends) - 1))] if appends else 0.0,
        "turn_p50_ms": 1000 * statistics.median(turns) if turns else 0.0,
        "errors": errors,
        "problems": problems,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--store", action="append", required=True, help="URL or SQLite path (repeatable)"
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--kill", type=int, default=0)
    parser.add_argument("--restart", default="", help="postgres.sh cluster DIR to restart mid-run")
    parser.add_argument("--fault-after", type=float, default=2.0)
    parser.add_argument("--verify", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="stores interleaved, round by round")
    parser.add_argument("--schema", default="", help="Postgres schema (default: public)")
    parser.add_argument("--json", action="store_true", help="print one JSON line per store")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.schema:
        global SCHEMA
        SCHEMA = os.environ["PLAIT_LOAD_SCHEMA"] = args.schema  # the workers inherit it
    if args.worker:
        asyncio.run(
            worker(args.store[0], args.log, args.worker, args.turns, args.threads, args.seed)
        )
        return
    rounds: dict[str, list[dict[str, Any]]] = {target: [] for target in args.store}
    for _ in range(args.rounds):
        for target in args.store:
            single = argparse.Namespace(**{**vars(args), "store": target})
            rounds[target].append(run_load(single))
            if args.json:
                print(json.dumps(rounds[target][-1]))
    if not args.json:
        print_table(rounds, args.rounds)
    failed = any(r["problems"] for runs in rounds.values() for r in runs)
    sys.exit(1 if failed else 0)


def print_table(rounds: dict[str, list[dict[str, Any]]], count: int) -> None:
    """One row per store: medians over the rounds (turns/s, the p50/p99 store latency per
    dispatch, the p50 turn latency), errors and problems summed."""
    print(f"medians of {count} round(s), stores interleaved round by round")
    print(
        f"{'store':9} {'workers':>7} {'turns':>6} {'turns/s':>8} {'append p50':>11} "
        f"{'append p99':>11} {'turn p50':>9}  errors / problems"
    )
    for runs in rounds.values():
        first = runs[0]
        errors: dict[str, int] = {}
        problems: list[str] = []
        for r in runs:
            problems += r["problems"]
            for name, n in r["errors"].items():
                errors[name] = errors.get(name, 0) + n

        def median(key: str, rs: list[dict[str, Any]] = runs) -> float:
            return float(statistics.median(r[key] for r in rs))

        print(
            f"{first['store']:9} {first['finished_workers']:>3}/{first['workers']:<3} "
            f"{sum(r['turns_completed'] for r in runs):>6} {median('turns_per_s'):>8.1f} "
            f"{median('append_p50_ms'):>8.2f} ms {median('append_p99_ms'):>8.2f} ms "
            f"{median('turn_p50_ms'):>6.2f} ms  {errors} {len(problems)} problems {problems[:5]}"
        )


if __name__ == "__main__":
    main()
