"""A worker process for the durability tests and bench: runs durable 30-step turns, or recovers.

``python durable_worker.py run|recover|plain SYSDB STORE SIDE TURNS STEPS [SCHEMA]``:

* ``run`` starts ``TURNS`` turns at once (threads ``t0``…, workflows ``wf-t0``…) and prints
  ``started`` once every workflow is recorded, then ``done`` when they finish;
* ``recover`` launches DBOS (which recovers this executor's pending turns), waits for them, and
  prints one JSON line: each turn's workflow status and its thread (pairs intact, answered);
* ``plain`` runs the same turns without durability and prints the seconds each took (bench);
* ``resume`` answers every paused turn's pending calls (``Answer``), then waits as ``recover``.

``$PLAIT_DURABLE_IN_FLIGHT`` (``pause`` or ``error``, default ``error``) is the
``DurableAgent``'s ``in_flight``; ``$PLAIT_DURABLE_WARMUP=1`` runs one untimed turn first
(``run`` and ``plain``: the bench measures a warm worker).

``SYSDB`` is the DBOS system database URL, ``STORE`` a SQLite path or a ``postgresql://`` URL for
the thread store, ``SIDE`` a SQLite file whose ``runs`` table gets one row per real execution of
a tool (call id, tool name, pid). Every 7th step calls ``charge`` (``idempotent=False``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from typing import Any

from plait import Agent, FunctionModel, ToolCall, ToolContext, tool
from plait.messages import AssistantMessage, ToolMessage, UserMessage
from plait.models.base import ModelRequest
from plait.runtime.pause import Answer, paused_dispatch
from plait.stores.base import ThreadStore

LEASE_TTL_S = 1.0
HANG_VARIABLE = "PLAIT_DURABLE_HANG_IN_CHARGE"
"""Set in a ``run`` worker's environment: ``charge`` never returns once it has run."""


def side_record(path: str, call_id: str, name: str) -> None:
    with sqlite3.connect(path, timeout=30) as db:
        db.execute("CREATE TABLE IF NOT EXISTS runs (call_id TEXT, name TEXT, pid INTEGER)")
        db.execute("INSERT INTO runs VALUES (?, ?, ?)", (call_id, name, os.getpid()))


def build(side: str, steps: int) -> tuple[FunctionModel, list[Any]]:
    @tool
    async def record(k: int, ctx: ToolContext) -> str:
        """Record step k."""
        await asyncio.to_thread(side_record, side, ctx.call.id, "record")
        return f"recorded {k}"

    @tool(idempotent=False)
    async def charge(k: int, ctx: ToolContext) -> str:
        """Charge for step k (not idempotent)."""
        await asyncio.to_thread(side_record, side, ctx.call.id, "charge")
        if os.environ.get(HANG_VARIABLE):  # the test kills the worker right here
            await asyncio.Event().wait()
        return f"charged {k}"

    def answer(request: ModelRequest) -> Any:
        messages = request.messages
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        tag = messages[start].text
        k = sum(isinstance(m, ToolMessage) for m in messages[start:])
        if k >= steps:
            return f"{tag}: {k} steps"
        name = "charge" if k % 7 == 6 else "record"
        return ToolCall(f"{tag}-c{k}", name, {"k": k})

    return FunctionModel(answer), [record, charge]


async def store_for(target: str, schema: str) -> ThreadStore:
    if target.startswith("postgresql://"):
        from plait.stores.postgres import PostgresThreadStore

        store = PostgresThreadStore(target, lease_ttl=LEASE_TTL_S, schema=schema or "public")
        await store.setup()  # safe from several workers at once
        return store
    from plait.stores.sqlite import SQLiteThreadStore

    return SQLiteThreadStore(target, lease_ttl=LEASE_TTL_S)


def thread_report(messages: list[Any]) -> dict[str, Any]:
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    last = messages[-1] if messages else None
    return {
        "calls": calls,
        "pairs_ok": calls == results,
        "answered": isinstance(last, AssistantMessage) and not last.tool_calls,
        "errors": [m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.is_error],
        "users": sum(isinstance(m, UserMessage) for m in messages),
    }


async def main(
    mode: str, sysdb: str, target: str, side: str, turns: int, steps: int, schema: str
) -> None:
    from dbos import DBOS

    from plait.durable import DurableAgent, dbos_config, recover_turns

    model, tools = build(side, steps)
    store = await store_for(target, schema)
    agent = Agent(model, tools=tools, store=store)
    limits = agent.limits
    agent.limits = type(limits)(model_calls_per_turn=steps + 5)
    tags = [f"{schema or 't'}-{i}" for i in range(turns)]
    warmup = bool(os.environ.get("PLAIT_DURABLE_WARMUP"))
    if mode == "plain":
        if warmup:
            await agent.run("warm", thread_id="warm")
        for tag in tags:
            began = time.perf_counter()
            await agent.run(tag, thread_id=tag)
            print(json.dumps({"turn": tag, "seconds": time.perf_counter() - began}), flush=True)
        await store.aclose()
        return
    in_flight: Any = os.environ.get("PLAIT_DURABLE_IN_FLIGHT", "error")
    durable = DurableAgent(agent, name="worker", in_flight=in_flight)
    extra: dict[str, Any] = {"log_level": "WARNING"}
    if schema:
        extra["dbos_system_schema"] = schema
    DBOS(config=dbos_config("plait-durable-test", sysdb, **extra))
    DBOS.launch()
    if mode == "run":
        if warmup:
            await durable.run("warm", thread_id="warm")
        began = time.perf_counter()
        tasks = [
            asyncio.ensure_future(durable.run(tag, thread_id=tag, workflow_id=f"wf-{tag}"))
            for tag in tags
        ]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = await DBOS.list_workflows_async(workflow_ids=[f"wf-{t}" for t in tags])
            if len(found) == len(tags):
                break
            await asyncio.sleep(0.01)
        print("started", flush=True)
        for tag, task in zip(tags, tasks, strict=True):
            await task  # seconds since all started: one turn's time when TURNS is 1
            print(json.dumps({"turn": tag, "seconds": time.perf_counter() - began}), flush=True)
        print("done", flush=True)
    else:
        await recover_turns()
        if mode == "resume":
            for tag in tags:
                paused = paused_dispatch((await store.load(tag)).state)
                if paused is not None:
                    answers = {p.id: Answer("answered by a person") for p in paused.pending}
                    await durable.resume(tag, answers)
        report: dict[str, Any] = {}
        for tag in tags:
            status = await DBOS.get_workflow_status_async(f"wf-{tag}")
            snapshot = await store.load(tag)
            paused = paused_dispatch(snapshot.state)
            report[tag] = {
                "status": None if status is None else status.status,
                "pending": [] if paused is None else [p.to_json() for p in paused.pending],
                **thread_report(snapshot.messages),
            }
        print(json.dumps(report), flush=True)
    await store.aclose()  # before DBOS.destroy(), which shuts the loop's default executor
    DBOS.destroy()


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]), a[6] if len(a) > 6 else ""))
