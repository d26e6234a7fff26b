"""The typed events a turn emits, live through ``agent.stream(...)`` and collected in
``RunResult.events``.

Every event derives from :class:`~plait.middleware.context.Event`; batteries add their own
(skill loads, evictions, summaries) and the runtime passes them through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.errors import ProviderError
from plait.messages import AssistantMessage, Message, ToolCall, ToolResult, Usage
from plait.middleware.context import Event
from plait.models.base import ModelRequest
from plait.storable import Replacement

if TYPE_CHECKING:
    from plait.runtime.pause import PendingCall

__all__ = [
    "RUNTIME_EVENTS",
    "CacheBroken",
    "DispatchFinished",
    "ErrorOccurred",
    "Event",
    "ModelCallRerouted",
    "ModelCallRetried",
    "ModelRequestSent",
    "ModelResponseReceived",
    "OutputDeltaReceived",
    "ReasoningDeltaReceived",
    "ReasoningDropped",
    "RepetitionDetected",
    "SubagentEventRelayed",
    "TextDeltaReceived",
    "ToolCallFinished",
    "ToolCallRejected",
    "ToolCallRepaired",
    "ToolCallStarted",
    "ToolTimeoutReached",
    "TurnFinished",
    "TurnPaused",
    "TurnResumed",
    "TurnStarted",
    "ValuesReplaced",
]


@dataclass(slots=True, kw_only=True)
class TurnStarted(Event):
    thread_id: str
    input: list[Message]
    type: str = "turn_started"


@dataclass(slots=True, kw_only=True)
class ModelRequestSent(Event):
    """The request as sent to the model (after every ``before_model_call``)."""

    dispatch: int
    request: ModelRequest
    type: str = "model_request_sent"


@dataclass(slots=True, kw_only=True)
class TextDeltaReceived(Event):
    """A chunk of the answer as the model streams it (``agent.stream`` only)."""

    dispatch: int
    text: str
    type: str = "text_delta_received"


@dataclass(slots=True, kw_only=True)
class ReasoningDeltaReceived(Event):
    """A chunk of the model's readable reasoning as it streams (Anthropic thinking, an OpenAI
    reasoning summary; ``agent.stream`` only). ``index`` tells a response's reasoning parts
    apart. The whole reasoning arrives with the answer, as reasoning parts of its message."""

    dispatch: int
    text: str
    index: int = 0
    type: str = "reasoning_delta_received"


@dataclass(slots=True, kw_only=True)
class ReasoningDropped(Event):
    """The turn's first request (dispatch ``dispatch``) carried ``count`` reasoning parts made by
    ``provider``, which the model (of another provider) cannot take: they were left out of what
    it was sent, the text of their messages kept (a thread that switched models). Reported once
    per turn, at its first dispatch: the history is scanned once, not on every model call (the
    turn's own calls add only their provider's reasoning); the adapter drops them from every
    request of the turn."""

    dispatch: int
    provider: str
    count: int
    type: str = "reasoning_dropped"


@dataclass(slots=True, kw_only=True)
class ModelCallRetried(Event):
    """A provider adapter is about to retry a failed model call (``error``, retryable) after
    ``delay`` seconds; ``retry`` is its number (1-based) of at most ``max_retries``.

    Reported for every model call made during the turn, the agent's own and a battery's (a
    model summarizer), whether or not the adapter's ``Backoff`` has an ``on_retry`` of its own.
    ``dispatch`` is the dispatch under way (``-1`` before the first one, e.g. a call made in
    ``turn_input``). Emitted before the backoff sleep."""

    dispatch: int
    error: ProviderError
    delay: float
    retry: int
    max_retries: int
    type: str = "model_call_retried"


@dataclass(slots=True, kw_only=True)
class ModelCallRerouted(Event):
    """A :class:`~plait.models.FallbackModel` moved a model call from ``failed`` to ``next``
    (model names) after ``error`` (an outage its ``on=`` accepts); ``dropped_reasoning`` is how
    many reasoning parts of other providers ``next`` is not sent. ``dispatch`` as for
    :class:`ModelCallRetried`. Emitted before the next model is called."""

    dispatch: int
    failed: str
    next: str
    error: ProviderError
    dropped_reasoning: int = 0
    type: str = "model_call_rerouted"


@dataclass(slots=True, kw_only=True)
class SubagentEventRelayed(Event):
    """``event``, emitted by the subagent ``name`` at ``depth`` (1 for a child of the root) on
    its thread ``thread_id``, relayed live to the parent's caller (``agent.as_tool``,
    :mod:`plait.runtime.delegation`). ``call_id`` is the tool call that runs the subagent, in
    its parent's thread (the parent's thread is ``thread_id`` without ``/<call_id>``), so a
    trace can nest the child's run under that call. A grandchild's events are relayed once,
    with its own name, depth and call id."""

    name: str
    depth: int
    thread_id: str
    event: Event
    call_id: str = ""
    type: str = "subagent_event_relayed"


@dataclass(slots=True, kw_only=True)
class ModelResponseReceived(Event):
    """The model's answer (after every ``after_model_call``)."""

    dispatch: int
    message: AssistantMessage
    type: str = "model_response_received"


@dataclass(slots=True, kw_only=True)
class ToolCallStarted(Event):
    dispatch: int
    call: ToolCall
    type: str = "tool_call_started"


@dataclass(slots=True, kw_only=True)
class ToolCallFinished(Event):
    """A tool call's result. ``skipped_by`` names the middleware that skipped the call."""

    dispatch: int
    call: ToolCall
    result: ToolResult
    skipped_by: str | None = None
    type: str = "tool_call_finished"


