"""Pausing a turn on tool calls that wait for a person's decision.

A call is *held* when its tool has ``requires_approval`` (``True``, or a function of the
validated arguments that returns true), or when a ``before_tool_call`` middleware raises
:class:`PauseTurn` for it (:class:`ApprovalMiddleware` does, for tools matched by name; any
middleware may, for its own reason: a budget reached, a question for the user). Sibling calls
that are not held run at once. When a dispatch holds any call, the turn ends *paused*:

* the dispatch (its assistant message, the results of the calls that ran, and the held calls)
  is **not** appended to the thread's messages, so the thread never holds a call without its
  result; it is saved in the thread state under :data:`PENDING_KEY` as plain JSON, in the same
  single write (at the current version) that saves the state;
* the turn emits :class:`~plait.runtime.events.TurnPaused` and returns a
  :class:`~plait.runtime.turn.RunResult` whose ``pending`` lists the held calls
  (:class:`PendingCall`, with the skill each tool belongs to: a tool's ``skill`` metadata, else
  a middleware's ``skill_of(name, ctx)``, as disclosure mode's ``SkillsMiddleware`` has) and
  whose ``usage`` is the turn's so far (kept with the pause: a resume counts on from it);
  ``turn_output`` does not run (it runs once, when the turn ends).

``agent.resume(thread_id, decisions)`` (:mod:`plait.runtime.resume`) continues the same turn,
in any process on the same store. A new ``agent.run`` on a paused thread raises
:class:`~plait.errors.ThreadPaused`, or with ``on_paused="reject"`` answers every held call
with a rejection and goes on.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from plait.errors import ConfigurationError, ThreadPaused, ToolArgumentsError
from plait.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolResult,
    Usage,
    dump_messages,
    load_messages,
)
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext, TurnContext
from plait.runtime.events import TurnPaused

if TYPE_CHECKING:
    from plait.runtime.turn import Turn

__all__ = [
    "PENDING_KEY",
    "Answer",
    "ApprovalMiddleware",
    "Approve",
    "Decision",
    "OnPaused",
    "PauseTurn",
    "PendingCall",
    "Reject",
    "SubagentPending",
    "pending_calls",
    "was_approved",
]

PENDING_KEY = "plait.pending"
"""The thread-state key that holds a paused turn's dispatch (reserved: do not write it)."""

DEFAULT_REJECTION = "The user rejected this tool call; it did not run."

INTERRUPTED_RESUME = (
    "Tool call not confirmed: the resume that was deciding it stopped before it finished; it "
    "may have run. Check before calling it again."
)

PENDING_FORMAT = 2
"""The version of what :data:`PENDING_KEY` holds; a newer one is refused, not misread. 2 adds
a subagent's held calls (``PendingCall.subagent``), written only by a pause that has one, so a
reader of 1 refuses those instead of taking them for its own calls."""

OnPaused = Literal["raise", "reject"]


@dataclass(slots=True, frozen=True)
class SubagentPending:
    """Where a subagent's held call waits (:mod:`plait.runtime.delegation_pause`): in the
    subagent ``name`` at ``depth``, on its thread ``thread_id``, run by this thread's tool call
    ``call_id``; that thread holds it as ``child_id``."""

    name: str
    depth: int
    thread_id: str
    call_id: str
    child_id: str

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SubagentPending:
        return cls(**{k: data[k] for k in cls.__slots__})


@dataclass(slots=True, frozen=True)
class PendingCall:
    """A tool call that waits for a decision: its ``id``, tool ``name``, ``args``, why it is
    held (``reason``) and the skill whose tool it is (``skill``, ``None`` for the agent's own).
    A subagent's held call is listed by its parent too, as ``<call id>/<child's id>`` with
    ``subagent`` saying where it waits; the decision made for that id reaches the subagent."""

    id: str
    name: str
    args: dict[str, Any]
    reason: str
    skill: str | None = None
    subagent: SubagentPending | None = None

    @property
    def call_id(self) -> str:
        """The id of this thread's call it holds: ``id``, or the call running the subagent."""
        return self.id if self.subagent is None else self.subagent.call_id

    def to_json(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "name": self.name,
            "args": self.args,
            "reason": self.reason,
            "skill": self.skill,
        }
        if self.subagent is not None:
            out["subagent"] = self.subagent.to_json()
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingCall:
        sub = data.get("subagent")
        return cls(
            data["id"],
            data["name"],
            dict(data["args"]),
            data["reason"],
            data["skill"],
            None if sub is None else SubagentPending.from_json(sub),
        )


