"""Durable turns survive ``kill -9``: real worker processes on a real DBOS system database.

A worker runs two 30-step turns (a scripted model, tools that record each real execution in a
side table, every 7th call ``idempotent=False``); the test kills it with SIGKILL once the side
table reaches a random count, and a second worker recovers. Every turn must end answered with
its pairs intact; completed tool calls ran exactly once, the one in flight at the kill at most
twice, and a non-idempotent call never ran twice (in flight, it got an error result instead).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from postgres_server import postgres_url

WORKER = Path(__file__).with_name("durable_worker.py")
TURNS, STEPS = 2, 30
DEADLINE_S = 120.0


def _executions(side: Path) -> Counter[str]:
    if not side.exists():
        return Counter()
    with sqlite3.connect(side, timeout=30) as db:
        try:
            rows = db.execute("SELECT call_id FROM runs").fetchall()
        except sqlite3.OperationalError:  # the table is not there yet
            return Counter()
    return Counter(r[0] for r in rows)


def _kill_at(args: list[str], side: Path, target: int, env: dict[str, str] | None = None) -> None:
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), "run", *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + DEADLINE_S
    try:
        while sum(_executions(side).values()) < target:
            assert worker.poll() is None, (
                worker.stderr.read().decode()[-3000:] if worker.stderr else ""
            )
            assert time.monotonic() < deadline, f"no {target} executions in {DEADLINE_S} s"
            time.sleep(0.005)  # a deadline-bounded poll of the side table
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    assert worker.returncode == -signal.SIGKILL


def _recover(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(WORKER), "recover", *args],
        capture_output=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return report


def _check(report: dict[str, Any], runs: Counter[str], target: int) -> None:
    assert len(report) == TURNS
    for tag, turn in report.items():
        assert turn["status"] == "SUCCESS", (target, tag, turn)
        assert turn["pairs_ok"] and turn["answered"] and turn["users"] == 1, (target, turn)
        assert turn["calls"] == [f"{tag}-c{k}" for k in range(STEPS)]
        twice = [c for c in turn["calls"] if runs[c] == 2]
        assert len(twice) <= 1, (target, twice)  # only the call in flight at the kill
        for k, call in enumerate(turn["calls"]):
            if k % 7 == 6:  # charge: idempotent=False, never run twice
                assert runs[call] <= 1, (target, call)
                if runs[call] == 0 or call in turn["errors"]:
                    assert call in turn["errors"], (target, call)  # in flight: an error result
            else:
                assert 1 <= runs[call] <= 2, (target, call, runs[call])
                assert call not in turn["errors"]
    assert max(runs.values()) <= 2


def _scenario(tmp_path: Path, sysdb: str, store: str, schema: str) -> None:
    side = tmp_path / "side.db"
    target = random.Random(os.urandom(8)).randint(1, TURNS * STEPS - 2)
    args = [sysdb, store, str(side), str(TURNS), str(STEPS), schema]
    _kill_at(args, side, target)
    report = _recover(args)
    _check(report, _executions(side), target)


def test_kill_9_while_a_non_idempotent_tool_runs_gives_an_error_result_and_never_reruns_it(
    tmp_path: Path,
) -> None:
    side = tmp_path / "side.db"
    args = [f"sqlite:///{tmp_path / 'dbos.sqlite'}", str(tmp_path / "threads.db"), str(side)]
    args += ["1", str(STEPS), ""]
    # charge (step 6) hangs once it has run: the kill lands while it is in flight, every time
    _kill_at(args, side, 7, env={"PLAIT_DURABLE_HANG_IN_CHARGE": "1"})
    runs = _executions(side)
    assert runs["t-0-c6"] == 1
    (turn,) = _recover(args).values()
    runs = _executions(side)
    assert turn["status"] == "SUCCESS" and turn["pairs_ok"] and turn["answered"]
    assert turn["errors"] == ["t-0-c6"]  # the model reads that it may or may not have run
    assert runs["t-0-c6"] == 1 and runs["t-0-c13"] == 1  # a later charge ran normally
    assert all(runs[f"t-0-c{k}"] == 1 for k in range(STEPS))


def test_kill_9_mid_turn_sqlite_recovers_every_turn_without_rerunning_completed_steps(
    tmp_path: Path,
) -> None:
    _scenario(tmp_path, f"sqlite:///{tmp_path / 'dbos.sqlite'}", str(tmp_path / "threads.db"), "")


def test_kill_9_mid_turn_postgres_recovers_every_turn_without_rerunning_completed_steps(
    tmp_path: Path,
) -> None:
    url = postgres_url()  # the journal and the threads on one server
    _scenario(tmp_path, url, url, f"dbos_{uuid.uuid4().hex[:12]}")
