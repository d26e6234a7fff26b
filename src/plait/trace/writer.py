"""One turn's recording state (:class:`RunTrace`) and the background writer that lands the rows
it queues (:class:`BatchWriter`), in order, one transaction per round.

A batch queued while a write is under way goes into the next transaction with every other one
queued meanwhile. Past ``max_queued`` waiting batches the oldest is dropped, counted in
:attr:`BatchWriter.dropped_batches` and told once in a ``plait.trace`` log warning (again after
a write lands). A write error is reported once per turn as a non-fatal
:class:`~plait.runtime.events.ErrorOccurred` (``where="trace"``): by the turn while it runs, else
by the next turn (:meth:`BatchWriter.take_unreported`).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from typing import Any

from plait.errors import PlaitError
from plait.middleware.context import TurnContext
from plait.runtime.events import ErrorOccurred
from plait.trace.requests import RequestDeltas, TurnMessages
from plait.trace.rows import TraceBatch
from plait.trace.store import TraceStore, unexpected_write_error

__all__ = ["CLOSE_TIMEOUT", "BatchWriter", "RunTrace"]

CLOSE_TIMEOUT = 30.0
"""Seconds :meth:`BatchWriter.drain` (and ``TraceRecorder.aclose``) waits for writes in flight."""

_log = logging.getLogger("plait.trace")


@dataclasses.dataclass(slots=True)
class RunTrace:
    """One turn's recording state (kept in ``TurnContext.scratch``)."""

    run: dict[str, Any]
    batch: TraceBatch = dataclasses.field(default_factory=TraceBatch)
    dispatch: int = 0
    failed: bool = False
    ended: bool = False
    calls: int = 0
    call: dict[str, Any] | None = None
    messages: TurnMessages = dataclasses.field(default_factory=TurnMessages)
    tools: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    paused: bool = False
    cache_broken: dict[str, Any] | None = None
    """A ``cache_broken`` event's fields, until the model call of its dispatch takes them."""
    children: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Subagent runs seen through relayed events, by child thread (:mod:`plait.trace.tree`)."""


class BatchWriter:
    """Writes the batches queued by a recorder's turns to ``store`` (see the module docstring).
    ``deltas`` forgets what a lost batch held, so a later request sends it again."""

    def __init__(self, store: TraceStore, deltas: RequestDeltas, max_queued: int) -> None:
        self.store = store
        self.max_queued = max_queued
        self.dropped_batches = 0
        self.write_error: PlaitError | None = None
        self._deltas = deltas
        self._warned_drop = False
        self._queue: list[tuple[TurnContext, RunTrace, TraceBatch]] = []
        self._writer: asyncio.Future[None] | None = None
        self._queued = 0  # batches queued so far
        self._written = 0  # batches whose write ended (landed or failed)
        self._round: asyncio.Future[None] | None = None  # done when a write ends (for drain)
        self._unreported: PlaitError | None = None

    @property
    def waiting(self) -> int:
        """Batches queued and not yet taken by a write."""
        return len(self._queue)

    @property
    def draining(self) -> bool:
        """Whether a :meth:`drain` waits (or waited) on a write round."""
        return self._round is not None

    def take_unreported(self) -> PlaitError | None:
        """The write error of a turn that had ended when it came (for the next turn to report)."""
        error, self._unreported = self._unreported, None
        return error

    async def drain(self) -> None:
        """Wait up to :data:`CLOSE_TIMEOUT` seconds until every batch queued before this call is
        written. Batches queued meanwhile are not waited for; returns early if the writer
        stopped (its loop was cancelled)."""
        target = self._queued
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CLOSE_TIMEOUT
        while self._written < target and self._writer is not None and not self._writer.done():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            if self._round is None or self._round.done():
                self._round = loop.create_future()
            await asyncio.wait(
                [self._round, self._writer], timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )

    def flush_soon(self, turn: TurnContext, trace: RunTrace) -> None:
        """Queue what the turn's batch holds (the writer is started if idle)."""
        batch, trace.batch = trace.batch, TraceBatch()
        if not batch:
            return
        if len(self._queue) >= self.max_queued:
            self._drop_oldest()
        self._queue.append((turn, trace, batch))
        self._queued += 1
        if self._writer is None or self._writer.done():
            # An empty context: the writer outlives this turn and writes other turns' rows, so
            # it must not carry this turn's current span (a database span would be filed under
            # it) nor its retry listener (which holds the turn's context alive).
            loop = asyncio.get_running_loop()
            self._writer = loop.create_task(self._write_queued(), context=contextvars.Context())

    def _drop_oldest(self) -> None:
        """Drop the oldest batch still waiting (its rows are lost), count it, warn once until a
        write lands again; it counts as written for :meth:`drain`."""
        self._deltas.forget(self._queue.pop(0)[2])
        self.dropped_batches += 1
        self._written += 1
        if not self._warned_drop:
            self._warned_drop = True
            _log.warning(
                "The trace store is behind: %d batches wait for it (max_queued=%d), so the "
                "recorder dropped the oldest (those turns' traces are lost; the count is in "
                "TraceRecorder.dropped_batches). Last write error: %s. Check the trace store.",
                len(self._queue) + 1,
                self.max_queued,
                self.write_error or "none yet (a write is still under way)",
            )

    async def _write_queued(self) -> None:
        """Write the queue until it is empty, everything queued so far in one transaction."""
        while self._queue:
            queued, self._queue = self._queue, []
            merged = TraceBatch()
            for _, _, batch in queued:
                merged.extend(batch)
            try:
                await self.store.write(merged)
                self._warned_drop = False
            except Exception as exc:
                error = exc if isinstance(exc, PlaitError) else unexpected_write_error(exc)
                self.write_error = error
                self._deltas.forget(merged)
                for turn, trace, _ in queued:
                    self._report(turn, trace, error)
            self._written += len(queued)
            if self._round is not None and not self._round.done():
                self._round.set_result(None)

    def _report(self, turn: TurnContext, trace: RunTrace, error: PlaitError) -> None:
        """One ``ErrorOccurred(where="trace")`` per turn: by the turn while it runs, else by the
        next turn."""
        if trace.failed:
            return
        trace.failed = True
        if trace.ended:
            self._unreported = error
        else:
            turn.emit(ErrorOccurred(error=error, where="trace"))