@dataclass(slots=True, frozen=True)
class Approve:
    """Run the call; with ``args``, run it with those arguments instead (the thread then records
    the edited call). ``by`` names who decided (shown by the trace)."""

    args: dict[str, Any] | None = None
    by: str = ""


@dataclass(slots=True, frozen=True)
class Reject:
    """Do not run the call; the model reads ``message`` as its (error) result."""

    message: str = DEFAULT_REJECTION
    by: str = ""


@dataclass(slots=True, frozen=True)
class Answer:
    """Do not run the call; ``result`` (any JSON value) is its result, as if the tool returned
    it."""

    result: Any
    by: str = ""


Decision = Approve | Reject | Answer


def decision_to_json(decision: Decision) -> dict[str, Any]:
    """What the trace keeps of a decision: its kind, who made it and the edited args."""
    out: dict[str, Any] = {"kind": type(decision).__name__.lower(), "by": decision.by}
    if isinstance(decision, Approve) and decision.args is not None:
        out["args"] = decision.args
    if isinstance(decision, Reject):
        out["message"] = decision.message
    return out


class PauseTurn(Exception):
    """Raise from ``before_tool_call`` to hold the call: it does not run, and the turn pauses
    once the dispatch's other calls are done (see the module docstring). ``reason`` is shown to
    whoever decides. On resume an approved call passes through ``before_tool_call`` again: a
    middleware that does not want to ask twice checks :func:`was_approved` first (as
    :class:`ApprovalMiddleware` does); one that raises again holds the call again.

    A tool raises it with ``pending`` when its call waits on calls held elsewhere (a paused
    subagent's, :mod:`plait.runtime.delegation_pause`): those are listed instead of the call."""

    def __init__(self, reason: str, pending: Sequence[PendingCall] = ()) -> None:
        self.reason = reason
        self.pending = tuple(pending)
        super().__init__(reason)


_APPROVED = object()  # TurnContext.scratch key: the call ids decided "approve" on resume
_HELD = object()  # TurnContext.scratch key: {call id: PendingCall} held in this dispatch
_PAUSED = object()  # TurnContext.scratch key: the list of PendingCall the turn ended on


def was_approved(ctx: TurnContext, call_id: str) -> bool:
    """Whether ``call_id`` was approved by a resume decision (so no gate holds it again)."""
    ids: set[str] | None = ctx.scratch.get(_APPROVED)
    return ids is not None and call_id in ids


def mark_approved(ctx: TurnContext, call_ids: Iterable[str]) -> None:
    ctx.scratch.setdefault(_APPROVED, set()).update(call_ids)


def clear_approved(ctx: TurnContext) -> None:
    """Forget the approvals once the resumed dispatch's calls ran: some servers reuse call ids
    across responses, and a later call must never pass on an earlier call's approval."""
    ctx.scratch.pop(_APPROVED, None)


def _skill_of(d: DispatchContext, name: str, stack: Iterable[object] = ()) -> str | None:
    """The skill whose tool ``name`` is: the tool's ``skill`` metadata (managed skills' tools
    and scripts carry it), else the first middleware of ``stack`` with a ``skill_of(name, ctx)``
    method that knows (disclosure mode: the skill whose ``include_tools`` made it visible)."""
    tool = d.registry.get(name)
    skill = tool.definition.metadata.get("skill") if tool is not None else None
    if isinstance(skill, str):
        return skill
    for m in stack:
        lookup = getattr(m, "skill_of", None)
        found = lookup(name, d) if callable(lookup) else None
        if isinstance(found, str):
            return found
    return None


def hold(
    call: ToolCall, reason: str, d: DispatchContext, instead: Sequence[PendingCall] = ()
) -> ToolMessage:
    """Hold ``call`` in dispatch ``d`` (listed as ``instead`` when given: see
    :class:`PauseTurn`); the placeholder result returned is never persisted."""
    held: dict[str, list[PendingCall]] = d.turn.scratch.setdefault(_HELD, {})
    held[call.id] = list(instead) or [
        PendingCall(call.id, call.name, dict(call.args), reason, _skill_of(d, call.name))
    ]
    return ToolMessage.from_result(ToolResult(call.id, f"held: {reason}", is_error=True), call.name)


