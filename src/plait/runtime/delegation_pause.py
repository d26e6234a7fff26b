"""A paused subagent pauses its parent, and the parent's resume reaches it.

When a subagent's turn ends paused (a call of its own waits for approval), the parent's tool
call that ran it is held too (:func:`child_paused` raises :class:`~plait.runtime.pause.
PauseTurn` from the tool), listed not as itself but as each call the child holds:

==========================  =====================================================================
what                        how
==========================  =====================================================================
the parent's pending call   ``<call id>/<child's id>`` (a grandchild's: ``<call>/<child call>/
                            <grandchild call>``), with the held call's tool ``name``, ``args`` and
                            ``skill``, a ``reason`` that names the subagent, and ``subagent``
                            (:class:`~plait.runtime.pause.SubagentPending`: name, depth, thread,
                            the parent's call id, the child's own id)
the parent's turn           pauses like for any held call: ``RunResult.pending``, ``TurnPaused``,
                            the paused dispatch in the thread state; its other calls have run
the child's turn            paused on its own thread ``<parent thread>/<call id>``, as any paused
                            turn (``agent.resume`` on that thread is what the parent does)
``agent.resume(parent, d)``  ``d`` names the ids above; the parent's call runs again (approved: no
                            gate holds it twice), and :func:`~plait.runtime.delegation.
                            run_subagent` finds the decisions :func:`route_decisions` kept for it
                            and resumes the child's thread with them instead of starting a turn;
                            the child's answer is the call's result and the parent goes on
paused again                a child that pauses again pauses the parent again (resume again)
rejected whole              ``agent.run(..., on_paused="reject")`` on the parent answers the call
                            with a rejection; the child's thread stays paused (nothing runs it)
==========================  =====================================================================

The child runs in whatever process resumes the parent: its thread is in the parent's store, its
id is deterministic, and the subagent is the same definition (an agent, or a new one from its
factory). The tree's limits start afresh at a resume (a new deadline, a new model-call count).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from plait.messages import ToolCall
from plait.middleware.context import TurnContext
from plait.runtime.pause import Decision, PausedDispatch, PauseTurn, PendingCall, SubagentPending

__all__ = ["child_paused", "decisions_for", "route_decisions"]

_ROUTED = object()  # TurnContext.scratch key: {parent call id: {child's id: Decision}}


def child_paused(
    name: str, depth: int, thread_id: str, call_id: str, pending: Sequence[PendingCall]
) -> PauseTurn:
    """The :class:`PauseTurn` that holds the parent's call ``call_id`` for its subagent
    ``name``, whose turn on ``thread_id`` paused on ``pending``."""
    listed = [
        PendingCall(
            f"{call_id}/{p.id}",
            p.name,
            p.args,
            f"subagent {name!r}: {p.reason}",
            p.skill,
            SubagentPending(name, depth, thread_id, call_id, p.id),
        )
        for p in pending
    ]
    return PauseTurn(f"subagent {name!r} waits for {len(listed)} decision(s)", listed)


def route_decisions(
    paused: PausedDispatch, decisions: Mapping[str, Decision], ctx: TurnContext
) -> list[ToolCall]:
    """The calls of ``paused`` to run again because a subagent they ran is paused, in call
    order; the decisions for each subagent are kept in ``ctx`` for :func:`decisions_for`."""
    routed: dict[str, dict[str, Decision]] = {}
    for p in paused.pending:
        if p.subagent is not None:
            routed.setdefault(p.subagent.call_id, {})[p.subagent.child_id] = decisions[p.id]
    if not routed:
        return []
    ctx.scratch[_ROUTED] = routed
    return [ToolCall(c.id, c.name, c.args) for c in paused.assistant.tool_calls if c.id in routed]


def decisions_for(ctx: TurnContext, call_id: str) -> dict[str, Decision] | None:
    """The decisions a resume routed to the subagent of the call ``call_id`` (taken: a later
    call that reuses the id starts a new child turn), or ``None`` when there are none."""
    routed: dict[str, dict[str, Decision]] | None = ctx.scratch.get(_ROUTED)
    return None if routed is None else routed.pop(call_id, None)
