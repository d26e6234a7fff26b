"""Durable turns on DBOS (issue 26): kill -9 at random points, recovery, and the cost per step.

Two tables:

1. Recovery: each round, per backend (SQLite files; Postgres for both the DBOS journal and the
   thread store with ``--postgres URL`` or ``$PLAIT_TEST_POSTGRES_URL``), a worker process runs
   ``--turns`` turns of ``--steps`` tool calls at once (every 7th tool ``idempotent=False``) and
   is killed with SIGKILL once a random number of tool executions is recorded; a second worker
   recovers. Printed: turns recovered (answered, pairs intact), tool executions per call id
   (histogram), and non-idempotent calls run twice (target 0).
2. Added latency per step: one turn of ``--steps`` steps, durable (DBOS steps) and plain (the
   same agent, no DBOS), each in a fresh process, interleaved round by round; the median of the
   paired per-round differences, divided by the number of steps (a step = one model call + one
   tool call + one append: three DBOS steps, four for a non-idempotent tool). "cold" is the
   first turn of a process (imports, SQLAlchemy's statement cache, DBOS's first workflow);
   "warm" the turn after one untimed turn in the same process, which is what a long-lived
   worker pays per step.

Run from the repository: ``python bench/durable.py --rounds 3`` (a few minutes on 2 cores);
``--kills 0`` skips the recovery table.
"""

from __future__ import annotations

import argparse
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
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

WORKER = Path(__file__).parents[1] / "tests" / "durable" / "durable_worker.py"


def executions(side: Path) -> Counter[str]:
    if not side.exists():
        return Counter()
    with sqlite3.connect(side, timeout=30) as db:
        try:
            return Counter(r[0] for r in db.execute("SELECT call_id FROM runs"))
        except sqlite3.OperationalError:
            return Counter()


def worker(
    mode: str, args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), mode, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def backend_args(backend: str, folder: Path, postgres: str | None) -> tuple[list[str], str]:
    if backend == "sqlite":
        return [f"sqlite:///{folder / 'dbos.sqlite'}", str(folder / "threads.db")], ""
    assert postgres is not None
    return [postgres, postgres], f"b{uuid.uuid4().hex[:10]}"


def kill_round(
    backend: str, turns: int, steps: int, postgres: str | None, rng: random.Random
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        side = folder / "side.db"
        pair, schema = backend_args(backend, folder, postgres)
        args = [*pair, str(side), str(turns), str(steps), schema]
        target = rng.randint(1, turns * steps - 2)
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "run", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while sum(executions(side).values()) < target and time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = worker("recover", args)
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
        runs = executions(side)
    recovered = sum(
        t["status"] == "SUCCESS" and t["pairs_ok"] and t["answered"] and len(t["calls"]) == steps
        for t in report.values()
    )
    calls = [c for t in report.values() for c in t["calls"]]
    charges = [c for t in report.values() for k, c in enumerate(t["calls"]) if k % 7 == 6]
    return {
        "recovered": recovered,
        "turns": turns,
        "histogram": Counter(min(runs[c], 3) for c in calls),
        "charge_reruns": sum(runs[c] > 1 for c in charges),
        "charge_errors": sum(c in t["errors"] for t in report.values() for c in charges),
    }


def turn_seconds(mode: str, backend: str, steps: int, postgres: str | None, warm: bool) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pair, schema = backend_args(backend, folder, postgres)
        env = {"PLAIT_DURABLE_WARMUP": "1"} if warm else {}
        done = worker(mode, [*pair, str(folder / "side.db"), "1", str(steps), schema], env)
        if done.returncode != 0:
            raise SystemExit(f"{mode} worker failed:\n{done.stderr[-2000:]}")
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        return float(lines[0]["seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kills", type=int, default=None, help="kill rounds (default: rounds)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--postgres", default=os.environ.get("PLAIT_TEST_POSTGRES_URL"))
    parser.add_argument("--seed", type=int, default=None)
    options = parser.parse_args()
    backends = ["sqlite", *(["postgres"] if options.postgres else [])]
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    kills: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    kill_rounds = options.rounds if options.kills is None else options.kills
    added: dict[tuple[str, bool], list[float]] = {
        (b, w): [] for b in backends for w in (False, True)
    }
    plain: dict[tuple[str, bool], list[float]] = {
        (b, w): [] for b in backends for w in (False, True)
    }
    for r in range(max(options.rounds, kill_rounds)):
        for backend in backends:  # interleaved round by round
            if r < kill_rounds:
                kills[backend].append(
                    kill_round(backend, options.turns, options.steps, options.postgres, rng)
                )
            if r >= options.rounds:
                continue
            for warm in (False, True):
                order = ["run", "plain"] if rng.random() < 0.5 else ["plain", "run"]
                seconds = {
                    m: turn_seconds(m, backend, options.steps, options.postgres, warm)
                    for m in order
                }
                added[backend, warm].append((seconds["run"] - seconds["plain"]) / options.steps)
                plain[backend, warm].append(seconds["plain"] / options.steps)
    load = os.getloadavg()[0]
    print(
        f"durable turns: {kill_rounds} kills per backend, {options.turns} turns x "
        f"{options.steps} steps, seed {seed}, load {load:.1f}"
    )
    print()
    print(
        "| backend | turns recovered | executions per call id (0 / 1 / 2 / 3+) "
        "| non-idempotent re-run | non-idempotent in flight -> error result |"
    )
    print("|---|---|---|---|---|")
    for backend in backends:
        rows = kills[backend]
        hist: Counter[int] = Counter()
        for row in rows:
            hist.update(row["histogram"])
        print(
            f"| {backend} | {sum(r['recovered'] for r in rows)}/{sum(r['turns'] for r in rows)}"
            f" | {hist[0]} / {hist[1]} / {hist[2]} / {hist[3]}"
            f" | {sum(r['charge_reruns'] for r in rows)}"
            f" | {sum(r['charge_errors'] for r in rows)} |"
        )
    print()
    print(
        "| backend | worker | plain, per step (median) | added by DBOS per step (median of "
        "paired differences) |"
    )
    print("|---|---|---|---|")
    for backend in backends:
        for warm in (False, True):
            print(
                f"| {backend} | {'warm' if warm else 'cold'} "
                f"| {statistics.median(plain[backend, warm]) * 1000:.2f} ms "
                f"| {statistics.median(added[backend, warm]) * 1000:.2f} ms |"
            )


if __name__ == "__main__":
    main()