def gate(call: ToolCall, d: DispatchContext) -> str | None:
    """Why the tool's own ``requires_approval`` holds ``call``, or ``None`` when it may run now.
    A function rule sees the validated arguments; arguments that fail validation are not held
    (the call fails with the validation error, as any other)."""
    tool = d.registry.get(call.name)
    rule = getattr(tool, "requires_approval", False) if tool is not None else False
    if rule is False or was_approved(d.turn, call.id):
        return None
    if callable(rule):
        try:
            args = tool.validate(call.args) if tool is not None else call.args
        except ToolArgumentsError:
            return None
        return f"{call.name} requires approval for these arguments" if rule(args) else None
    return f"{call.name} requires approval" if rule else None


def held_calls(d: DispatchContext) -> dict[str, list[PendingCall]]:
    """The calls held in dispatch ``d``, each with what it is listed as (empty when none)."""
    held: dict[str, list[PendingCall]] = d.turn.scratch.get(_HELD, {})
    return held


def pending_calls(ctx: TurnContext) -> list[PendingCall] | None:
    """The calls the turn paused on, or ``None`` when it did not pause."""
    paused: list[PendingCall] | None = ctx.scratch.get(_PAUSED)
    return paused


def _to_json(messages: Sequence[Message]) -> list[Any]:
    data: list[Any] = json.loads(dump_messages(list(messages)))
    return data


