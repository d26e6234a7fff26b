"""AG-UI: ``POST /agui`` (or ``/agents/{agent}/agui``) takes a ``RunAgentInput`` and answers
the run's events as Server-Sent Events, encoded by ``ag_ui.encoder.EventEncoder``.

==============================================  ===============================================
plait                                           AG-UI
==============================================  ===============================================
the run starts                                  ``RUN_STARTED``, then ``STATE_SNAPSHOT`` (the
                                                thread's skills state)
``TextDeltaReceived``                           ``TEXT_MESSAGE_START`` (once per answer),
                                                ``TEXT_MESSAGE_CONTENT``; ``TEXT_MESSAGE_END``
                                                when the answer is complete
``ReasoningDeltaReceived``                      ``REASONING_START``, ``REASONING_MESSAGE_START``,
                                                ``REASONING_MESSAGE_CONTENT``, then ``..._END``
``ToolCallStarted``                             ``TOOL_CALL_START``, ``TOOL_CALL_ARGS``,
                                                ``TOOL_CALL_END``
``ToolCallFinished``                            ``TOOL_CALL_RESULT``
a paused turn                                   ``RUN_FINISHED`` with ``pending_tool_call_ids``
                                                (client tools) or the interrupt outcome
any other plait event (skills, context, guards)  ``CUSTOM`` named by its ``type``
the turn ends                                   ``STATE_DELTA`` (JSON Patch of the skills
                                                state, if it changed), ``RUN_FINISHED`` with the
                                                answer as ``result``
the turn fails / is cut by a deadline           ``RUN_ERROR`` with ``code`` the error's type
==============================================  ===============================================

The thread is ``RunAgentInput.thread_id``; the messages new to it are taken as for the OpenAI
route (:func:`~plait.serve.requests.new_input`); ``state`` given by the client updates the
thread state before the turn. A client that disconnects cancels the run (it settles).

**Frontend tools and interrupts** (:mod:`plait.serve.pauses`): ``RunAgentInput.tools`` are
offered to the model; a call of one ends the run (``TOOL_CALL_START/ARGS/END``, then
``RUN_FINISHED`` with ``pending_tool_call_ids``) with the turn paused, and the next input's
``role: "tool"`` message for the call continues it. A call that waits for approval ends the run
with the interrupt outcome (:func:`interrupt_outcome`); the next input's ``resume`` entries
decide it. On a paused thread an input must decide every waiting call (else 409
``thread_paused``, saying what waits); its new user messages and state are not taken.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from plait.messages import AssistantMessage, Message, SystemMessage, UserMessage, new_id
from plait.runtime.events import (
    RUNTIME_EVENTS,
    ErrorOccurred,
    ModelResponseReceived,
    ReasoningDeltaReceived,
    TextDeltaReceived,
    ToolCallFinished,
    ToolCallStarted,
)
from plait.runtime.pause import Answer, Approve, Decision, Reject
from plait.serve.errors import ServeError
from plait.serve.pauses import (
    CLIENT_REASON,
    CLIENT_TOOLS_KEY,
    client_tools,
    pending_of,
    waiting_message,
)
from plait.serve.requests import new_input, read_json

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput
    from starlette.requests import Request
    from starlette.responses import Response

    from plait.middleware.context import Event
    from plait.runtime.pause import PendingCall
    from plait.serve.app import ServeState
    from plait.serve.runs import Run

__all__ = ["interrupt_outcome", "run_agent", "skills_state"]


def skills_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a thread state a frontend sees: its ``skills*`` keys, JSON-safe."""
    return {k: _plain(v) for k, v in state.items() if k.startswith("skill")}


