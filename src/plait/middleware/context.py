"""The two contexts middleware sees: one per turn, one per dispatch (model call).

:class:`TurnContext` lives from the moment the thread is loaded until the turn ends. It owns the
turn's :class:`~plait.tools.ToolRegistry` (rebuilt every turn), the thread's messages and state,
the *ephemeral* messages that middleware projects into requests without persisting them, and the
event sink. :class:`DispatchContext` lives for one model call and the tool calls it asks for.

Failure is explicit: ``TurnContext.abort(error)`` ends the turn, ``DispatchContext.nack(error)``
rejects the dispatch (which also ends the turn). Once either has happened the remaining middleware
of every pipeline and seam is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from plait.messages import Message, ToolCall, Usage
from plait.tools import ToolRegistry

if TYPE_CHECKING:
    from plait.models.base import Model, ModelRequest, ModelResponse
    from plait.stores.base import ThreadStore

__all__ = [
    "DispatchContext",
    "Event",
    "EventSink",
    "Finalizer",
    "PersistFilter",
    "TurnContext",
]


@dataclass(slots=True, kw_only=True)
class Event:
    """Base class of every event a turn emits; batteries define their own subclasses.

    Naming rule, for every event in plait: the subject, then what happened to it, in the past
    (``TurnStarted``, ``ToolCallFinished``, ``HistorySummarized``, ``SkillSwapFailed``), never an
    ``Event`` suffix. ``type`` is the class name in snake case (``"tool_call_finished"``), a
    stable string for logs and JSON. Each layer or battery keeps its events in one ``events``
    module (``plait.runtime.events``, ``plait.guards.events``, ``plait.context.events``,
    ``plait.skills.disclosure.events``, ``plait.skills.managed.events``).
    """

    type: str = "event"


EventSink = Callable[[Event], None]
PersistFilter = Callable[[list[Message]], list[Message]]
"""Maps the messages about to be persisted to what is written (see ``persist_filters``)."""
Finalizer = Callable[[BaseException | None], None]
"""Called once when the turn ends, with its error (``None`` on success; see ``finalizers``)."""


def _discard(_: Event) -> None:
    return None


@dataclass(slots=True, eq=False, weakref_slot=True)
class TurnContext:
    """Everything one turn shares. Created by the runtime after the registry is built.

    ``messages`` is the thread's history plus what this turn has added so far (persisted);
    ``ephemeral`` holds messages that middleware projects into every request of this turn and
    that are never persisted (a skill body, a pinned note); ``state`` is the thread state dict,
    persisted with every dispatch. ``scratch`` is per-turn, unpersisted space for middleware,
    keyed by whatever the middleware chooses (its own instance, typically).

    ``persist_filters`` run, in order, on every dispatch's messages right before they are
    written to the thread store — always, even when the dispatch was nacked or the turn aborted
    and the remaining middleware skipped. A filter returns the messages to write (it may replace
    a message with a redacted copy; it must keep every tool call paired with its result). This is
    how projected, ephemeral content is kept out of persistence.

    ``finalizers`` run when the turn ends, however it ends (answer, error, abort, cancellation),
    last registered first, each with the turn's error or ``None``; they must not block. A
    finalizer that raises is reported as an ``ErrorOccurred`` event (``where="finalizer"``) and
    the others still run. This is where middleware closes what it opened in ``turn_input`` (a
    telemetry span), since ``turn_output`` runs only after a successful turn.

    ``skip_wraps``: middleware whose ``wrap_model_call`` and ``wrap_tool_call`` are left out of
    the chain for the rest of the turn (``ctx.skip_wraps |= {self}`` in ``turn_input``), so a
    middleware with nothing to do this turn (telemetry with no SDK installed) costs nothing per
    call. ``streaming`` is true when the turn runs through ``agent.stream`` (model calls stream).
    """

    thread_id: str
    registry: ToolRegistry
    model: Model
    messages: list[Message]
    state: dict[str, Any]
    system_prompt: str = ""
    input: list[Message] = field(default_factory=list)
    ephemeral: list[Message] = field(default_factory=list)
    scratch: dict[Any, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    dispatch_count: int = 0
    emit: EventSink = _discard
    persist_filters: list[PersistFilter] = field(default_factory=list)
    finalizers: list[Finalizer] = field(default_factory=list)
    skip_wraps: frozenset[Any] = frozenset()
    streaming: bool = False
    store: ThreadStore | None = None
    """The agent's thread store (a subagent's thread goes in it too)."""
    _error: BaseException | None = None
    _observers: list[EventSink] | None = None

    def observe(self, observer: EventSink) -> None:
        """Call ``observer`` with every event emitted through ``emit`` from now on in this turn,
        observers in registration order, before the turn's own sink. It must not block or raise
        (an exception reaches whoever emitted). Until the first call ``emit`` is the sink itself,
        so an unobserved turn pays nothing; after it, one wrapper calls every observer."""
        if self._observers is None:
            observers: list[EventSink] = []
            sink = self.emit

            def tee(event: Event) -> None:
                for notify in observers:
                    notify(event)
                sink(event)

            self._observers = observers
            self.emit = tee
        self._observers.append(observer)

    def abort(self, error: BaseException) -> None:
        """End the turn with ``error``; remaining middleware is skipped. The first abort wins."""
        if self._error is None:
            self._error = error

    @property
    def aborted(self) -> bool:
        return self._error is not None

    @property
    def error(self) -> BaseException | None:
        """Why the turn was aborted, or ``None``."""
        return self._error


@dataclass(slots=True, eq=False, weakref_slot=True)
class DispatchContext:
    """One model call and the tool calls it produced.

    ``request`` is set once the request is built, ``response`` once the model answered;
    ``new_messages`` collects the assistant message and tool results that this dispatch will
    persist. ``rejected_calls`` maps a tool call id to the error the model should read instead of
    the call running (see :meth:`reject_tool_call`); ``followups`` are messages appended after
    the dispatch's tool results (see :meth:`add_followup`). ``first_chunk_at`` is the
    ``time.perf_counter()`` at which a streamed model call of this dispatch relayed its first
    event (``None`` until then, and for calls that do not stream).
    """

    turn: TurnContext
    index: int
    request: ModelRequest | None = None
    response: ModelResponse | None = None
    new_messages: list[Message] = field(default_factory=list)
    rejected_calls: dict[str, str] = field(default_factory=dict)
    followups: list[Message] = field(default_factory=list)
    first_chunk_at: float | None = None
    _error: BaseException | None = None

    @property
    def registry(self) -> ToolRegistry:
        return self.turn.registry

    @property
    def state(self) -> dict[str, Any]:
        """The thread state (shortcut for ``ctx.turn.state``)."""
        return self.turn.state

    def nack(self, error: BaseException) -> None:
        """Reject the dispatch with ``error``: nothing more runs and the turn ends with it."""
        if self._error is None:
            self._error = error

    @property
    def nacked(self) -> bool:
        return self._error is not None

    @property
    def error(self) -> BaseException | None:
        return self._error

    @property
    def stopped(self) -> bool:
        """True once the dispatch was nacked or the turn aborted: remaining middleware skips."""
        return self._error is not None or self.turn._error is not None

    def add_message(self, message: Message) -> None:
        """Add ``message`` to the conversation now: it joins ``turn.messages`` (so requests built
        from here on include it) and is persisted with this dispatch, in order."""
        self.new_messages.append(message)
        self.turn.messages.append(message)

    def reject_tool_call(self, call_id: str, message: str) -> None:
        """Do not run tool call ``call_id``; give the model ``message`` as its error result."""
        self.rejected_calls.setdefault(call_id, message)

    def add_followup(self, message: Message) -> None:
        """Append ``message`` (a corrective note, say) after this dispatch's tool results.

        It is persisted with the dispatch; placing it after the results keeps every tool call
        next to its result.
        """
        self.followups.append(message)

    def tool_calls(self) -> list[ToolCall]:
        return list(self.response.tool_calls) if self.response is not None else []