@dataclass(slots=True, kw_only=True)
class DispatchFinished(Event):
    """A dispatch finished and its messages were persisted."""

    dispatch: int
    messages: list[Message]
    usage: Usage
    type: str = "dispatch_finished"


@dataclass(slots=True, kw_only=True)
class ErrorOccurred(Event):
    """Something failed. ``fatal`` errors end the turn; others were recovered from (a tool
    raised, a best-effort offload failed) and are reported so nothing fails silently."""

    error: BaseException
    where: str
    fatal: bool = False
    details: dict[str, Any] = field(default_factory=dict)
    type: str = "error_occurred"


@dataclass(slots=True, kw_only=True)
class TurnFinished(Event):
    output: str
    usage: Usage
    type: str = "turn_finished"


@dataclass(slots=True, kw_only=True)
class TurnPaused(Event):
    """The turn ended paused: ``pending`` calls of dispatch ``dispatch`` wait for a decision
    (see :mod:`plait.runtime.pause`); the siblings that were not held have run."""

    dispatch: int
    pending: list[PendingCall]
    type: str = "turn_paused"


@dataclass(slots=True, kw_only=True)
class TurnResumed(Event):
    """A paused turn goes on: ``decisions`` maps each held call id to what was decided (JSON:
    ``{"kind": "approve" | "reject" | "answer", "by": ..., "args"?: ..., "message"?: ...}``),
    ``paused_at`` / ``resumed_at`` are Unix times."""

    dispatch: int
    decisions: dict[str, dict[str, Any]]
    paused_at: float
    resumed_at: float
    type: str = "turn_resumed"


@dataclass(slots=True, kw_only=True)
class ToolCallRejected(Event):
    """The validator refused a call before it ran; ``reason`` is what the model reads."""

    dispatch: int
    call: ToolCall
    reason: str
    type: str = "tool_call_rejected"


@dataclass(slots=True, kw_only=True)
class ToolCallRepaired(Event):
    """The validator repaired broken argument JSON (``original``) into ``call.args``."""

    dispatch: int
    call: ToolCall
    original: str
    type: str = "tool_call_repaired"


@dataclass(slots=True, kw_only=True)
class RepetitionDetected(Event):
    """The model repeated itself ``count`` times (``kind`` is ``"tool_call"`` or ``"text"``)."""

    dispatch: int
    kind: str
    count: int
    policy: str
    type: str = "repetition_detected"


@dataclass(slots=True, kw_only=True)
class ValuesReplaced(Event):
    """Values that no thread store can encode (a lone surrogate, ``nan``, a huge int, an
    object; see :mod:`plait.storable`) were replaced where they entered the turn. ``source``
    says where: ``"input"``, ``"model_response"``, ``"tool:<name>"``, ``"state"``, or
    ``"persist"`` (something middleware added, caught just before the write)."""

    source: str
    replacements: list[Replacement]
    type: str = "values_replaced"


@dataclass(slots=True, kw_only=True)
class CacheBroken(Event):
    """Reported by :class:`~plait.runtime.cache_watch.CacheWatch`: dispatch ``dispatch`` of
    thread ``thread_id`` sent a prefix that differs from the
    thread's previous request at block ``block`` (counting tools, then the system prompt, then
    messages): ``where`` is ``"tools"``, ``"system"`` or ``"messages"``, ``index`` the tool's or
    message's position there (``message_id`` names the message), ``reason`` a short why
    (``"summary"``, ``"evicted result"``, ``"message removed"``, ``"tools changed"``,
    ``"system prompt changed"``, ``"projected system message changed"`` (a managed skill's
    body loaded or unloaded: the Anthropic adapter folds system messages into the system
    block), ``"message changed"``); ``blocks`` is how many blocks of the
    previous request the cache can no longer serve."""

    dispatch: int
    thread_id: str
    block: int
    where: str
    index: int
    reason: str
    blocks: int
    message_id: str | None = None
    type: str = "cache_broken"


@dataclass(slots=True, kw_only=True)
class ToolTimeoutReached(Event):
    """A tool call ran past its timeout; it was cancelled and answered with an error result.

    A sync tool running in a worker thread (``blocking=True``) cannot be stopped: the turn moves
    on, the thread finishes on its own and its return value is discarded."""

    dispatch: int
    call: ToolCall
    timeout: float
    type: str = "tool_timeout_reached"


@dataclass(slots=True, kw_only=True)
class OutputDeltaReceived(Event):
    """The structured answer parsed so far, as it streams (``agent.stream`` only): ``partial`` is
    the JSON decoded from the prefix received (dicts, lists, scalars; not yet validated). The
    typed output arrives in ``RunResult.output`` at the end."""

    dispatch: int
    partial: Any
    type: str = "output_delta_received"


RUNTIME_EVENTS = frozenset(
    {
        "turn_started",
        "model_request_sent",
        "text_delta_received",
        "reasoning_delta_received",
        "output_delta_received",
        "model_response_received",
        "tool_call_started",
        "tool_call_finished",
        "dispatch_finished",
        "turn_finished",
    }
)
"""The ``type`` of the events the turn loop itself emits for a turn, a model call and a tool call:
what tracing and telemetry show as spans or steps, not as middleware actions. ``turn_paused`` and
``turn_resumed`` are not among them: the trace shows them as actions (the held calls and why;
the decisions, who made them and when)."""
