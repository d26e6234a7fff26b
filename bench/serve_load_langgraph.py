"""``langgraph dev`` under ``bench/serve_load.py``'s load: the graph it serves and the process.

Runs in its own virtual environment, never plait's (``langgraph dev`` is LangGraph's in-memory
Agent Protocol server, ``langgraph-api`` with ``langgraph-runtime-inmem``; plait depends on
none of it). It installs from PyPI and runs offline (no license key: "No license key or control
plane API key set, skipping metadata loop"). Measured with langgraph-cli 0.4.40, langgraph-api
0.16.7, langgraph-runtime-inmem 0.36.7, langgraph 1.2.24, langchain-core 1.8.3::

    python3 -m venv /work/wt/lg-venv
    /work/wt/lg-venv/bin/pip install 'langgraph-cli[inmem]==0.4.40' langgraph-api==0.16.7 \\
        langgraph-runtime-inmem==0.36.7 langgraph==1.2.24 langchain-core==1.8.3
    .venv/bin/python bench/serve_load.py --langgraph /work/wt/lg-venv

The graph (:func:`build_graph`): one async node that waits exactly 100 ms (the fake model) and
answers ``echo: TEXT`` to the last user message, on ``MessagesState``, compiled without a
checkpointer: the server brings its own (in memory, the thread's messages kept by it).

The process (:func:`langgraph_process`): ``langgraph dev --no-browser --no-reload --port P
--n-jobs-per-worker N`` in a folder holding ``langgraph.json`` (graph ``echo``: this file),
on 127.0.0.1, until ``/ok`` answers. ``--no-reload``: a bench does not edit the code it
serves, and the file watcher is a second process. ``--n-jobs-per-worker N`` with N the number of
conversations: ``langgraph dev`` runs 1 run at a time unless told (``langgraph_api.cli``
defaults ``N_JOBS_PER_WORKER`` to 1, although its ``--help`` says 10), which makes 200
conversations a queue of one. Its run queue, when it found no pending run, sleeps 0.5 s before
looking again (``langgraph_runtime_inmem.ops.Runs.next``): a turn that arrives at an idle queue
waits up to 0.5 s before it starts, which is part of what it measures here. Its logs (a line per
request and three per run) go to the log file at their default level, as it ships.

Imported in plait's venv for :func:`langgraph_process` (no LangGraph there: no ``graph``);
loaded by ``langgraph dev`` in its venv for ``graph``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from serve_process import ServeProcess

ASSISTANT = "echo"
"""The graph's name in ``langgraph.json``, the ``assistant_id`` of every run."""
LATENCY = 0.1
START_DEADLINE = 90.0


def build_graph() -> Any:
    """The graph ``langgraph dev`` serves: ``START -> model -> END`` on ``MessagesState``."""
    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    async def model(state: MessagesState) -> dict[str, list[AnyMessage]]:
        await asyncio.sleep(LATENCY)
        return {"messages": [AIMessage(content=f"echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile()


if importlib.util.find_spec("langgraph") is not None:
    graph = build_graph()


def langgraph_command(venv: Path) -> Path:
    """The ``langgraph`` command of ``venv``: a venv folder, or its ``bin/python``."""
    folder = venv if venv.is_dir() else venv.parent.parent
    command = folder / "bin" / "langgraph"
    if not command.exists():
        raise SystemExit(f"no {command}: pip install 'langgraph-cli[inmem]' into {folder}")
    return command


@contextlib.contextmanager
def langgraph_process(venv: Path, folder: Path, jobs: int) -> Iterator[ServeProcess]:
    """``langgraph dev`` of ``venv`` serving :func:`build_graph` from ``folder`` (its
    ``langgraph.json`` and in-memory state's files) with ``jobs`` runs at a time, until the
    block ends (SIGTERM, then SIGKILL after 20 s)."""
    from serve_process import ServeProcess

    from plait.trace.server import free_port

    folder.mkdir(parents=True, exist_ok=True)
    config = {"dependencies": ["."], "graphs": {ASSISTANT: f"{Path(__file__).resolve()}:graph"}}
    (folder / "langgraph.json").write_text(json.dumps(config))
    port = free_port()
    log = folder / "langgraph.log"
    command = [str(langgraph_command(venv)), "dev", "--no-browser", "--no-reload"]
    command += ["--port", str(port), "--n-jobs-per-worker", str(jobs)]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=out)
    served = ServeProcess(f"http://127.0.0.1:{port}", None, process, log, folder)
    try:
        _wait_ready(served)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_ready(served: ServeProcess) -> None:
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise SystemExit(
                f"langgraph dev exited {served.process.returncode}:\n{served.log_text()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(served.url + "/ok", timeout=1.0).status_code == 200:
                return
        time.sleep(0.1)  # a poll bounded by the deadline above
    raise SystemExit(f"langgraph dev did not answer within {START_DEADLINE} s")
