"""Several worker processes on one store, with kill -9 and a server restart: the small version
of ``bench/store_load.py`` (which checks every invariant and exits 1 on a violation)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from postgres_server import fresh_schema, postgres_url, throwaway_cluster

pytestmark = pytest.mark.slow  # run once in CI, on the first Python (.ci/run)

SCRIPT = Path(__file__).parents[2] / "bench" / "store_load.py"


def load(*args: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--workers", "3", "--threads", "4", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    report: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["problems"] == []
    return report


def test_workers_sharing_sqlite_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    report = load("--store", str(tmp_path / "threads.sqlite3"), "--turns", "12", "--verify")
    assert report["finished_workers"] == 3
    assert report["turns_completed"] == 36
    assert report["errors"] == {}


async def test_workers_sharing_postgres_lose_and_duplicate_nothing() -> None:
    async with fresh_schema(postgres_url()) as schema:
        report = load("--store", postgres_url(), "--schema", schema, "--turns", "12", "--verify")
    assert report["finished_workers"] == 3
    assert report["turns_completed"] == 36
    assert report["errors"] == {}


async def test_workers_killed_mid_turn_leave_valid_threads_others_can_use() -> None:
    async with fresh_schema(postgres_url()) as schema:
        report = load(
            "--store",
            postgres_url(),
            "--schema",
            schema,
            "--turns",
            "400",
            "--kill",
            "2",
            "--fault-after",
            "1.5",
        )
    assert report["finished_workers"] == 1
    assert report["turns_completed"] == 400


async def test_workers_survive_a_server_restart_with_nothing_lost() -> None:
    # A server of its own: restarting the shared one would cut other tests' connections.
    with throwaway_cluster() as own:
        report = load(
            "--store",
            own.url,
            "--turns",
            "60",
            "--restart",
            str(own.directory),
            "--fault-after",
            "1",
        )
    assert report["finished_workers"] == 3
    # A turn in flight while the server is down may fail, typed (StoreError), nothing written
    # half; the script's checks (exit 0) prove no completed dispatch was lost or duplicated.
    # A restart slower than the 2 s lease (a loaded machine) lets another worker take the
    # thread: the first worker's next write is then a typed ThreadConflictError, as designed.
    errors = report["errors"]
    assert isinstance(errors, dict)
    assert set(errors) <= {"StoreError", "ThreadConflictError"}
    completed = report["turns_completed"]
    assert isinstance(completed, int)
    assert completed + sum(errors.values()) == 180
