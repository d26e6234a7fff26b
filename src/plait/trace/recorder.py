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
  persist filter keeps it out, the full output (up to ``max_output_chars``) and the images and
  files it returned, by reference (their bytes once, up to ``max_blob_bytes`` each);
* an ``action`` span for every event middleware emits (an eviction, a summary, a disclosure, a
  rejected call, a provider retry), observed through ``TurnContext.observe``
  (:mod:`plait.trace.actions`): its type and fields, bounded; a provider retry is also listed on
  its model call (``retries``);
* the run's end through ``TurnContext.finalizers``: ``ok`` with the answer, or ``error`` /
  ``cancelled`` with the error, however the turn failed (a model call, a limit, a store error),
  or ``paused`` when it ended on held tool calls (its ``turn_paused`` action lists them; the
  resume is a run of its own whose ``turn_resumed`` action says who decided what, and when:
  :mod:`plait.trace.pauses`);
* a ``cache_broken`` event (``CacheWatch``) as an action and on the model call of its dispatch
  (``cache_broken``: the first differing block, message and cause);
* a subagent's run, from the ``SubagentEventRelayed`` events, as one ``subagent`` span
  (:mod:`plait.trace.tree`), nested on the page under the tool call that started it.

Requests are turned into deltas by :class:`~plait.trace.requests.RequestDeltas`. A turn's rows
are one transaction, written in order by one background writer
(:class:`~plait.trace.writer.BatchWriter`) when the turn ends, however it ends (and every
:data:`FLUSH_EVERY` model calls of a long turn); batches queued meanwhile merge into the next
transaction. The turn waits only when the writer is behind
(:data:`MAX_PENDING_WRITES`, ``max_queued``); past ``max_queued`` (:data:`MAX_QUEUED_BATCHES`)
batches, while the store is down or hangs, the oldest is dropped, counted in
:attr:`TraceRecorder.dropped_batches` and told once in a ``plait.trace`` log warning (again after
a write lands). :meth:`TraceRecorder.drain` waits for everything recorded so far;
:meth:`TraceRecorder.aclose` drains, then closes the store.

