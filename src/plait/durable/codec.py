"""plait's JSON at the step boundary: every step of a durable turn returns a ``str`` of JSON
that these functions write and read (lossless for what the turn needs), so the DBOS journal never
holds a pickle, whatever serializer DBOS is configured with."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from plait.messages import Message, ToolResult, Usage, dump_messages, load_messages
from plait.models.base import ModelResponse
from plait.runtime.pause import Answer, Approve, Decision, PendingCall, Reject
from plait.stores.base import ThreadSnapshot

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "dump_decisions",
    "dump_response",
    "dump_result",
    "dump_snapshot",
    "load_decisions",
    "load_response",
    "load_result",
    "load_snapshot",
]


@functools.cache
def _adapter(kind: type[Any]) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def dump_response(response: ModelResponse, tools: list[str]) -> str:
    """A model step's record: the response and the tool names the request offered."""
    body = _adapter(ModelResponse).dump_python(response, mode="json")
    return json.dumps({"tools": tools, "response": body})


def load_response(text: str) -> tuple[ModelResponse, list[str]]:
    data = json.loads(text)
    response: ModelResponse = _adapter(ModelResponse).validate_python(data["response"])
    return response, list(data["tools"])


def dump_result(name: str, result: ToolResult) -> str:
    """A tool step's record: the call's name and its result."""
    body = _adapter(ToolResult).dump_python(result, mode="json")
    return json.dumps({"name": name, "result": body})


def load_result(text: str) -> tuple[str, ToolResult]:
    data = json.loads(text)
    result: ToolResult = _adapter(ToolResult).validate_python(data["result"])
    return str(data["name"]), result


def dump_snapshot(snapshot: ThreadSnapshot) -> str:
    return json.dumps(
        {
            "thread_id": snapshot.thread_id,
            "messages": dump_messages(snapshot.messages),
            "state": snapshot.state,
            "version": snapshot.version,
        }
    )


def load_snapshot(text: str) -> ThreadSnapshot:
    data = json.loads(text)
    return ThreadSnapshot(
        data["thread_id"], load_messages(data["messages"]), data["state"], data["version"]
    )


def dump_run(
    output: str,
    thread_id: str,
    new: list[Message],
    usage: Usage,
    state: Any,
    pending: Sequence[PendingCall] = (),
) -> str:
    """A turn workflow's return value (``pending``: the calls a paused turn waits on)."""
    return json.dumps(
        {
            "output": output,
            "thread_id": thread_id,
            "new_messages": dump_messages(new),
            "usage": _adapter(Usage).dump_python(usage, mode="json"),
            "state": state,
            "pending": [p.to_json() for p in pending],
        }
    )


def load_run(text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    data["new_messages"] = load_messages(data["new_messages"])
    data["usage"] = _adapter(Usage).validate_python(data["usage"])
    data["pending"] = [PendingCall.from_json(p) for p in data.get("pending", ())]
    return data


def dump_decisions(decisions: Mapping[str, Decision]) -> str:
    """A resume workflow's decisions as JSON (the workflow's input)."""
    out: dict[str, Any] = {}
    for call_id, d in decisions.items():
        if isinstance(d, Approve):
            out[call_id] = {"kind": "approve", "args": d.args, "by": d.by}
        elif isinstance(d, Reject):
            out[call_id] = {"kind": "reject", "message": d.message, "by": d.by}
        else:
            out[call_id] = {"kind": "answer", "result": d.result, "by": d.by}
    return json.dumps(out)


def load_decisions(text: str) -> dict[str, Decision]:
    decisions: dict[str, Decision] = {}
    for call_id, d in json.loads(text).items():
        if d["kind"] == "approve":
            decisions[call_id] = Approve(d["args"], d["by"])
        elif d["kind"] == "reject":
            decisions[call_id] = Reject(d["message"], d["by"])
        else:
            decisions[call_id] = Answer(d["result"], d["by"])
    return decisions
