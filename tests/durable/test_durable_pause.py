"""Durable pause and resume across real processes on a real DBOS database (SQLite, Postgres).

One process runs a turn that pauses on a gated call and exits; another resumes it with a
decision (its model and tool calls are steps of a resume workflow); two resumes racing from two
processes (one runs, the other gets ``ResumeConflict``); ``kill -9`` in the middle of a resume
and its recovery (no completed call runs again); and a non-idempotent call in flight at a kill,
which the recovered turn pauses on instead of running it again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from postgres_server import postgres_url
from test_durable_recovery import (  # type: ignore[import-not-found]  # a sibling module
    STEPS,
    WORKER,
    _executions,
    _kill_at,
    _recover,
)

PAUSER = Path(__file__).with_name("pause_worker.py")
DEADLINE_S = 120.0


def _backend(tmp_path: Path, backend: str) -> list[str]:
    side = str(tmp_path / "side.db")
    if backend == "sqlite":
        return [f"sqlite:///{tmp_path / 'dbos.sqlite'}", str(tmp_path / "threads.db"), side, ""]
    url = postgres_url()
    return [url, url, side, f"dbos_{uuid.uuid4().hex[:12]}"]


def _pauser(mode: str, args: list[str], **env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PAUSER), mode, *args],
        env={**os.environ, **env},
        capture_output=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return out


def _started_paused(args: list[str]) -> None:
    started = _pauser("start", args)
    assert started["paused"] and started["status"] == "SUCCESS"  # the workflow holds nothing
    assert [p["id"] for p in started["pending"]] == ["c-mail"]
    assert started["thread"]["pairs_ok"] and started["thread"]["calls"] == []


EXPECTED = {
    "approve": ("sent to a", {"to": "a"}, 1),
    "edit": ("sent to b", {"to": "b"}, 1),
    "reject": ("no mail today", {"to": "a"}, 0),
    "answer": ("sent by hand", {"to": "a"}, 0),
}


@pytest.mark.parametrize(
    ("backend", "kind"),
    [
        ("sqlite", "approve"),
        ("sqlite", "edit"),
        ("sqlite", "reject"),
        ("sqlite", "answer"),
        ("postgres", "approve"),
        ("postgres", "reject"),
    ],
)
def test_a_durable_turn_paused_in_one_process_is_resumed_in_another(
    tmp_path: Path, backend: str, kind: str
) -> None:
    args = _backend(tmp_path, backend)
    _started_paused(args)
    resumed = _pauser("resume", args, PLAIT_PAUSE_DECISION=kind)
    text, mail_args, sends = EXPECTED[kind]
    assert resumed["outcome"] == "ok" and resumed["output"] == "all done"
    assert resumed["thread"]["calls"] == ["c-r0", "c-mail", "c-r1", "c-r2", "c-r3"]
    assert resumed["thread"]["pairs_ok"] and resumed["thread"]["answered"]
    assert resumed["results"]["c-mail"] == text and resumed["mail_args"] == [mail_args]
    steps = resumed["steps"]  # the resumed part's model and tool calls are steps
    assert ("plait.tool:send_email:c-mail" in steps) == (sends == 1)
    assert {"plait.model:1", "plait.tool:record:c-r1", "plait.model:4"} <= set(steps)
    runs = _executions(Path(args[2]))
    assert runs["c-mail"] == sends and runs["c-r0"] == 1 and runs["c-r3"] == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_two_resumes_racing_from_two_processes_one_runs_the_other_gets_resume_conflict(
    tmp_path: Path, backend: str
) -> None:
    args = _backend(tmp_path, backend)
    _started_paused(args)
    gate = tmp_path / "go"
    env = {**os.environ, "PLAIT_PAUSE_GATE": str(gate)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(PAUSER), "resume", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for proc in procs:  # both are launched and waiting: then they go at once
        assert proc.stdout is not None
        assert proc.stdout.readline().decode().strip() == "ready"
    gate.touch()
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0, stderr.decode()[-3000:]
        outs.append(json.loads(stdout.decode().strip().splitlines()[-1]))
    assert sorted(o["outcome"] for o in outs) == ["conflict", "ok"]
    conflict = next(o for o in outs if o["outcome"] == "conflict")
    assert "ran nothing" in conflict["message"]
    runs = _executions(Path(args[2]))
    assert runs["c-mail"] == 1 and all(runs[f"c-r{k}"] == 1 for k in range(4))
    assert outs[0]["thread"]["answered"] or outs[1]["thread"]["answered"]


def _kill_in_resume(args: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(PAUSER), "resume", *args],
        env={**os.environ, "PLAIT_PAUSE_HANG_AT": "2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + DEADLINE_S
    try:
        while _executions(Path(args[2]))["c-r2"] < 1:  # record(2) hangs once it has run
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "the resume never reached record(2)"
            time.sleep(0.005)  # a deadline-bounded poll of the side table
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_kill_9_mid_resume_is_recovered_without_rerunning_a_completed_call(
    tmp_path: Path, backend: str
) -> None:
    args = _backend(tmp_path, backend)
    _started_paused(args)
    _kill_in_resume(args)
    before: Counter[str] = _executions(Path(args[2]))
    assert before["c-mail"] == 1 and before["c-r1"] == 1 and before["c-r3"] == 0
    recovered = _pauser("recover", args)
    assert any(w.startswith("plait-resume:") for w in recovered["recovered"])
    assert recovered["thread"]["calls"] == ["c-r0", "c-mail", "c-r1", "c-r2", "c-r3"]
    assert recovered["thread"]["pairs_ok"] and recovered["thread"]["answered"]
    runs = _executions(Path(args[2]))
    assert runs["c-mail"] == 1 and runs["c-r0"] == 1 and runs["c-r1"] == 1  # completed: once
    assert runs["c-r2"] == 2 and runs["c-r3"] == 1  # the call in flight at the kill: again


@pytest.mark.slow
def test_a_non_idempotent_call_in_flight_at_a_kill_becomes_a_pending_decision(
    tmp_path: Path,
) -> None:
    side = tmp_path / "side.db"
    args = [f"sqlite:///{tmp_path / 'dbos.sqlite'}", str(tmp_path / "threads.db"), str(side)]
    args += ["1", str(STEPS), ""]
    pause = {"PLAIT_DURABLE_IN_FLIGHT": "pause"}
    # charge (step 6) hangs once it has run: the kill lands while it is in flight
    _kill_at(args, side, 7, env={"PLAIT_DURABLE_HANG_IN_CHARGE": "1", **pause})
    os.environ.update(pause)
    try:
        (turn,) = _recover(args).values()
        assert turn["status"] == "SUCCESS" and not turn["answered"] and turn["pairs_ok"]
        (pending,) = turn["pending"]
        assert pending["id"] == "t-0-c6" and pending["name"] == "charge"
        assert "was running when the worker executing this turn stopped" in pending["reason"]
        assert _executions(side)["t-0-c6"] == 1  # not run again without a decision
        done = subprocess.run(
            [sys.executable, str(WORKER), "resume", *args],
            capture_output=True,
            timeout=DEADLINE_S,
            check=False,
        )
    finally:
        for key in pause:
            os.environ.pop(key, None)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    (after,) = json.loads(done.stdout.decode().strip().splitlines()[-1]).values()
    assert after["answered"] and after["pairs_ok"] and after["pending"] == []
    assert after["calls"] == [f"t-0-c{k}" for k in range(STEPS)]
    runs = _executions(side)
    assert all(runs[f"t-0-c{k}"] == 1 for k in range(STEPS) if k != 6)
    assert runs["t-0-c6"] == 1  # answered by a person: it ran once, before the kill