Never stored: a message a persist filter would keep out of the thread store or that sits in
``TurnContext.ephemeral`` (a skill body, a pinned note) is recorded by reference only (role and
token count, no body). A failure to write the trace never fails the turn: it is reported once per
turn as a non-fatal :class:`~plait.runtime.events.ErrorOccurred` (``where="trace"``), by the
turn itself while it runs, else by the next turn (writes land after their turn), and kept in
:attr:`TraceRecorder.write_error`.
"""

from __future__ import annotations

import time
from typing import Any

from plait.errors import ConfigurationError, PlaitError, clipped
from plait.messages import (
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    new_id,
)
from plait.middleware.base import Middleware, ModelHandler, Next, ToolHandler
from plait.middleware.context import DispatchContext, TurnContext
from plait.models.base import ModelRequest, ModelResponse
from plait.runtime.events import RUNTIME_EVENTS, ErrorOccurred
from plait.trace import tree
from plait.trace.actions import RETRY_EVENTS, observe
from plait.trace.parts import MAX_BLOB_BYTES, part_blobs, part_refs
from plait.trace.requests import RequestDeltas, digest, persistable
from plait.trace.store import TraceStore
from plait.trace.values import field, next_answer, output_text, response_data
from plait.trace.writer import CLOSE_TIMEOUT, BatchWriter, RunTrace

__all__ = [
    "CLOSE_TIMEOUT",
    "FLUSH_EVERY",
    "MAX_BLOB_BYTES",
    "MAX_OUTPUT_CHARS",
    "MAX_PENDING_WRITES",
    "MAX_QUEUED_BATCHES",
    "PREVIEW_CHARS",
    "RETRY_EVENTS",
    "RUNTIME_EVENTS",
    "TraceRecorder",
]

MAX_OUTPUT_CHARS = 1_000_000
"""Default bound on a tool output kept whole in the trace store; longer ones keep the preview."""

PREVIEW_CHARS = 2_000
"""Characters of a tool output shown inline (head of the text)."""

FLUSH_EVERY = 16
"""A turn's rows are written in one transaction when it ends; a turn longer than this many model
calls also writes what it holds (in the background) every this many calls, so it shows while it
runs and memory stays bounded."""

MAX_PENDING_WRITES = 64
"""When more batches than this are queued at the end of a turn, the turn waits for the writer
(the store is slower than the agent; memory stays bounded)."""

MAX_QUEUED_BATCHES = 256
"""Default bound on the batches waiting for the writer (``TraceRecorder(max_queued=)``). Failed
turns queue theirs without waiting, so while the store is down or hangs (and the provider fails
every turn) the queue would grow without end; past the bound the oldest batch is dropped."""


class TraceRecorder(Middleware):
    """Records every turn of the agent it is added to into ``store`` (see the module docstring).

    ``store`` is a :class:`~plait.trace.store.TraceStore` (SQLite or Postgres). ``agent`` names
    the agent in the run list. Opt-in: nothing is recorded unless the recorder is in the
    middleware list (the ``plait`` CLI adds one unless ``--no-trace``).

    With ``background`` (the default) a turn does not wait for its trace: call
    :meth:`aclose` (or :meth:`drain`) before the event loop ends, or the last writes may not
    land. ``background=False`` makes each successful turn wait for its write, so its trace is
    complete when ``run`` returns (a failed turn's is still written in the background).
    ``max_queued`` bounds the batches waiting for the writer (see :data:`MAX_QUEUED_BATCHES`);
    ``max_blob_bytes`` the bytes of one image or file kept (:data:`MAX_BLOB_BYTES`, 5 MiB: a
    larger one keeps its reference only; each blob is stored once, see
    :mod:`plait.trace.parts`).
    """

    def __init__(
        self,
        store: TraceStore,
        *,
        agent: str = "agent",
        max_output_chars: int = MAX_OUTPUT_CHARS,
        preview_chars: int = PREVIEW_CHARS,
        background: bool = True,
        max_queued: int = MAX_QUEUED_BATCHES,
        max_blob_bytes: int = MAX_BLOB_BYTES,
    ) -> None:
        for name, value, least, default in (
            ("max_queued", max_queued, 1, MAX_QUEUED_BATCHES),
            ("max_blob_bytes", max_blob_bytes, 0, MAX_BLOB_BYTES),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(
                    f"TraceRecorder: {name} must be an integer >= {least}, not {value!r}; the "
                    f"default is {default:,}."
                )
        self.max_queued = max_queued
        self.store = store
        self.background = background
        self.agent = agent
        self.max_output_chars = max_output_chars
        self.preview_chars = preview_chars
        self._deltas = RequestDeltas(store, max_blob_bytes)
        self._writes = BatchWriter(store, self._deltas, max_queued)
        self.last_run_id: str | None = None
        """The id of the run (turn) most recently started, for a link to its trace."""

    async def aclose(self) -> None:
        """Wait (up to :data:`CLOSE_TIMEOUT` seconds) for background writes (a failed turn's
        trace among them), then close the trace store."""
        await self.drain()
        await self.store.aclose()

    @property
    def dropped_batches(self) -> int:
        """Batches dropped unwritten because ``max_queued`` were already waiting."""
        return self._writes.dropped_batches

    @property
    def write_error(self) -> PlaitError | None:
        """The last error writing the trace (``None`` if every write succeeded)."""
        return self._writes.write_error

    async def drain(self) -> None:
        """Wait up to :data:`CLOSE_TIMEOUT` seconds until every batch queued before this call is
        written (a failed or cancelled turn's trace is written in the background: the turn
        cannot wait for it). Batches queued meanwhile (other turns still running) are not waited
        for; returns early if the writer stopped (its loop was cancelled)."""
        await self._writes.drain()

    def _trace(self, ctx: TurnContext) -> RunTrace | None:
        found = ctx.scratch.get(self)
        return found if isinstance(found, RunTrace) else None

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
        trace = RunTrace(run)
        trace.messages.start(ctx)
        self.last_run_id = run_id
        ctx.scratch[self] = trace
        trace.batch.runs.append(run)
        unreported = self._writes.take_unreported()
        if unreported is not None:
            ctx.emit(ErrorOccurred(error=unreported, where="trace"))
        ctx.observe(lambda event: observe(trace, event, self.preview_chars))
        ctx.finalizers.append(lambda error: self._finish(ctx, trace, error))
        await next()

    def _finish(self, ctx: TurnContext, trace: RunTrace, error: BaseException | None) -> None:
        """The turn's finalizer: a turn that ended with an error (a failed model call, a limit,
        a store error, an abort, a cancellation) closes its run with that error, written in the
        background (:meth:`drain`)."""
        trace.ended = True
        if error is None and not trace.paused:
            return  # closed ``ok`` by turn_output (a run marked ok whose turn then failed is not)
        trace.batch.spans += tree.child_spans(trace.children, trace.run["id"])
        if error is None:  # no turn_output: the resume records its own run
            trace.run.update(status="paused", finished=time.time())
            if not trace.batch.runs:
                trace.batch.runs.append(trace.run)
            self._flush_soon(ctx, trace)
            return
        cancelled = not isinstance(error, Exception)
        trace.run.update(
            status="cancelled" if cancelled else "error",
            error=field(error),
            finished=time.time(),
        )
        if not trace.batch.runs:  # a batch holds at most this run (its current state)
            trace.batch.runs.append(trace.run)
        self._flush_soon(ctx, trace)

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
        estimate = await self._deltas.record(
            trace.batch, trace.messages, span_id, request, ctx.turn
        )
        started = time.time()
        data: dict[str, Any] = {"model": request.model or ctx.turn.model.name}
        data["estimated_input_tokens"] = estimate
        broken, trace.cache_broken = trace.cache_broken, None
        if broken is not None and broken.get("dispatch") == ctx.index:
            data["cache_broken"] = broken  # this request's prefix differs from the last one's
        trace.call = data
        try:
            response = await call_next(request)
        except BaseException as exc:
            data["error"] = field(exc)
            data["cancelled"] = not isinstance(exc, Exception)
            raise
        else:
            data.update(response_data(response, data["model"], self.max_output_chars))
            return response
        finally:
            trace.call = None
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
            trace.calls += 1
            if trace.calls % FLUSH_EVERY == 0:
                self._flush_soon(ctx.turn, trace)

    async def wrap_tool_call(
        self, call: ToolCall, ctx: DispatchContext, call_next: ToolHandler
    ) -> ToolResult:
        trace = self._trace(ctx.turn)
        if trace is None:
            return await call_next(call)
        started = time.time()
        data: dict[str, Any] = {"call_id": call.id, "args": field(call.args)}
        try:
            result = await call_next(call)
        except BaseException as exc:
            data["error"] = field(exc)
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
            under = f"{ctx.turn.thread_id}/{call.id}"  # a subagent it ran: its record(s) now
            trace.batch.spans += tree.child_spans(trace.children, trace.run["id"], under)

    def _tool_output(
        self,
        trace: RunTrace,
        data: dict[str, Any],
        call: ToolCall,
        result: ToolResult,
        turn: TurnContext,
    ) -> None:
        message = ToolMessage.from_result(result, call.name)
        text = output_text(result.data)
        data.update(is_error=result.is_error, chars=len(text))
        if not persistable(message, turn):
            data.update(projected=True, preview=None)
            return
        data["preview"] = clipped(text, self.preview_chars)
        if result.parts:  # images and files by reference, their bytes once
            data["parts"] = part_refs(result.parts)
            self._deltas.keep(trace.batch, part_blobs(result.parts))
        if len(text) > self.preview_chars and len(text) <= self.max_output_chars:
            data["full"] = digest(text)
            trace.batch.blobs[data["full"]] = text

    async def turn_output(self, ctx: TurnContext, next: Next) -> None:
        await next()
        trace = self._trace(ctx)
        if trace is None or ctx.aborted:
            return  # the turn fails: the finalizer closes the run with its error
        answer = next_answer(ctx.messages)
        trace.batch.spans += tree.child_spans(trace.children, trace.run["id"])
        trace.run.update(status="ok", finished=time.time(), output=clipped(answer, 4_000))
        if not trace.batch.runs:
            trace.batch.runs.append(trace.run)
        self._flush_soon(ctx, trace)
        behind = self._writes.waiting > min(MAX_PENDING_WRITES, self.max_queued - 1)
        if not self.background or behind:
            await self.drain()  # asked to, or the store is behind: no pile-up, no drop

    def _flush_soon(self, turn: TurnContext, trace: RunTrace) -> None:
        """Queue what the batch holds for the background writer; rows land in the order they
        were queued (:meth:`drain` and :meth:`aclose` wait for them)."""
        self._writes.flush_soon(turn, trace)
