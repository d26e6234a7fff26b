"""A worker process for the durable pause/resume tests: one process pauses, another resumes.

``python pause_worker.py MODE SYSDB STORE SIDE SCHEMA``, thread ``t``:

* ``start`` runs the turn: dispatch 0 calls ``record(0)`` and ``send_email`` (which
  ``requires_approval``), so the turn pauses; prints the result as one JSON line;
* ``resume`` resumes it with the decision in ``$PLAIT_PAUSE_DECISION`` (``approve``,
  ``edit``, ``reject``, ``answer``): after the decided call the model calls ``record(1..3)``,
  then answers. Prints ``{"outcome": "ok" | "conflict", ...}`` with the resume workflow's steps;
* ``recover`` recovers this executor's pending workflows and prints the thread.

With ``$PLAIT_PAUSE_HANG_AT=K`` ``record(K)`` never returns once it has run (the test kills the
worker there). ``$PLAIT_PAUSE_GATE`` (a file path): a ``resume`` waits for the file to exist
before it starts (two resumes then race; bounded by ``GATE_WAIT_S``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from durable_worker import (  # type: ignore[import-not-found]  # run as a script beside it
    side_record,
    store_for,
    thread_report,
)

from plait import Agent, FunctionModel, ToolCall, ToolContext, tool
from plait.errors import ResumeConflict
from plait.messages import ToolMessage, UserMessage
from plait.models.base import ModelRequest
from plait.runtime.pause import Answer, Approve, Decision, Reject

GATE_WAIT_S = 60.0
THREAD = "t"
MAIL_ID = "c-mail"


def build(side: str) -> tuple[FunctionModel, list[Any]]:
    hang_at = int(os.environ.get("PLAIT_PAUSE_HANG_AT", "-1"))

    @tool
    async def record(k: int, ctx: ToolContext) -> str:
        """Record step k."""
        await asyncio.to_thread(side_record, side, ctx.call.id, "record")
        if k == hang_at:
            await asyncio.Event().wait()
        return f"recorded {k}"

    @tool(requires_approval=True, idempotent=False)
    async def send_email(to: str, ctx: ToolContext) -> str:
        """Send an email (needs approval)."""
        await asyncio.to_thread(side_record, side, ctx.call.id, f"send_email:{to}")
        return f"sent to {to}"

    def answer(request: ModelRequest) -> Any:
        messages = request.messages
        start = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        done = sum(isinstance(m, ToolMessage) for m in messages[start:])
        if done == 0:
            return [
                ToolCall("c-r0", "record", {"k": 0}),
                ToolCall(MAIL_ID, "send_email", {"to": "a"}),
            ]
        k = done - 1  # record(0) and the mail are two results
        if k <= 3:
            return ToolCall(f"c-r{k}", "record", {"k": k})
        return "all done"

    return FunctionModel(answer), [record, send_email]


def decision(kind: str) -> Decision:
    if kind == "approve":
        return Approve(by="tester")
    if kind == "edit":
        return Approve({"to": "b"}, by="tester")
    if kind == "reject":
        return Reject("no mail today", by="tester")
    return Answer("sent by hand", by="tester")


def wait_gate() -> None:
    gate = os.environ.get("PLAIT_PAUSE_GATE")
    if not gate:
        return
    print("ready", flush=True)
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no gate file {gate} in {GATE_WAIT_S} s")
        time.sleep(0.001)  # a deadline-bounded poll: both resumes go at once


async def main(mode: str, sysdb: str, target: str, side: str, schema: str) -> None:
    from dbos import DBOS

    from plait.durable import DurableAgent, dbos_config, recover_turns

    model, tools = build(side)
    store = await store_for(target, schema)
    durable = DurableAgent(Agent(model, tools=tools, store=store), name="pauser")
    extra: dict[str, Any] = {"log_level": "WARNING"}
    if schema:
        extra["dbos_system_schema"] = schema
    DBOS(config=dbos_config("plait-durable-pause", sysdb, **extra))
    DBOS.launch()
    out: dict[str, Any] = {}
    if mode == "start":
        result = await durable.run("go", thread_id=THREAD, workflow_id="wf-start")
        status = await DBOS.get_workflow_status_async("wf-start")
        out = {
            "paused": result.paused,
            "pending": [p.to_json() for p in result.pending],
            "status": None if status is None else status.status,
        }
    elif mode == "resume":
        wait_gate()
        kind = os.environ.get("PLAIT_PAUSE_DECISION", "approve")
        try:
            result = await durable.resume(THREAD, {MAIL_ID: decision(kind)})
        except ResumeConflict as exc:
            out = {"outcome": "conflict", "message": str(exc)}
        else:
            (wf,) = await DBOS.list_workflows_async(name="plait.durable.resume")
            steps = await DBOS.list_workflow_steps_async(wf.workflow_id)
            out = {
                "outcome": "ok",
                "output": result.output,
                "paused": result.paused,
                "steps": [s["function_name"] for s in steps],
            }
    else:
        out["recovered"] = await recover_turns()
    snapshot = await store.load(THREAD)
    out["thread"] = thread_report(snapshot.messages)
    out["results"] = {
        m.tool_call_id: m.text for m in snapshot.messages if isinstance(m, ToolMessage)
    }
    out["mail_args"] = [
        c.args for m in snapshot.messages for c in getattr(m, "tool_calls", ()) if c.id == MAIL_ID
    ]
    print(json.dumps(out), flush=True)
    await store.aclose()
    DBOS.destroy()


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(a[0], a[1], a[2], a[3], a[4] if len(a) > 4 else ""))
