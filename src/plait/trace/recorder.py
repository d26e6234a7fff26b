"""``TraceRecorder``: middleware that writes each turn's timeline to a trace store.

Put it **first** in the agent's middleware list. Middleware pinned outermost (the default guards,
``OverflowRecoveryMiddleware``) still run outside it, so each request actually sent to the provider
is its own ``model`` span (an overflow retry included), seen after every ``before_model_call``;
its ``wrap_tool_call`` wraps every other tool wrapper; and its ``before_model_call`` runs before
the others', so actions other middleware take while preparing a call (a summary, a disclosure)
are filed under that call's dispatch.

What it records, per turn (one *run*):

* a ``model`` span per model call: latency, model, usage as reported (and an estimate of the input
  when the provider reports none), the answer, and the request as a delta against the thread's
  previous request (message keys added and removed, system prompt and tools by hash);
* a ``tool`` span per tool call: arguments, error flag, a preview of the output and, unless a
  persist filter keeps it out, the full output (up to ``max_output_chars``);
* an ``action`` span for every event middleware emits (an eviction, a summary, a disclosure, a
  rejected call): its type and fields, bounded.

Never stored: a message a persist filter would keep out of the thread store or that sits in
``TurnContext.ephemeral`` (a skill body, a pinned note) is recorded by reference only (role and
token count, no body). A failure to write the trace never fails the turn: it is reported once per
turn as a non-fatal :class:`~plait.runtime.events.ErrorOccurred` (``where="trace"``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections import OrderedDict
from typing import Any

from plait.errors import PlaitError, clipped
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    dump_messages,
    new_id,
)
from plait.middleware.base import Middleware, ModelHandler, Next, ToolHandler
from plait.middleware.context import DispatchContext, Event, TurnContext
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.events import ErrorOccurred, ToolCallFinished
from plait.tokens import CHARS_PER_TOKEN, message_tokens, tool_tokens
from plait.trace.store import CHECKPOINT_EVERY, RequestRow, SQLiteTraceStore, TraceBatch

__all__ = ["CLOSE_TIMEOUT", "MAX_OUTPUT_CHARS", "PREVIEW_CHARS", "RUNTIME_EVENTS", "TraceRecorder"]

MAX_OUTPUT_CHARS = 1_000_000
"""Default bound on a tool output kept whole in the trace store; longer ones keep the preview."""

PREVIEW_CHARS = 2_000
"""Characters of a tool output shown inline (head of the text)."""

RUNTIME_EVENTS = frozenset(
    {
        "turn_started",
        "model_request_sent",
        "text_delta_received",
        "model_response_received",
        "tool_call_started",
        "tool_call_finished",
        "dispatch_finished",
        "turn_finished",
    }
)
"""Event types not recorded as actions: the recorder's own spans already show them."""

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`TraceRecorder.aclose` waits for writes still in flight."""

_MAX_THREADS = 256
_MAX_BLOBS = 1_024
_FIELD_CHARS = 500
_FIELD_ITEMS = 50


def digest(text: str) -> str:
    """A short content hash (SHA-256, 16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _field(value: Any) -> Any:
    """A bounded JSON-ready copy of one event field."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return clipped(value, _FIELD_CHARS)
    if isinstance(value, BaseException):
        return clipped(f"{type(value).__name__}: {value}", _FIELD_CHARS)
    if isinstance(value, list | tuple | set | frozenset):
        return [_field(v) for v in list(value)[:_FIELD_ITEMS]]
    if isinstance(value, dict):
        return {str(k): _field(v) for k, v in list(value.items())[:_FIELD_ITEMS]}
    if isinstance(value, ToolCall):
        return {"id": value.id, "name": value.name}
    return clipped(repr(value), _FIELD_CHARS)


def _message_kind(message: Message, projected: bool) -> str:
    if projected:
        return "projected"
    if isinstance(message, SystemMessage):
        return "summary"
    if isinstance(message, ToolMessage):
        data = message.data
        return "evicted" if isinstance(data, dict) and data.get("_evicted") else "tool_result"
    return message.role


def _output_text(data: Any) -> str:
    return data if isinstance(data, str) else json.dumps(data, default=str, ensure_ascii=False)


@dataclasses.dataclass(slots=True)
class _Known:
    """A message already keyed on this thread: recognised again by id and signature."""

    signature: tuple[object, ...]
    key: str
    tokens: int


def _signature(message: Message) -> tuple[object, ...]:
    """A cheap structural fingerprint of a message: role, text length, tool calls, and for a
    tool result its size, error flag and whether it is an evicted reference.

    Messages reloaded from the thread store are new objects every turn; their id plus this
    fingerprint finds the key computed before, so a turn costs O(new messages) in serialization
    and hashing rather than O(history). Thread stores are append-only, so a stored id keeps its
    content; a message rewritten under its id inside a turn (an overflow eviction, a projected
    skill body, a redaction) differs in size or kind and gets a new key.
    """
    if isinstance(message, ToolMessage):
        data = message.data
        evicted = isinstance(data, dict) and bool(data.get("_evicted"))
        size = len(data) if isinstance(data, str | dict | list) else -1
        return ("tool", message.is_error, size, evicted)
    chars = sum(len(p.text) for p in message.content if isinstance(p, TextPart))
    calls = len(message.tool_calls) if isinstance(message, AssistantMessage) else 0
    return (message.role, len(message.content), chars, calls)


@dataclasses.dataclass(slots=True)
class _RunTrace:
    """One turn's recording state (kept in ``TurnContext.scratch``)."""

    run: dict[str, Any]
    batch: TraceBatch = dataclasses.field(default_factory=TraceBatch)
    dispatch: int = 0
    failed: bool = False
    pending: asyncio.Future[None] | None = None
    seen: dict[int, tuple[Message, _Known]] = dataclasses.field(default_factory=dict)
    tools: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


class TraceRecorder(Middleware):
    """Records every turn of the agent it is added to into ``store`` (see the module docstring).

    ``agent`` names the agent in the run list. Opt-in: nothing is recorded unless the recorder is
    in the middleware list (the ``plait`` CLI adds one unless ``--no-trace``).
    """

    def __init__(
        self,
        store: SQLiteTraceStore,
        *,
        agent: str = "agent",
        max_output_chars: int = MAX_OUTPUT_CHARS,
        preview_chars: int = PREVIEW_CHARS,
    ) -> None:
        self.store = store
        self.agent = agent
        self.max_output_chars = max_output_chars
        self.preview_chars = preview_chars
        self._last: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()
        self._known: OrderedDict[str, dict[str, _Known]] = OrderedDict()
        self._blobs: OrderedDict[str, None] = OrderedDict()
        self._writes: set[asyncio.Future[None]] = set()
        self.last_run_id: str | None = None
        """The id of the run (turn) most recently started, for a link to its trace."""

    async def aclose(self) -> None:
        """Wait (up to :data:`CLOSE_TIMEOUT` seconds) for background writes, then close the
        trace store."""
        if self._writes:
            await asyncio.wait(set(self._writes), timeout=CLOSE_TIMEOUT)
        await self.store.aclose()

    def _trace(self, ctx: TurnContext) -> _RunTrace | None:
        found = ctx.scratch.get(self)
        return found if isinstance(found, _RunTrace) else None

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        text = "\n".join(m.text for m in ctx.input if isinstance(m, UserMessage))
        run_id = new_id()
        run: dict[str, Any] = {
            "id": run_id,
            "thread_id": ctx.thread_id,
            "agent": self.agent,
            "started": time.time(),
            "finished": None,
            "status": "unfinished",
            "error": None,
            "input": clipped(text, 4_000),
            "output": None,
        }
        trace = _RunTrace(run)
        self.last_run_id = run_id
        ctx.scratch[self] = trace
        trace.batch.runs.append(run)
        downstream = ctx.emit

        def tee(event: Event) -> None:
            self._action(trace, event)
            downstream(event)

        ctx.emit = tee
        self._flush_soon(ctx, trace)
        await next()

    def _action(self, trace: _RunTrace, event: Event) -> None:
        if isinstance(event, ToolCallFinished):
            if event.skipped_by is not None:
                self._skipped(trace, event)
            else:
                self._model_saw(trace, event)
        if event.type in RUNTIME_EVENTS:
            return
        now = time.time()
        data = {
            f.name: _field(getattr(event, f.name))
            for f in dataclasses.fields(event)
            if f.name != "type"
        }
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

    def _model_saw(self, trace: _RunTrace, event: ToolCallFinished) -> None:
        """When ``after_tool_call`` middleware replaced a result (an eviction), keep what the
        model was given on the tool span: the span is written again (rows upsert by id)."""
        span = trace.tools.pop(event.call.id, None)
        if span is None:
            return
        text = _output_text(event.result.data)
        data = span["data"]
        if data.get("projected") or text == data.get("preview"):
            return
        data["model_saw"] = clipped(text, self.preview_chars)
        trace.batch.spans.append(span)

    def _skipped(self, trace: _RunTrace, event: ToolCallFinished) -> None:
        """A call that never reached ``wrap_tool_call`` (rejected or skipped by middleware)."""
        now = time.time()
        text = _output_text(event.result.data)
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
                    "args": _field(event.call.args),
                    "skipped_by": event.skipped_by,
                    "is_error": event.result.is_error,
                    "chars": len(text),
                    "preview": clipped(text, self.preview_chars),
                },
            }
        )

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        trace = self._trace(ctx.turn)
        if trace is not None:
            trace.dispatch = ctx.index
        return request

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        trace = self._trace(ctx.turn)
        if trace is None:
            return await call_next(request)
        span_id = new_id()
        estimate = await self._record_request(trace, span_id, request, ctx.turn)
        started = time.time()
        data: dict[str, Any] = {"model": request.model or ctx.turn.model.name}
        data["estimated_input_tokens"] = estimate
        try:
            response = await call_next(request)
        except BaseException as exc:
            data["error"] = _field(exc)
            data["cancelled"] = not isinstance(exc, Exception)
            trace.run.update(status="error", error=data["error"], finished=time.time())
            trace.batch.runs.append(trace.run)
            raise
        else:
            usage = response.usage
            data.update(
                model=response.model or data["model"],
                finish_reason=response.finish_reason,
                usage={
                    "input": usage.input_tokens,
                    "output": usage.output_tokens,
                    "cache_read": usage.cache_read_tokens,
                    "cache_write": usage.cache_write_tokens,
                },
                content=clipped(response.content, self.max_output_chars),
                tool_calls=[
                    {"id": c.id, "name": c.name, "args": _field(c.args)}
                    for c in response.tool_calls
                ],
            )
            return response
        finally:
            trace.batch.spans.append(
                {
                    "id": span_id,
                    "run_id": trace.run["id"],
                    "kind": "model",
                    "name": str(data["model"]),
                    "dispatch": ctx.index,
                    "started": started,
                    "finished": time.time(),
                    "data": data,
                }
            )
            if "error" not in data:
                pass
            elif data.get("cancelled"):
                self._flush_soon(ctx.turn, trace)  # never block a cancellation
            else:
                await self._flush(ctx.turn, trace)  # the turn ends with this error

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        trace = self._trace(ctx.turn)
        if trace is None:
            return await call_next(call)
        started = time.time()
        data: dict[str, Any] = {"call_id": call.id, "args": _field(call.args)}
        try:
            result = await call_next(call)
        except BaseException as exc:
            data["error"] = _field(exc)
            raise
        else:
            self._tool_output(trace, data, call, result, ctx.turn)
            return result
        finally:
            span = {
                "id": new_id(),
                "run_id": trace.run["id"],
                "kind": "tool",
                "name": call.name,
                "dispatch": ctx.index,
                "started": started,
                "finished": time.time(),
                "data": data,
            }
            trace.batch.spans.append(span)
            trace.tools[call.id] = span

    def _tool_output(
        self,
        trace: _RunTrace,
        data: dict[str, Any],
        call: ToolCall,
        result: ToolResult,
        turn: TurnContext,
    ) -> None:
        message = ToolMessage.from_result(result, call.name)
        text = _output_text(result.data)
        data.update(is_error=result.is_error, chars=len(text))
        if not _persistable(message, turn):
            data.update(projected=True, preview=None)
            return
        data["preview"] = clipped(text, self.preview_chars)
        if len(text) > self.preview_chars and len(text) <= self.max_output_chars:
            data["full"] = digest(text)
            trace.batch.blobs[data["full"]] = text

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        await next()
        trace = self._trace(ctx.turn)
        if trace is not None:
            self._flush_soon(ctx.turn, trace)

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        await next()
        trace = self._trace(ctx)
        if trace is None:
            return
        answer = next_answer(ctx.messages)
        trace.run.update(status="ok", finished=time.time(), output=clipped(answer, 4_000))
        trace.batch.runs.append(trace.run)
        await self._flush(ctx, trace)

    async def _record_request(
        self, trace: _RunTrace, span_id: str, request: ModelRequest, turn: TurnContext
    ) -> int:
        """Add ``request`` to the batch as a delta; return its estimated input tokens."""
        thread = turn.thread_id
        previous = await self._previous(thread)
        seq, old = (previous[0] + 1, previous[1]) if previous else (0, [])
        old_set = set(old)
        known = self._known.get(thread)
        if known is None:
            known = self._known[thread] = {}
        keys: list[str] = []
        estimate = 0
        ephemeral = {id(m) for m in turn.ephemeral}
        for message in request.messages:
            same = trace.seen.get(id(message))
            if same is not None and same[0] is message:
                keys.append(same[1].key)
                estimate += same[1].tokens
                continue
            signature = _signature(message)
            entry = known.get(message.id)
            if entry is None or entry.signature != signature:
                body = dump_messages([message])[1:-1]
                entry = _Known(signature, f"{message.id}:{digest(body)}", message_tokens(message))
                known[message.id] = entry
                if entry.key not in old_set:
                    projected = id(message) in ephemeral or not _persistable(message, turn)
                    kind = _message_kind(message, projected)
                    trace.batch.messages.append(
                        (
                            thread,
                            entry.key,
                            message.role,
                            entry.tokens,
                            kind,
                            None if projected else body,
                        )
                    )
            trace.seen[id(message)] = (message, entry)
            keys.append(entry.key)
            estimate += entry.tokens
        system = request.system_prompt
        tools = json.dumps(
            [
                {"name": t.name, "description": t.description, "parameters": t.parameters}
                for t in request.tools
            ],
            default=str,
        )
        base = turn.system_prompt
        hashes = [digest(system), digest(tools), digest(base)]
        for digest_, text in zip(hashes, (system, tools, base), strict=True):
            if digest_ not in self._blobs:
                self._blobs[digest_] = None
                trace.batch.blobs[digest_] = text
        while len(self._blobs) > _MAX_BLOBS:
            self._blobs.popitem(last=False)
        trace.batch.requests.append(_delta(span_id, thread, seq, old, keys, hashes))
        self._remember(thread, seq, keys)
        estimate += sum(tool_tokens(t) for t in request.tools) - (-len(system) // CHARS_PER_TOKEN)
        return estimate

    async def _previous(self, thread: str) -> tuple[int, list[str]] | None:
        found = self._last.get(thread)
        if found is not None:
            self._last.move_to_end(thread)
            return found
        try:
            return await self.store.last_request(thread)
        except PlaitError:
            return None

    def _remember(self, thread: str, seq: int, keys: list[str]) -> None:
        self._last[thread] = (seq, keys)
        self._last.move_to_end(thread)
        self._known.move_to_end(thread)
        while len(self._last) > _MAX_THREADS:
            forgotten, _ = self._last.popitem(last=False)
            self._known.pop(forgotten, None)

    def _flush_soon(self, turn: TurnContext, trace: _RunTrace) -> None:
        """Write what the batch holds in the background, after the run's earlier writes (the
        turn goes on meanwhile; :meth:`_flush` and :meth:`aclose` wait for it)."""
        batch, trace.batch = trace.batch, TraceBatch()
        if not batch:
            return
        write = asyncio.ensure_future(self._write(turn, trace, trace.pending, batch))
        trace.pending = write
        self._writes.add(write)
        write.add_done_callback(self._writes.discard)

    async def _flush(self, turn: TurnContext, trace: _RunTrace) -> None:
        """Write the batch now, after every earlier write of the run."""
        batch, trace.batch = trace.batch, TraceBatch()
        await self._write(turn, trace, trace.pending, batch)
        trace.pending = None

    async def _write(
        self,
        turn: TurnContext,
        trace: _RunTrace,
        after: asyncio.Future[None] | None,
        batch: TraceBatch,
    ) -> None:
        if after is not None:
            await asyncio.shield(after)
        try:
            await self.store.write(batch)
        except PlaitError as exc:
            if not trace.failed:
                trace.failed = True
                turn.emit(ErrorOccurred(error=exc, where="trace"))


def next_answer(messages: list[Message]) -> str:
    """The text of the last assistant message of ``messages`` (``""`` if none)."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message.text
    return ""


def _persistable(message: Message, turn: TurnContext) -> bool:
    """Whether the persist filters would write ``message`` unchanged (see ``persist_filters``)."""
    kept: list[Message] = [message]
    for keep_out in turn.persist_filters:
        kept = keep_out(kept)
    return len(kept) == 1 and (kept[0] is message or kept[0] == message)


def _delta(
    span_id: str, thread: str, seq: int, old: list[str], keys: list[str], hashes: list[str]
) -> RequestRow:
    new_set = set(keys)
    old_set = set(old)
    kept_old = [k for k in old if k in new_set]
    kept_new = [k for k in keys if k in old_set]
    full = (
        seq % CHECKPOINT_EVERY == 0
        or kept_old != kept_new
        or len(new_set) != len(keys)
        or len(old_set) != len(old)
    )
    return RequestRow(
        span_id=span_id,
        thread_id=thread,
        seq=seq,
        full=full,
        removed=[] if full else [k for k in old if k not in new_set],
        added=[(i, k) for i, k in enumerate(keys) if full or k not in old_set],
        system_hash=hashes[0],
        tools_hash=hashes[1],
        base_prompt_hash=hashes[2],
    )
