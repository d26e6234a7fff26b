"""Subagent runs in the trace: a child's run, seen through the ``SubagentEventRelayed`` events
its parent's turn receives, recorded as one ``subagent`` span of the parent's run and nested on
the page under the parent's tool call that started it.

Recorder side (:func:`relay`, :func:`child_spans`): each child thread (``<parent thread>/<call
id>``; a grandchild's ``<child thread>/<call id>``) gets one record: its name, depth, thread,
the tool call that started it (``call_id``: the event's own field when it has one, else the last
segment of the thread id) and the thread of that call (``parent_thread``), its start and end,
status (``ok``, ``error``, ``paused``, ``unfinished``), answer or error, its **own** usage (the
sum of its dispatches; a grandchild's usage is in the grandchild's record) and its model calls,
tool calls and middleware actions as a list of steps (at most :data:`MAX_CHILD_STEPS`; past it
``dropped`` counts them); at most :data:`MAX_CHILD_RUNS` records per run. Streaming deltas are
not kept. The record is written when the parent's tool call ends (and again, upserted, when the
parent's turn ends).

View side (:func:`tree_view`): the records of a run, each with its ``parent_thread`` and
``call_id``, and the tree's usage (the run's own plus every child's own).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from plait.errors import clipped
from plait.messages import new_id
from plait.runtime.events import (
    RUNTIME_EVENTS,
    DispatchFinished,
    ErrorOccurred,
    ModelRequestSent,
    ModelResponseReceived,
    SubagentEventRelayed,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnPaused,
    TurnStarted,
)
from plait.trace.values import field, output_text

__all__ = [
    "MAX_CHILD_RUNS",
    "MAX_CHILD_STEPS",
    "ChildRun",
    "call_id_of",
    "child_spans",
    "relay",
    "tree_view",
]

MAX_CHILD_STEPS = 200
"""The most steps (model calls, tool calls, actions) one subagent record keeps."""

MAX_CHILD_RUNS = 200
"""The most subagent records one run keeps (children and grandchildren together); the events of
later ones are not recorded. The subagents' own ``TreeLimits`` usually stop the tree first."""

_USAGE = ("input", "output", "cache_read", "cache_write", "reasoning")
_STREAMED = frozenset({"text_delta_received", "reasoning_delta_received", "output_delta_received"})


@dataclasses.dataclass(slots=True)
class ChildRun:
    """One child thread's record while the parent's turn runs."""

    span_id: str
    dispatch: int
    record: dict[str, Any]
    model: dict[str, Any] | None = None
    tools: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def call_id_of(event: SubagentEventRelayed) -> str:
    """The parent's tool call id that started the child: the event's ``call_id`` when it has
    one, else the last segment of the child's thread id (``<parent thread>/<call id>``)."""
    given = getattr(event, "call_id", None)
    if isinstance(given, str) and given:
        return given
    return event.thread_id.rsplit("/", 1)[-1]


def _usage(usage: Any) -> dict[str, int]:
    return {
        "input": usage.input_tokens,
        "output": usage.output_tokens,
        "cache_read": usage.cache_read_tokens,
        "cache_write": usage.cache_write_tokens,
        "reasoning": usage.reasoning_tokens,
    }


def _child(children: dict[str, Any], event: SubagentEventRelayed, dispatch: int) -> ChildRun | None:
    found = children.get(event.thread_id)
    if isinstance(found, ChildRun):
        return found
    if len(children) >= MAX_CHILD_RUNS:
        return None
    call_id = call_id_of(event)
    suffix = "/" + call_id
    thread = event.thread_id
    parent_thread = thread[: -len(suffix)] if thread.endswith(suffix) else thread.rpartition("/")[0]
    record: dict[str, Any] = {
        "name": event.name,
        "depth": event.depth,
        "thread_id": thread,
        "call_id": call_id,
        "parent_thread": parent_thread,
        "started": time.time(),
        "finished": None,
        "status": "unfinished",
        "output": None,
        "error": None,
        "usage": dict.fromkeys(_USAGE, 0),
        "model_calls": 0,
        "tool_calls": 0,
        "steps": [],
        "dropped": 0,
    }
    child = ChildRun(new_id(), dispatch, record)
    children[thread] = child
    return child


def _step(child: ChildRun, step: dict[str, Any]) -> dict[str, Any]:
    steps = child.record["steps"]
    if len(steps) < MAX_CHILD_STEPS:
        steps.append(step)
    else:
        child.record["dropped"] += 1
    return step


