"""Paused turns in the trace: what waited, who decided what and when, and the link between a
paused run and the run that resumed it.

Recorder side: a ``turn_paused`` action keeps each held call as JSON (``id``, ``name``,
``args``, ``reason``, ``skill``; :func:`paused_data`); a ``turn_resumed`` action keeps the
decisions as the runtime gave them (``kind``: ``approve``, ``reject`` or ``answer``; ``by``;
edited ``args``; a rejection's ``message``), ``paused_at``, ``resumed_at`` and ``waited``
(seconds; :func:`resumed_data`). A resumed run, which has no user input of its own, is listed
as ``resume: <tool> <decision> by <who>, …`` (:func:`resume_label`). An answered call's result
is its tool span (``skipped_by: "answered"``).

View side (:func:`pause_view`): a paused run names the run that resumed it, and a resumed run
the run it resumed, matched on the thread (same thread id) by the held call ids; at most
:data:`MAX_LINK_RUNS` runs of the thread are read to find it.
"""

from __future__ import annotations

from typing import Any

from plait.errors import clipped
from plait.runtime.events import TurnPaused, TurnResumed
from plait.trace.store import TraceStore
from plait.trace.values import field

__all__ = ["MAX_LINK_RUNS", "pause_view", "paused_data", "resume_label", "resumed_data"]

MAX_LINK_RUNS = 8
"""How many runs of the thread (nearest in time first) :func:`pause_view` reads to link a paused
run and its resume."""


def paused_data(event: TurnPaused) -> dict[str, Any]:
    """The ``turn_paused`` action's fields: the dispatch and each held call as JSON."""
    return {"dispatch": event.dispatch, "pending": field([p.to_json() for p in event.pending])}


def resumed_data(event: TurnResumed) -> dict[str, Any]:
    """The ``turn_resumed`` action's fields, with ``waited`` (seconds between pause and resume)."""
    return {
        "dispatch": event.dispatch,
        "decisions": field(event.decisions),
        "paused_at": event.paused_at,
        "resumed_at": event.resumed_at,
        "waited": max(0.0, event.resumed_at - event.paused_at),
    }


def resume_label(event: TurnResumed) -> str:
    """What the run list shows for a resumed run: the decisions, briefly."""
    parts = []
    for call_id, decision in event.decisions.items():
        kind = str(decision.get("kind", "?"))
        if kind == "approve" and decision.get("args") is not None:
            kind = "approve (edited)"
        by = decision.get("by")
        parts.append(f"{call_id} {kind}" + (f" by {by}" if by else ""))
    return clipped("resume: " + ", ".join(parts), 4_000)


def _action(spans: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    found = [s for s in spans if s["kind"] == "action" and s["name"] == name]
    return found[-1] if found else None


def _pending_ids(action: dict[str, Any] | None) -> set[str]:
    pending = action["data"].get("pending") if action else None
    if not isinstance(pending, list):
        return set()
    return {str(p.get("id")) for p in pending if isinstance(p, dict)}


async def pause_view(
    store: TraceStore, run: dict[str, Any], spans: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The run's pause and resume, if it has either: ``paused`` (dispatch, held calls, the run
    that resumed it with its decisions) and ``resumed`` (the decisions joined with the held
    calls, the wait, the run it resumed)."""
    paused = _action(spans, "turn_paused") if run["status"] == "paused" else None
    resumed = _action(spans, "turn_resumed")
    if paused is None and resumed is None:
        return None
    siblings = [r for r in await store.runs(run["thread_id"]) if r["thread_id"] == run["thread_id"]]
    out: dict[str, Any] = {}
    if paused is not None:
        held = _pending_ids(paused)
        later = sorted((r for r in siblings if r["started"] > run["started"]), key=_start)
        by = await _find(
            store, later, "turn_resumed", lambda a: set(a["data"].get("decisions") or {}) >= held
        )
        out["paused"] = {
            "dispatch": paused["data"].get("dispatch"),
            "paused_at": paused["started"],
            "pending": paused["data"].get("pending") or [],
            "resumed_by": by,
        }
    if resumed is not None:
        data = resumed["data"]
        decisions = data.get("decisions") or {}
        earlier = sorted(
            (r for r in siblings if r["started"] < run["started"] and r["status"] == "paused"),
            key=_start,
            reverse=True,
        )
        source = await _find(
            store, earlier, "turn_paused", lambda a: _pending_ids(a) <= set(decisions)
        )
        pending = {
            str(p.get("id")): p for p in (source or {}).get("pending") or [] if isinstance(p, dict)
        }
        out["resumed"] = {
            "dispatch": data.get("dispatch"),
            "paused_at": data.get("paused_at"),
            "resumed_at": data.get("resumed_at"),
            "waited": data.get("waited"),
            "paused_run": None if source is None else source["run_id"],
            "calls": [
                {"id": call_id, **pending.get(call_id, {"id": call_id}), "decision": decision}
                for call_id, decision in decisions.items()
            ],
        }
    return out


def _start(run: dict[str, Any]) -> float:
    return float(run["started"])


async def _find(
    store: TraceStore, runs: list[dict[str, Any]], action: str, matches: Any
) -> dict[str, Any] | None:
    """The first of ``runs`` (at most :data:`MAX_LINK_RUNS` read) with ``action`` matching: its
    id, start, and the action's data."""
    for candidate in runs[:MAX_LINK_RUNS]:
        found = await store.run(candidate["id"])
        if found is None:
            continue
        span = _action(found[1], action)
        if span is not None and matches(span):
            return {"run_id": candidate["id"], "started": candidate["started"], **span["data"]}
    return None