def _plain(value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def _event_value(event: Event) -> dict[str, Any]:
    if dataclasses.is_dataclass(event):
        return {f.name: _plain(getattr(event, f.name)) for f in dataclasses.fields(event)}
    return {"type": event.type}


def _messages(parsed: RunAgentInput) -> list[Message]:
    out: list[Message] = []
    for message in parsed.messages:
        content = getattr(message, "content", None)
        text = content if isinstance(content, str) else ""
        if isinstance(content, list):
            text = "".join(str(getattr(p, "text", "")) for p in content)
        if message.role == "user":
            out.append(UserMessage(text))
        elif message.role in ("system", "developer"):
            out.append(SystemMessage(text))
        elif message.role == "assistant":
            out.append(AssistantMessage(text))
    return out


def interrupt_outcome(run: Run) -> Any:
    """The ``RunFinished`` outcome of ``run``: ``None`` (plain success) unless it paused. A run
    paused only on client tool calls succeeds with ``pending_tool_call_ids`` (AG-UI's frontend
    tools: the results ride the next input's messages); one paused on an approval ends with the
    interrupt outcome, one ``Interrupt`` per pending call (``id`` = ``tool_call_id`` = the call
    id; ``reason`` ``"tool_approval"``, or ``"client_tool"`` for a client call held beside it),
    answered by the next input's ``resume`` entries."""
    from ag_ui import core

    pending = run.result.pending if run.result is not None else []
    if not pending:
        return None
    if all(p.reason == CLIENT_REASON for p in pending):
        return core.RunFinishedSuccessOutcome(pending_tool_call_ids=[p.id for p in pending])
    return core.RunFinishedInterruptOutcome(
        interrupts=[
            core.Interrupt(
                id=p.id,
                reason="client_tool" if p.reason == CLIENT_REASON else "tool_approval",
                message=p.reason,
                tool_call_id=p.id,
                metadata={"tool": p.name, "args": _plain(p.args), "skill": p.skill},
            )
            for p in pending
        ]
    )


def _resume_decision(entry: Any, client: bool) -> Decision:
    """A ``ResumeEntry`` as a decision: ``cancelled`` rejects; ``resolved`` approves (payload
    ``None``/``true``/``{"approved": true, "args"?}``), rejects (``false``/``{"approved":
    false, "message"?}``) or answers (``{"result": value}``; any payload, for a client call)."""
    payload = entry.payload
    if entry.status == "cancelled":
        return Reject(by="client")
    if client:
        return Answer(payload.get("result", payload) if isinstance(payload, dict) else payload)
    if payload is None or payload is True:
        return Approve(by="client")
    if payload is False:
        return Reject(by="client")
    if isinstance(payload, dict):
        if "result" in payload:
            return Answer(payload["result"], by="client")
        if payload.get("approved", True):
            args = payload.get("args")
            return Approve(args=args if isinstance(args, dict) else None, by="client")
        message = payload.get("message")
        return Reject(message, by="client") if isinstance(message, str) else Reject(by="client")
    raise ServeError(
        400,
        "invalid_resume",
        f"resume entry {entry.interrupt_id!r}: payload must be true/false, "
        '{"approved": bool, "args"?: {...}, "message"?: str} or {"result": value}.',
    )


def _decisions(parsed: RunAgentInput, pending: list[PendingCall]) -> dict[str, Decision]:
    """The decisions ``parsed`` carries for a paused thread: a ``role: "tool"`` message
    answers a client call (its ``error``, if set, rejects it), a ``resume`` entry any call.
    409 ``thread_paused`` naming what still waits, if any call is left undecided."""
    results = {m.tool_call_id: m for m in parsed.messages if m.role == "tool"}
    entries = {e.interrupt_id: e for e in parsed.resume or ()}
    out: dict[str, Decision] = {}
    for p in pending:
        client = p.reason == CLIENT_REASON
        if client and p.id in results:
            message = results[p.id]
            if getattr(message, "error", None):
                out[p.id] = Reject(str(message.error), by="client")
            else:
                content = message.content
                text = (
                    content
                    if isinstance(content, str)
                    else json.dumps([_plain(part.model_dump()) for part in content])
                )
                out[p.id] = Answer(text, by="client")
        elif p.id in entries:
            out[p.id] = _resume_decision(entries[p.id], client)
    missing = [p for p in pending if p.id not in out]
    if missing:
        raise ServeError(
            409,
            "thread_paused",
            f"Thread {parsed.thread_id!r} is paused; it waits for {waiting_message(missing)}. "
            "Send a role 'tool' message (toolCallId) for a client tool call, or a resume entry "
            "(interruptId = the call id) for each interrupt.",
        )
    return out


def _json_patch(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for key in before:
        if key not in after:
            ops.append({"op": "remove", "path": f"/{key}"})
    for key, value in after.items():
        if key not in before:
            ops.append({"op": "add", "path": f"/{key}", "value": value})
        elif before[key] != value:
            ops.append({"op": "replace", "path": f"/{key}", "value": value})
    return ops


async def run_agent(request: Request) -> Response:
    from ag_ui.core import RunAgentInput
    from ag_ui.encoder import EventEncoder
    from pydantic import ValidationError

    state: ServeState = request.app.state.plait
    body = await read_json(request, state.limits.max_body_bytes)
    try:
        parsed = RunAgentInput.model_validate(body)
    except ValidationError as exc:
        raise ServeError(400, "invalid_request", f"Not an AG-UI RunAgentInput: {exc}") from None
    name, agent = state.agent(request.path_params.get("agent"))
    stored = await agent.store.load(parsed.thread_id)
    client_state = dict(parsed.state) if isinstance(parsed.state, dict) else {}
    reserved = sorted(k for k in client_state if k.startswith("plait."))
    if reserved:  # the paused dispatch, the client tools, decisions: the server's own keys
        raise ServeError(
            400,
            "invalid_state",
            f"RunAgentInput.state may not set {', '.join(reserved)}: keys starting 'plait.' "
            "are the server's; rename them (tools go in RunAgentInput.tools).",
        )
    if parsed.tools:
        client_state[CLIENT_TOOLS_KEY] = client_tools(parsed.tools, agent)
    pending = pending_of(stored.state)
    if pending:  # this input answers the paused turn (its new messages and state wait)
        run = state.runs.start(
            agent,
            name,
            parsed.thread_id,
            [],
            run_id=parsed.run_id,
            decisions=_decisions(parsed, pending),
        )
    else:
        run = state.runs.start(
            agent,
            name,
            parsed.thread_id,
            new_input(stored.messages, _messages(parsed)),
            state=client_state,
            run_id=parsed.run_id,
        )
    encoder = EventEncoder(accept=request.headers.get("accept") or "text/event-stream")
    before = skills_state({**stored.state, **client_state})
    events = _events(run, parsed, before)
    body_stream = (encoder.encode(e) async for e in events)
    return state.sse(
        request, run, body_stream, {"X-Plait-Run": run.run_id}, encoder.get_content_type()
    )


async def _events(
    run: Run, parsed: RunAgentInput, before: dict[str, Any]
) -> AsyncIterator[BaseEvent]:
    from ag_ui import core

    yield core.RunStartedEvent(thread_id=parsed.thread_id, run_id=run.run_id)
    yield core.StateSnapshotEvent(snapshot=before)
    text_id: str | None = None
    reasoning_id: str | None = None

    def close_text() -> list[BaseEvent]:
        nonlocal text_id
        closing: list[BaseEvent] = []
        if text_id is not None:
            closing.append(core.TextMessageEndEvent(message_id=text_id))
            text_id = None
        return closing

    def close_reasoning() -> list[BaseEvent]:
        nonlocal reasoning_id
        closing: list[BaseEvent] = []
        if reasoning_id is not None:
            closing.append(core.ReasoningMessageEndEvent(message_id=reasoning_id))
            closing.append(core.ReasoningEndEvent(message_id=reasoning_id))
            reasoning_id = None
        return closing

    async for event in run.stream():
        if isinstance(event, TextDeltaReceived):
            for e in close_reasoning():
                yield e
            if text_id is None:
                text_id = f"msg_{new_id()}"
                yield core.TextMessageStartEvent(message_id=text_id, role="assistant")
            yield core.TextMessageContentEvent(message_id=text_id, delta=event.text)
        elif isinstance(event, ReasoningDeltaReceived):
            if reasoning_id is None:
                reasoning_id = f"rsn_{new_id()}"
                yield core.ReasoningStartEvent(message_id=reasoning_id)
                yield core.ReasoningMessageStartEvent(message_id=reasoning_id, role="reasoning")
            if event.text:
                yield core.ReasoningMessageContentEvent(message_id=reasoning_id, delta=event.text)
        elif isinstance(event, ModelResponseReceived):
            for e in [*close_reasoning(), *close_text()]:
                yield e
        elif isinstance(event, ToolCallStarted):
            call = event.call
            yield core.ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name)
            yield core.ToolCallArgsEvent(tool_call_id=call.id, delta=json.dumps(call.args))
            yield core.ToolCallEndEvent(tool_call_id=call.id)
        elif isinstance(event, ToolCallFinished):
            data = event.result.data
            content = data if isinstance(data, str) else json.dumps(_plain(data))
            yield core.ToolCallResultEvent(
                message_id=f"tool_{event.call.id}",
                tool_call_id=event.call.id,
                content=content,
                role="tool",
            )
        elif not isinstance(event, ErrorOccurred) and event.type not in RUNTIME_EVENTS:
            yield core.CustomEvent(name=f"plait.{event.type}", value=_event_value(event))
    for e in [*close_reasoning(), *close_text()]:
        yield e
    if run.error is not None:
        code = run.error.type if isinstance(run.error, ServeError) else type(run.error).__name__
        yield core.RunErrorEvent(message=str(run.error), code=code)
        return
    if run.status == "cancelled":
        return
    after = skills_state(run.result.state if run.result is not None else {})
    patch = _json_patch(before, after)
    if patch:
        yield core.StateDeltaEvent.model_validate({"type": "STATE_DELTA", "delta": patch})
    output = run.result.output if run.result is not None else ""
    outcome = interrupt_outcome(run)
    if outcome is None:
        yield core.RunFinishedEvent(thread_id=parsed.thread_id, run_id=run.run_id, result=output)
    else:
        yield core.RunFinishedEvent(
            thread_id=parsed.thread_id, run_id=run.run_id, result=output, outcome=outcome
        )
