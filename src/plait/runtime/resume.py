"""Resuming a paused turn: ``agent.resume(thread_id, decisions)``.

The resume is the same turn, continued in whatever process runs it:

1. Under the thread's lease (if the store has one) the thread is loaded; the decisions must
   name every held call exactly once (else :class:`~plait.errors.DecisionError`, nothing runs).
2. **Claim** (one write at the loaded version): the decisions are recorded in the paused
   dispatch before any tool runs. Of two resumes that race, one claim lands and the other
   raises :class:`~plait.errors.ResumeConflict` having run nothing: the held calls are decided
   exactly once. A resume that finds the pending dispatch already claimed (its claimant died
   between claim and append) raises ``ResumeConflict`` too; ``agent.run(...,
   on_paused="reject")`` then answers the held calls with a rejection and goes on.
3. A fresh registry and ``turn_input`` (managed skills re-project), then the paused dispatch
   again up to its model call: ``dispatch_input`` and ``before_model_call`` run on the request
   the model answered, so disclosed skill tools are registered as they were; the model is not
   called, its recorded answer stands. Then the held calls: ``Approve`` runs the call through
   the normal tool path (``before_tool_call`` / ``wrap_tool_call`` / ``after_tool_call``,
   timeouts; no gate holds it again), ``Reject`` answers it with the message, ``Answer`` with
   the result. The dispatch is then appended whole (assistant message, one result per call in
   call order, followups) with the pending entry removed, ``dispatch_output`` having run, and
   the dispatch loop goes on. ``turn_output`` runs once, at the end. The decisions are kept
   (bounded) under :data:`DECISIONS_KEY` for the trace: who decided what, when.

Usage is the turn's: the resumed turn starts from the usage recorded at the pause, so the final
``RunResult.usage`` (and ``TurnFinished.usage``) is the whole turn's, before the pause and after
it (a paused ``RunResult.usage`` is the usage so far). Add up only results that did not pause,
or ``DispatchFinished.usage`` (one model call each), never a paused result and its resume.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plait.errors import DecisionError, ResumeConflict, ThreadConflictError, ThreadNotPaused
from plait.messages import ToolCall, ToolMessage, ToolResult, Usage
from plait.middleware.context import DispatchContext, EventSink, TurnContext
from plait.models.base import ModelResponse, ModelSettings
from plait.runtime import delegation_pause, pause
from plait.runtime.events import ToolCallFinished, TurnResumed
from plait.runtime.pause import (
    PENDING_KEY,
    Answer,
    Approve,
    Decision,
    PausedDispatch,
    Reject,
    decision_to_json,
)
from plait.runtime.turn import Turn
from plait.storable import storable_value

if TYPE_CHECKING:
    from plait.runtime.agent import Agent
    from plait.runtime.output import OutputRun

__all__ = ["DECISIONS_KEY", "MAX_DECISION_RECORDS", "ResumedTurn"]

DECISIONS_KEY = "plait.decisions"
"""Thread-state key of the record of past decisions (reserved), newest last."""

MAX_DECISION_RECORDS = 50
"""How many resumes :data:`DECISIONS_KEY` remembers (older ones are dropped)."""


def _check(thread_id: str, paused: PausedDispatch, decisions: Mapping[str, Decision]) -> None:
    ids = [p.id for p in paused.pending]
    missing = [i for i in ids if i not in decisions]
    unknown = [i for i in decisions if i not in ids]
    if missing or unknown:
        raise DecisionError(thread_id, missing, unknown)
    for call_id, decision in decisions.items():
        if not isinstance(decision, Approve | Reject | Answer):
            raise DecisionError(thread_id, [call_id], [])


class ResumedTurn(Turn):
    """A paused turn continued with ``decisions`` (call id → :class:`~plait.runtime.pause.
    Approve` | ``Reject`` | ``Answer``). Created by ``agent.resume`` / ``agent.stream_resume``."""

    def __init__(
        self,
        agent: Agent[Any],
        thread_id: str,
        decisions: Mapping[str, Decision],
        emit: EventSink,
        streaming: bool,
        model_settings: ModelSettings | None = None,
        output: OutputRun | None = None,
    ) -> None:
        super().__init__(agent, thread_id, [], None, emit, streaming, model_settings, output)
        self.decisions = dict(decisions)
        self._paused: PausedDispatch | None = None
        self._resumed_at = 0.0

    async def _start(self) -> TurnContext:
        snapshot = await self.agent.store.load(self.thread_id)
        self.version, state = snapshot.version, snapshot.state
        paused = pause.paused_dispatch(state)
        if paused is None:
            if state.get(DECISIONS_KEY):
                raise ResumeConflict(
                    self.thread_id, self.version, self.version, " (it is already resumed)"
                )
            raise ThreadNotPaused(self.thread_id)
        if paused.claimed is not None:
            raise ResumeConflict(
                self.thread_id,
                self.version,
                self.version,
                f" (at {paused.claimed.get('at')!r}, and it did not finish)",
            )
        _check(self.thread_id, paused, self.decisions)
        self._resumed_at = time.time()
        decided = {i: decision_to_json(d) for i, d in self.decisions.items()}
        state[PENDING_KEY] = {**state[PENDING_KEY], "claimed": {"at": self._resumed_at}}
        records = [*state.get(DECISIONS_KEY, ()), self._record(paused, decided)]
        state[DECISIONS_KEY] = records[-MAX_DECISION_RECORDS:]
        try:
            await self._append([], state)
        except ThreadConflictError as exc:
            raise ResumeConflict(self.thread_id, exc.expected, exc.actual) from exc
        self._paused = paused
        ctx = self._context(snapshot.messages, state)
        ctx.usage = paused.usage  # one turn: its usage counts from before the pause
        return ctx

    def _record(self, paused: PausedDispatch, decided: dict[str, Any]) -> dict[str, Any]:
        return {
            "dispatch": paused.dispatch,
            "paused_at": paused.paused_at,
            "resumed_at": self._resumed_at,
            "pending": [p.to_json() for p in paused.pending],
            "decisions": decided,
        }

    async def _dispatch_loop(self, ctx: TurnContext) -> str:
        response = await self._resume_dispatch(ctx)
        if not response.tool_calls or pause.pending_calls(ctx) is not None:
            return response.content
        return await super()._dispatch_loop(ctx)

    async def _resume_dispatch(self, ctx: TurnContext) -> ModelResponse:
        paused = self._paused
        assert paused is not None  # set by _start
        d = DispatchContext(ctx, paused.dispatch)
        ctx.dispatch_count = paused.dispatch + 1
        assistant = paused.assistant
        edits = {
            i: dec.args
            for i, dec in self.decisions.items()
            if isinstance(dec, Approve) and dec.args is not None
        }
        if edits:  # the thread records the call as it ran
            assistant.tool_calls = [
                ToolCall(c.id, c.name, edits[c.id]) if c.id in edits else c
                for c in assistant.tool_calls
            ]
        await self._replay_request(d)
        # The recorded call's usage: its DispatchFinished comes now (a subagent's parent sums
        # those), while ctx.usage counted it at the pause already.
        response = ModelResponse(
            content=assistant.text,
            tool_calls=list(assistant.tool_calls),
            usage=assistant.usage or Usage(),
        )
        d.response = response
        decisions = {i: decision_to_json(dec) for i, dec in self.decisions.items()}
        ctx.emit(  # through ctx: observers (the trace recorder) see it
            TurnResumed(
                dispatch=d.index,
                decisions=decisions,
                paused_at=paused.paused_at,
                resumed_at=self._resumed_at,
            )
        )
        d.add_message(assistant)
        decided, to_run = self._decided(paused, d)
        pause.mark_approved(ctx, [c.id for c in to_run])
        try:
            results = await self._run_tools(to_run, d) if to_run else []
        finally:  # for this dispatch's calls only: a later call reusing an id is asked again
            pause.clear_approved(ctx)
        if pause.held_calls(d):  # a middleware held an approved call for its own reason
            everything = {**paused.finished, **decided, **{r.tool_call_id: r for r in results}}
            ordered = [everything[c.id] for c in assistant.tool_calls if c.id in everything]
            await pause.pause_dispatch(self, d, ordered)
            return response
        decided.update((r.tool_call_id, r) for r in results)
        for message in paused.messages(decided)[1:]:
            d.add_message(message)
        del ctx.state[PENDING_KEY]
        await self._finish_dispatch(d, response)
        return response

    async def _replay_request(self, d: DispatchContext) -> None:
        """The paused dispatch up to its model call, again: ``dispatch_input`` and
        ``before_model_call`` see the request the model answered, so middleware that registers
        tools there (disclosed skill tools) registers them as it did; the model is not called,
        its recorded answer stands."""
        stack = self.stack
        if stack.has_dispatch_input:
            await stack.run_dispatch_input(d)
            self._check(d)
        request = self.build_request(d.turn)
        if stack.has_before_model_call:
            request = await stack.run_before_model_call(request, d)
            self._check(d)
        d.request = request

    def _decided(
        self, paused: PausedDispatch, d: DispatchContext
    ) -> tuple[dict[str, ToolMessage], list[ToolCall]]:
        """The results of rejected and answered calls, and the approved calls to run."""
        decided: dict[str, ToolMessage] = {}
        # A paused subagent's call runs again and resumes it (plait.runtime.delegation_pause).
        to_run = delegation_pause.route_decisions(paused, self.decisions, d.turn)
        for p in paused.pending:
            if p.subagent is not None:
                continue
            decision = self.decisions[p.id]
            call = ToolCall(p.id, p.name, p.args)
            if isinstance(decision, Approve):
                args = p.args if decision.args is None else decision.args
                to_run.append(ToolCall(p.id, p.name, args))
                continue
            if isinstance(decision, Reject):
                result, by = ToolResult(p.id, decision.message, is_error=True), "rejected"
            else:
                value = storable_value(decision.result, "result", [])
                result, by = ToolResult(p.id, value), "answered"
            decided[p.id] = ToolMessage.from_result(result, p.name)
            d.turn.emit(ToolCallFinished(dispatch=d.index, call=call, result=result, skipped_by=by))
        return decided, to_run
