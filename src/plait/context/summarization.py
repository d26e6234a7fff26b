"""``SummarizationMiddleware``: compress older turns before a request exceeds its budget.

On ``before_model_call``, when the request's estimated input tokens (messages, system prompt and
tool schemas; see :class:`~plait.tokens.TokenAccountant`) reach
``max_input_tokens * trigger_ratio``, the newest ``keep_messages`` messages of the thread's
history stay verbatim (messages middleware projects after the history, such as a skill body, are
kept too and do not count) and the older ones are replaced by one summary carried as a
:class:`~plait.messages.SystemMessage` at the start of ``request.messages``, after the thread's
leading system messages if it has any (those are the application's instructions: they stay
verbatim and are never folded). The cut is moved
back with :func:`~plait.context.pairs.safe_cut` so a tool call never loses its result, and the
kept messages are :func:`~plait.context.pairs.repair`-ed, so the request never holds an orphan.

**Where the summary lives.** Summarization changes the *request* only; the thread store keeps
the raw history. The summary is recorded in the thread *state* under ``state_key``
(``{summary, covered, boundary_id, message_id, created_at, passes, summarizer}``): it is
persisted with the dispatch, survives across turns and processes, and says exactly which
messages it stands for (thread messages ``[0, covered)``, less the leading system messages).
Every later request reuses it byte-for-byte (prompt-cache friendly) until the threshold is
crossed again; the next pass folds the previous summary and only the messages since
``covered``, never the whole history.

**Offload.** With a ``backend``, the messages a pass folded are written as JSON to
``conversation_history/<thread>/<first>-<end>.json`` by a background task: the turn never waits,
and a failure becomes a ``HistoryOffloadFailed`` event. ``await middleware.drain()`` waits for
pending writes (e.g. before a process exits), at most ``DRAIN_TIMEOUT`` (30 s) by default.

**Placement.** Put it before any middleware whose ``before_model_call`` reorders or prepends
messages (after :class:`~plait.context.overflow.OverflowRecoveryMiddleware`): it summarizes only
when the request's messages start with the thread's history. Ephemeral messages appended after
the history are never summarized (they must not reach the state).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, overload

from plait.backends.base import BackendWriteSurface
from plait.context.events import HistorySummarized, SummarizerFailed
from plait.context.offload import HISTORY_ROOT, READ_TOOL_NAME, history_path, write_history
from plait.context.pairs import repair, safe_cut
from plait.context.ratio import RatioMeter
from plait.context.reader import PageReader, shared_reader
from plait.context.summarizers import ExtractiveSummarizer, Summarizer
from plait.errors import ConfigurationError
from plait.messages import Message, SystemMessage, new_id
from plait.middleware.base import Middleware, Next
from plait.middleware.context import DispatchContext, EventSink, TurnContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest
from plait.tokens import (
    TokenAccountant,
    TokenCounter,
    thread_counter,
)
from plait.tools import Tool

__all__ = [
    "STATE_KEY",
    "SUMMARY_SOURCE",
    "SummarizationInfo",
    "SummarizationMiddleware",
    "SummaryRecord",
]

DRAIN_TIMEOUT = 30.0
"""Seconds :meth:`SummarizationMiddleware.drain` waits for pending history offloads by default."""

MAX_HISTORY_FILES = 20
"""How many offloaded history files a summary names (the newest); its folder lists them all."""

STATE_KEY = "plait.context.summary"
SUMMARY_SOURCE = "plait.context.summary"
"""``metadata["source"]`` of the summary system message."""


@dataclass(frozen=True, slots=True)
class SummarizationInfo:
    """What ``on_summarized`` receives after a pass (the seed's three figures)."""

    original_tokens: int
    summarized_tokens: int
    messages_removed: int


OnSummarized = Callable[[SummarizationInfo], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """The summary of thread messages ``[0, covered)``, as kept in the thread state."""

    summary: str
    covered: int
    boundary_id: str
    message_id: str
    created_at: int
    passes: int
    summarizer: str
    history: tuple[str, ...] = ()
    """Backend paths of the folded messages, oldest first (the newest ``MAX_HISTORY_FILES``)."""

    def to_state(self) -> dict[str, Any]:
        """The record as plain JSON for the thread state."""
        return {**asdict(self), "history": list(self.history)}

    @classmethod
    def from_state(cls, value: Any) -> SummaryRecord | None:
        """The record in a state value, or ``None`` if it is missing or malformed."""
        try:
            fields = dict(value)
            fields["history"] = tuple(str(path) for path in fields.get("history", ()))
            record = cls(**fields)
        except (TypeError, ValueError):
            return None
        ok = isinstance(record.summary, str) and isinstance(record.covered, int)
        return record if ok and record.covered > 0 else None


class _Tail(Sequence[Message]):
    """``messages[start:]`` without copying it."""

    __slots__ = ("_messages", "_start")

    def __init__(self, messages: Sequence[Message], start: int) -> None:
        self._messages, self._start = messages, start

    def __len__(self) -> int:
        return len(self._messages) - self._start

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._messages, self._start, None)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [self._messages[self._start + i] for i in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._messages[self._start + index]


def _leading_instructions(history: Sequence[Message]) -> int:
    """How many messages at the start of the thread are system messages (instructions the
    application put there), which a pass keeps verbatim in front of the summary."""
    lead = 0
    for message in history:
        if not isinstance(message, SystemMessage) or message.metadata.get("source") == (
            SUMMARY_SOURCE
        ):
            break
        lead += 1
    return lead


class SummarizationMiddleware(Middleware):
    """Summarize older messages at ``max_input_tokens * trigger_ratio``; see the module docs.

    ``summarizer`` defaults to :class:`ExtractiveSummarizer` (no model call); the summary is
    bounded by ``max_summary_tokens`` (default a tenth of the budget, 64 to 2000). ``thread_id``
    overrides the thread folder of offloaded history: every thread the middleware serves then
    writes there, under names made of message ranges only, and ``read_evicted_result`` reads it
    from any thread, so give it to a middleware that serves one conversation.
    ``on_summarized`` may be sync or async.
    """

    placement = Placement(before=("ResultEvictionMiddleware",))

    def __init__(
        self,
        max_input_tokens: int,
        *,
        keep_messages: int = 6,
        trigger_ratio: float = 0.85,
        backend: BackendWriteSurface | None = None,
        thread_id: str | None = None,
        on_summarized: OnSummarized | None = None,
        summarizer: Summarizer | None = None,
        max_summary_tokens: int | None = None,
        counter: TokenCounter | None = None,
        state_key: str = STATE_KEY,
        history_root: str = HISTORY_ROOT,
        read_tool: bool = True,
        page_chars: int = 4000,
    ) -> None:
        if max_input_tokens < 1 or keep_messages < 1 or not 0 < trigger_ratio <= 1:
            raise ConfigurationError(
                "SummarizationMiddleware needs max_input_tokens >= 1, keep_messages >= 1 and "
                "0 < trigger_ratio <= 1."
            )
        self.max_input_tokens = max_input_tokens
        self.keep_messages = keep_messages
        self.trigger_ratio = trigger_ratio
        self.backend = backend
        self.thread_id = thread_id
        self.on_summarized = on_summarized
        self._fallback = ExtractiveSummarizer(counter=counter)
        self.summarizer: Summarizer = summarizer or self._fallback
        self.max_summary_tokens = max_summary_tokens or max(64, min(2000, max_input_tokens // 10))
        self.counter = counter
        self.ratio_meter = RatioMeter()
        self.accountant = TokenAccountant(counter)
        self._measured: dict[TokenCounter, TokenAccountant] = {}
        self.state_key = state_key
        self.history_root = history_root
        self._messages: dict[str, SystemMessage] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._read_tool: Tool | None = None
        if backend is not None and read_tool and isinstance(backend, PageReader):
            reader = shared_reader(backend, page_chars)
            reader.allow(history_root, thread_id, page_chars)
            self._read_tool = reader.tool

    def tools(self) -> Sequence[Tool]:
        """``read_evicted_result``, when the backend can read (see :mod:`plait.context.reader`)."""
        return () if self._read_tool is None else (self._read_tool,)

    @property
    def threshold(self) -> float:
        return self.max_input_tokens * self.trigger_ratio

    def record(self, turn: TurnContext) -> SummaryRecord | None:
        """This thread's current summary, if any."""
        return SummaryRecord.from_state(turn.state.get(self.state_key))

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        return await self._process(request, ctx.turn, force=False) or request

    async def compact(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest | None:
        """Run a pass now, whatever the estimate (overflow recovery calls this). ``request`` may
        already carry this middleware's summary. ``None`` if there was nothing left to fold."""
        return await self._process(request, ctx.turn, force=True)

    async def drain(self, timeout: float | None = DRAIN_TIMEOUT) -> None:  # noqa: ASYNC109
        """Wait until every background history offload has finished, at most ``timeout``
        seconds (:data:`DRAIN_TIMEOUT` by default; ``None``: no bound). Writes still pending
        then are cancelled, each reported by a ``HistoryOffloadFailed`` event: their history is
        not offloaded, and reading a file the summary names says it was never written."""
        try:
            async with asyncio.timeout(timeout):
                while self._tasks:
                    pending = list(self._tasks)
                    await asyncio.gather(*pending, return_exceptions=True)
                    # Done now, but their discard callbacks may not have run yet (awaiting
                    # finished tasks need not yield): drop them here, or this would spin.
                    self._tasks.difference_update(pending)
        except TimeoutError:
            pending = list(self._tasks)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            self._tasks.difference_update(pending)

    def summary_message(self, record: SummaryRecord) -> SystemMessage:
        """The system message carrying ``record`` (the same object for the same record)."""
        message = self._messages.get(record.message_id)
        if message is None:
            if len(self._messages) > 64:
                self._messages.clear()
            text = (
                f"Summary of the earlier conversation ({record.covered} messages, condensed; "
                f"the newest messages follow in full):\n{record.summary}{self._where(record)}"
            )
            meta = {"source": SUMMARY_SOURCE, "covered": record.covered}
            message = SystemMessage(text, metadata=meta, id=record.message_id)
            self._messages[record.message_id] = message
        return message

    def _where(self, record: SummaryRecord) -> str:
        """Where the folded messages are kept word for word, and how to read them."""
        if not record.history:
            return ""
        folder = record.history[-1].rsplit("/", 1)[0]
        files = ", ".join(path.rsplit("/", 1)[-1] for path in record.history)
        how = (
            f' Read them with {READ_TOOL_NAME}(path="{folder}/<file>", offset=0), page by page; '
            f'{READ_TOOL_NAME}(path="{folder}") lists every file.'
            if self._read_tool is not None
            else ""
        )
        return (
            f"\n\n[The folded messages are saved word for word, as JSON, in {folder}/ (file "
            f"names give the message range): {files}.{how}]"
        )

    def _view(
        self, request: ModelRequest, turn: TurnContext
    ) -> tuple[SummaryRecord | None, int, int, Sequence[Message], int] | None:
        """``(record, lead, base, tail, persisted)``: the request's first ``lead`` messages are
        the thread's leading system messages (kept verbatim, never folded); ``tail[k]`` is thread
        message ``base + k`` for ``k < persisted``; ``None`` if the request does not line up with
        the thread."""
        msgs, history = request.messages, turn.messages
        lead = _leading_instructions(history)
        if [m.id for m in msgs[:lead]] != [m.id for m in history[:lead]]:
            return None
        record = self.record(turn)
        if record is not None and not lead < record.covered <= len(history):
            record = None
        if record is not None and history[record.covered - 1].id != record.boundary_id:
            record = None
        if record is not None and len(msgs) > lead and msgs[lead].id == record.message_id:
            base, start = record.covered, lead + 1
        else:
            base = record.covered if record is not None else lead
            start = base
        persisted = len(history) - base
        if persisted > len(msgs) - start or (
            persisted > 0 and msgs[start + persisted - 1].id != history[-1].id
        ):
            return None
        # A view, not a copy: below the threshold nothing is sliced (O(1) per dispatch).
        return record, lead, base, _Tail(msgs, start), persisted

    async def _process(
        self, request: ModelRequest, turn: TurnContext, *, force: bool
    ) -> ModelRequest | None:
        view = self._view(request, turn)
        if view is None:
            return None
        record, lead, base, tail, persisted = view
        head = request.messages[:lead]
        summarized = [*head, self.summary_message(record), *tail] if record else None
        anchor_from = lead + 1 + record.created_at - base if record else 0
        current = request.messages if summarized is None else summarized
        accountant = self.accountant_for(turn)
        before = self._estimate(accountant, request, current, anchor_from)
        unchanged = None if summarized is None else request.replace(messages=summarized)
        if not force and before < self.threshold:
            return unchanged
        # keep_messages counts the thread's own messages: projected ones after the history (a
        # pinned or loaded skill body) are kept anyway and must not push history into the fold.
        cut = safe_cut(tail, persisted - self.keep_messages)
        if cut <= 0:
            return None if force else unchanged
        span, kept = tail[:cut], repair(tail[cut:])
        # The summary lands in thread state and the span in the offload: what middleware keeps
        # out of persistence (a projected skill body, say) must stay out of both.
        persistable = list(span)
        for keep_out in turn.persist_filters:
            persistable = keep_out(persistable)
        summary, used = await self._summarize(record, persistable, turn)
        thread = self.thread_id or turn.thread_id
        offload = None
        if self.backend is not None and persistable:
            offload = history_path(self.history_root, thread, base, base + cut)
        history = (*(record.history if record else ()), *([offload] if offload else []))
        new = SummaryRecord(
            summary=summary,
            covered=base + cut,
            boundary_id=span[-1].id,
            message_id=new_id(),
            created_at=len(turn.messages),
            passes=(record.passes if record else 0) + 1,
            summarizer=used,
            history=history[-MAX_HISTORY_FILES:],
        )
        turn.state[self.state_key] = new.to_state()
        messages = [*head, self.summary_message(new), *kept]
        # The list changed shape: drop checkpoints that could line up with it by position.
        self.reset_estimates()
        after = self._estimate(accountant, request, messages, len(messages))
        info = SummarizationInfo(before, after, cut)
        await self._report(turn, info, new, forced=force)
        if offload is not None:
            self._offload(thread, offload, persistable, turn.emit)
        return request.replace(messages=messages)

    def accountant_for(self, turn: TurnContext) -> TokenAccountant:
        """The accountant for ``turn``'s thread: with no ``counter`` configured, it estimates
        at the thread's measured characters per token once a provider reported usage (see
        :func:`~plait.tokens.thread_counter`); otherwise :attr:`accountant`."""
        counter = thread_counter(turn.state, self.counter)
        if counter is self.accountant.counter:
            return self.accountant
        found = self._measured.get(counter)
        if found is None:
            if len(self._measured) >= 16:
                self._measured.clear()
            found = self._measured[counter] = TokenAccountant(counter)
        return found

    def reset_estimates(self) -> None:
        """Drop every accountant's checkpoints (after the message list changed shape)."""
        self.accountant.reset()
        for accountant in self._measured.values():
            accountant.reset()

    async def dispatch_output(self, ctx: DispatchContext, next: Next) -> None:
        """Record the thread's measured characters per token from the dispatch's usage (see
        :mod:`plait.context.ratio`), unless a ``counter`` was configured."""
        if self.counter is None:
            self.ratio_meter.record(ctx)
        await next()

    @staticmethod
    def _estimate(
        accountant: TokenAccountant,
        request: ModelRequest,
        messages: Sequence[Message],
        anchor_from: int,
    ) -> int:
        return accountant.request(
            messages,
            system_prompt=request.system_prompt,
            tools=request.tools,
            anchor_from=anchor_from,
        )

    async def _report(
        self,
        turn: TurnContext,
        info: SummarizationInfo,
        record: SummaryRecord,
        *,
        forced: bool,
    ) -> None:
        """Emit the event, call ``on_summarized``."""
        thread = self.thread_id or turn.thread_id
        turn.emit(
            HistorySummarized(
                thread_id=thread,
                original_tokens=info.original_tokens,
                summarized_tokens=info.summarized_tokens,
                messages_removed=info.messages_removed,
                covered=record.covered,
                summarizer=record.summarizer,
                forced=forced,
            )
        )
        if self.on_summarized is not None:
            outcome = self.on_summarized(info)
            if inspect.isawaitable(outcome):
                await outcome

    async def _summarize(
        self, record: SummaryRecord | None, span: Sequence[Message], turn: TurnContext
    ) -> tuple[str, str]:
        previous = record.summary if record else None
        limit = self.max_summary_tokens
        if self.summarizer is self._fallback:
            return self._fallback.fold(previous, span, max_tokens=limit), self._fallback.name
        try:
            return await self.summarizer.summarize(previous, span, max_tokens=limit), (
                self.summarizer.name
            )
        except Exception as exc:
            turn.emit(SummarizerFailed(summarizer=self.summarizer.name, error=exc))
            return self._fallback.fold(previous, span, max_tokens=limit), self._fallback.name

    def _offload(self, thread: str, path: str, span: Sequence[Message], emit: EventSink) -> None:
        if self.backend is None:
            return
        task = asyncio.get_running_loop().create_task(
            write_history(self.backend, path, list(span), thread, emit)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
