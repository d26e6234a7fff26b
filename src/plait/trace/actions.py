"""What the trace recorder makes of the events a turn emits (``TurnContext.observe``): an
``action`` span per middleware event (bounded fields; a provider retry also listed on its model
call, a cache break kept for the model call of its dispatch, a pause's held calls and a resume's
decisions as JSON: :mod:`plait.trace.pauses`), a ``tool`` span for a call skipped before it ran,
what the model was given when middleware replaced a result, and the relayed events of a subagent
folded into its record (:mod:`plait.trace.tree`)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from plait.errors import clipped
from plait.messages import new_id
from plait.middleware.context import Event
from plait.runtime.events import (
    RUNTIME_EVENTS,
    SubagentEventRelayed,
    ToolCallFinished,
    TurnPaused,
    TurnResumed,
)
from plait.trace import pauses, tree
from plait.trace.values import field, output_text
from plait.trace.writer import RunTrace

__all__ = ["RETRY_EVENTS", "observe"]

RETRY_EVENTS = frozenset({"model_call_retried"})
"""Event types of a provider retry: recorded as an action and listed on the model call they
happened in (``retries``)."""


def observe(trace: RunTrace, event: Event, preview_chars: int) -> None:
    """Record ``event`` (observed in the turn) in ``trace``'s batch: an ``action`` span unless
    the turn loop emitted it (``RUNTIME_EVENTS``); a skipped call's ``tool`` span; what the
    model saw of a replaced result; a relayed subagent event in its child's record."""
    if isinstance(event, SubagentEventRelayed):  # the child's run, not actions of ours
        tree.relay(trace.children, event, trace.dispatch)
        return
    if isinstance(event, ToolCallFinished):
        if event.skipped_by is not None:
            _skipped(trace, event, preview_chars)
        else:
            _model_saw(trace, event, preview_chars)
    if event.type in RUNTIME_EVENTS:
        return
    now = time.time()
    data = _event_data(trace, event)
    if event.type in RETRY_EVENTS and trace.call is not None:
        trace.call.setdefault("retries", []).append({"at": now, **data})
    trace.batch.spans.append(
        {
            "id": new_id(),
            "run_id": trace.run["id"],
            "kind": "action",
            "name": event.type,
            "dispatch": trace.dispatch,
            "started": now,
            "finished": now,
            "data": data,
        }
    )


def _event_data(trace: RunTrace, event: Event) -> dict[str, Any]:
    """An action's fields, bounded; a pause's held calls and a resume's decisions as JSON
    (:mod:`plait.trace.pauses`); a cache break is kept for its model call."""
    if isinstance(event, TurnPaused):  # the run ends paused (see TraceRecorder._finish)
        trace.paused = True
        return pauses.paused_data(event)
    if isinstance(event, TurnResumed):
        if not trace.run["input"]:
            trace.run["input"] = pauses.resume_label(event)
        return pauses.resumed_data(event)
    data = {
        f.name: field(getattr(event, f.name)) for f in dataclasses.fields(event) if f.name != "type"
    }
    if event.type == "cache_broken":
        trace.cache_broken = data
    return data


def _model_saw(trace: RunTrace, event: ToolCallFinished, preview_chars: int) -> None:
    """When ``after_tool_call`` middleware replaced a result (an eviction), keep what the
    model was given on the tool span (the span is still in the turn's batch, or is written
    again: rows upsert by id)."""
    span = trace.tools.pop(event.call.id, None)
    if span is None:
        return
    text = output_text(event.result.data)
    data = span["data"]
    if data.get("projected") or text == data.get("preview"):
        return
    data["model_saw"] = clipped(text, preview_chars)
    if not any(s is span for s in trace.batch.spans):
        trace.batch.spans.append(span)


def _skipped(trace: RunTrace, event: ToolCallFinished, preview_chars: int) -> None:
    """A call that never reached ``wrap_tool_call`` (rejected or skipped by middleware)."""
    now = time.time()
    text = output_text(event.result.data)
    trace.batch.spans.append(
        {
            "id": new_id(),
            "run_id": trace.run["id"],
            "kind": "tool",
            "name": event.call.name,
            "dispatch": event.dispatch,
            "started": now,
            "finished": now,
            "data": {
                "call_id": event.call.id,
                "args": field(event.call.args),
                "skipped_by": event.skipped_by,
                "is_error": event.result.is_error,
                "chars": len(text),
                "preview": clipped(text, preview_chars),
            },
        }
    )