@dataclass(slots=True)
class PausedDispatch:
    """A paused dispatch as kept under :data:`PENDING_KEY`."""

    dispatch: int
    assistant: AssistantMessage
    finished: dict[str, ToolMessage]
    pending: list[PendingCall]
    followups: list[Message] = field(default_factory=list)
    paused_at: float = 0.0
    claimed: dict[str, Any] | None = None
    usage: Usage = field(default_factory=Usage)
    """The turn's usage up to the pause (a resume goes on counting from it)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PENDING_FORMAT if any(p.subagent for p in self.pending) else 1,
            "dispatch": self.dispatch,
            "assistant": _to_json([self.assistant])[0],
            "finished": _to_json(list(self.finished.values())),
            "pending": [p.to_json() for p in self.pending],
            "followups": _to_json(self.followups),
            "paused_at": self.paused_at,
            "claimed": self.claimed,
            "usage": dataclasses.asdict(self.usage),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PausedDispatch:
        if data.get("format", PENDING_FORMAT) > PENDING_FORMAT:
            raise ConfigurationError(
                f"This thread was paused by a newer plait (pending format {data['format']}, "
                f"this one reads {PENDING_FORMAT}); resume it with that version or upgrade."
            )
        assistant = load_messages(json.dumps([data["assistant"]]))[0]
        finished = load_messages(json.dumps(data["finished"]))
        if not isinstance(assistant, AssistantMessage):
            raise ValueError("the paused dispatch's first message is not an assistant message")
        return cls(
            dispatch=int(data["dispatch"]),
            assistant=assistant,
            finished={m.tool_call_id: m for m in finished if isinstance(m, ToolMessage)},
            pending=[PendingCall.from_json(p) for p in data["pending"]],
            followups=load_messages(json.dumps(data.get("followups", []))),
            paused_at=float(data.get("paused_at", 0.0)),
            claimed=data.get("claimed"),
            usage=_usage(data.get("usage")),
        )

    def messages(self, decided: Mapping[str, ToolMessage]) -> list[Message]:
        """The dispatch as the thread keeps it: the assistant message, one result per call in
        call order (finished, else ``decided``), then the followups."""
        results: list[Message] = []
        for call in self.assistant.tool_calls:
            result = self.finished.get(call.id) or decided.get(call.id)
            if result is None:
                result = ToolMessage.from_result(
                    ToolResult(call.id, "Tool call not run: no decision.", is_error=True),
                    call.name,
                )
            results.append(result)
        return [self.assistant, *results, *self.followups]


def _usage(data: object) -> Usage:
    """A stored usage (absent in pauses saved before it was kept: zero)."""
    if not isinstance(data, Mapping):
        return Usage()
    known = {f.name for f in dataclasses.fields(Usage)}
    return Usage(**{k: int(v) for k, v in data.items() if k in known})


def paused_dispatch(state: Mapping[str, Any]) -> PausedDispatch | None:
    data = state.get(PENDING_KEY)
    return None if not data else PausedDispatch.from_json(data)


def _with_skill(call: PendingCall, d: DispatchContext, turn: Turn) -> PendingCall:
    if call.skill is not None or call.subagent is not None:  # a child's call: its own skill
        return call
    return dataclasses.replace(call, skill=_skill_of(d, call.name, turn.stack))


async def pause_dispatch(turn: Turn, d: DispatchContext, results: Sequence[ToolMessage]) -> None:
    """End dispatch ``d`` paused: save it under :data:`PENDING_KEY` in one write at the turn's
    version (its messages are not appended), then mark the turn paused and emit
    :class:`~plait.runtime.events.TurnPaused`."""
    ctx = d.turn
    held = held_calls(d)
    assistant = d.new_messages[0]
    assert isinstance(assistant, AssistantMessage)
    messages: list[Message] = [assistant, *(r for r in results if r.tool_call_id not in held)]
    for keep_out in ctx.persist_filters:
        messages = keep_out(messages)
    calls = {c.id: c for c in assistant.tool_calls}
    paused = PausedDispatch(
        dispatch=d.index,
        assistant=assistant,
        finished={m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)},
        pending=[_with_skill(p, d, turn) for i in calls if i in held for p in held[i]],
        followups=list(d.followups),
        paused_at=time.time(),
        usage=ctx.usage,
    )
    ctx.state[PENDING_KEY] = paused.to_json()
    # The held dispatch leaves the live history: the next request must not see half of it.
    del ctx.messages[len(ctx.messages) - len(d.new_messages) :]
    await turn._append([], ctx.state)
    ctx.scratch[_PAUSED] = paused.pending
    ctx.scratch.pop(_HELD, None)
    ctx.emit(TurnPaused(dispatch=d.index, pending=list(paused.pending)))


async def settle_before_turn(
    turn: Turn, history: list[Message], state: dict[str, Any], on_paused: OnPaused
) -> list[Message]:
    """Before a new turn on a paused thread: raise :class:`~plait.errors.ThreadPaused`, or
    (``on_paused="reject"``) append the paused dispatch with every held call rejected and
    return the history with it."""
    paused = paused_dispatch(state)
    if paused is None:
        return history
    if on_paused != "reject":
        raise ThreadPaused(turn.thread_id, [p.id for p in paused.pending])
    # A claimed pause: its resume stopped between its claim and its append, so an approved
    # call may have run; the model is told so rather than that it did not.
    text = DEFAULT_REJECTION if paused.claimed is None else INTERRUPTED_RESUME
    held = {p.call_id for p in paused.pending}  # a paused subagent's call: rejected whole
    decided = {
        c.id: ToolMessage.from_result(ToolResult(c.id, text, is_error=True), c.name)
        for c in paused.assistant.tool_calls
        if c.id in held
    }
    del state[PENDING_KEY]
    written = await turn._append(paused.messages(decided), state)
    return [*history, *written]


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class ApprovalMiddleware(Middleware):
    """Hold calls of tools you do not own until a person decides: MCP tools (``"server_*"``),
    managed skill scripts (``"run_*"``: ``run_<skill>_<script>``), a skill's ``include_tools``,
    by name pattern (``fnmatch``: ``*``, ``?``, ``[...]``).

    ``tools`` are the patterns (every tool when empty and ``when`` is given); ``when``, if
    given, decides per call (``when(call) -> bool``) among the matched ones. A call a resume
    approved is never held again. ``reason`` is shown to whoever decides.
    """

    def __init__(
        self,
        tools: Sequence[str] = (),
        *,
        when: Callable[[ToolCall], bool] | None = None,
        reason: str = "needs approval",
    ) -> None:
        if not tools and when is None:
            raise ConfigurationError(
                "ApprovalMiddleware needs tools=[name patterns] or when=callable(call) -> bool."
            )
        self.patterns = list(tools)
        self.when = when
        self.reason = reason

    async def before_tool_call(self, call: ToolCall, ctx: DispatchContext) -> ToolCall | None:
        if was_approved(ctx.turn, call.id):
            return call
        if self.patterns and not _matches(call.name, self.patterns):
            return call
        if self.when is not None and not self.when(call):
            return call
        raise PauseTurn(f"{call.name}: {self.reason}")
