"""A real ``plait serve`` process for the serve tests and the bench: ``myapp:agent`` (the fake
agent of ``tests/serve/myapp.py``) copied into a folder and served by uvicorn on a free
127.0.0.1 port, its standard error (the access log) kept in a file."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from plait.trace.server import free_port

MYAPP = Path(__file__).parents[1] / "serve" / "myapp.py"
START_DEADLINE = 60.0
"""Seconds a server may take to answer ``/healthz`` before the fixture fails."""


@dataclass(slots=True)
class ServeProcess:
    url: str
    token: str | None
    process: subprocess.Popen[bytes]
    log: Path
    folder: Path

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextlib.contextmanager
def serve_process(
    folder: Path,
    *,
    token: str | None = None,
    workers: int = 1,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    target: str | None = "myapp:agent",
) -> Iterator[ServeProcess]:
    """Run ``plait serve TARGET`` (default ``myapp:agent``; ``None``: the ``plait.toml``
    agent) in ``folder`` until the block ends (then SIGTERM, and SIGKILL after 20 s); fails if
    it does not answer ``/healthz`` within :data:`START_DEADLINE`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(MYAPP, folder / "myapp.py")
    port = free_port()
    log = folder / f"serve-{port}.log"
    full_env = {
        **os.environ,
        "PLAIT_TEST_SERVE_STORE": str(folder / "threads.sqlite3"),
        **(env or {}),
    }
    full_env.pop("PLAIT_SERVE_TOKEN", None)
    if token:
        full_env["PLAIT_SERVE_TOKEN"] = token
    command = [sys.executable, "-m", "plait", "serve", *([target] if target else [])]
    command += ["--port", str(port)]
    command += ["--workers", str(workers), *args]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=folder, env=full_env, stdout=out, stderr=out)
    served = ServeProcess(f"http://127.0.0.1:{port}", token, process, log, folder)
    try:
        _wait_healthy(served)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_healthy(served: ServeProcess) -> None:
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise AssertionError(
                f"plait serve exited {served.process.returncode}:\n{served.log_text()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(served.url + "/healthz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.05)  # a poll bounded by the deadline above
    raise AssertionError(
        f"plait serve did not answer within {START_DEADLINE} s:\n{served.log_text()}"
    )