def relay(children: dict[str, Any], event: SubagentEventRelayed, dispatch: int) -> None:
    """Fold one relayed event into its child's record (``dispatch``: the parent's, now)."""
    inner = event.event
    if inner.type in _STREAMED:
        return
    child = _child(children, event, dispatch)
    if child is None:
        return
    record, now = child.record, time.time()
    if isinstance(inner, TurnStarted):
        record["started"] = now
    elif isinstance(inner, ModelRequestSent):
        record["model_calls"] += 1
        model = inner.request.model or "model"
        child.model = _step(
            child, {"kind": "model", "name": model, "dispatch": inner.dispatch, "started": now}
        )
    elif isinstance(inner, ModelResponseReceived):
        if child.model is not None:
            usage = inner.message.usage
            child.model.update(finished=now, usage=_usage(usage) if usage else None)
            child.model = None
    elif isinstance(inner, ToolCallStarted):
        record["tool_calls"] += 1
        child.tools[inner.call.id] = _step(
            child,
            {
                "kind": "tool",
                "name": inner.call.name,
                "call_id": inner.call.id,
                "dispatch": inner.dispatch,
                "args": field(inner.call.args),
                "started": now,
            },
        )
    elif isinstance(inner, ToolCallFinished):
        step = child.tools.pop(inner.call.id, None)
        if step is None:  # skipped before it ran (rejected, answered)
            record["tool_calls"] += 1
            step = _step(
                child,
                {
                    "kind": "tool",
                    "name": inner.call.name,
                    "call_id": inner.call.id,
                    "dispatch": inner.dispatch,
                    "args": field(inner.call.args),
                    "started": now,
                },
            )
        step.update(
            finished=now,
            is_error=inner.result.is_error,
            skipped_by=inner.skipped_by,
            preview=clipped(output_text(inner.result.data), 500),
        )
    elif isinstance(inner, DispatchFinished):
        for key, value in _usage(inner.usage).items():
            record["usage"][key] += value
    elif isinstance(inner, TurnFinished):
        record.update(status="ok", finished=now, output=clipped(inner.output, 4_000))
    elif isinstance(inner, ErrorOccurred) and inner.fatal:
        record.update(status="error", finished=now, error=field(inner.error))
    if isinstance(inner, TurnPaused):
        record.update(status="paused", finished=now)
    if inner.type not in RUNTIME_EVENTS and not isinstance(inner, ErrorOccurred | TurnFinished):
        data = {f.name: field(getattr(inner, f.name)) for f in dataclasses.fields(inner)}
        data.pop("type", None)
        _step(child, {"kind": "action", "name": inner.type, "started": now, "data": data})
    elif isinstance(inner, ErrorOccurred) and not inner.fatal:
        _step(
            child,
            {
                "kind": "action",
                "name": inner.type,
                "started": now,
                "data": {"error": field(inner.error), "where": inner.where},
            },
        )


def child_spans(
    children: dict[str, Any], run_id: str, under: str | None = None
) -> list[dict[str, Any]]:
    """The ``subagent`` spans of the children recorded so far (those whose thread starts with
    ``under``, when given: one tool call's subtree)."""
    spans = []
    for thread, child in children.items():
        if not isinstance(child, ChildRun):
            continue
        if under is not None and thread != under and not thread.startswith(under + "/"):
            continue
        record = child.record
        finished = record["finished"] or time.time()
        spans.append(
            {
                "id": child.span_id,
                "run_id": run_id,
                "kind": "subagent",
                "name": record["name"],
                "dispatch": child.dispatch,
                "started": record["started"],
                "finished": finished,
                "data": record,
            }
        )
    return spans


def tree_view(spans: list[dict[str, Any]], own: dict[str, int]) -> dict[str, Any]:
    """The subagent records of a run's spans (parents first: by depth, then start) and the
    usage of the whole tree (``own``, the run's, plus each child's own)."""
    children = sorted(
        (s for s in spans if s["kind"] == "subagent"),
        key=lambda s: (int(s["data"].get("depth", 1)), s["started"]),
    )
    total = dict(own)
    for span in children:
        usage = span["data"].get("usage") or {}
        for key in total:
            total[key] += int(usage.get(key, 0))
    return {
        "subagents": [{"span_id": s["id"], **s["data"]} for s in children],
        "tree_usage": total,
        "tree_model_calls": sum(int(s["data"].get("model_calls", 0)) for s in children),
    }
