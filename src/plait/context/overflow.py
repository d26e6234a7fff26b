"""``OverflowRecoveryMiddleware``: when the provider says the request is too long, compact it
and try once more.

Provider adapters raise :class:`~plait.errors.ContextOverflowError`. Around the model call
(``wrap_model_call``) this middleware catches it, compacts the request and retries **once**:

1. a forced summarization pass (the ``summarization`` middleware you pass, so its thread-state
   record is updated; otherwise a private extractive one keeping ``keep_messages``);
2. if still above the target, the largest tool results are evicted, largest first: written
   through ``backend`` and replaced by the eviction reference (or, without a backend, cut to
   their start and end). Results that middleware keeps out of persistence (a projected skill
   body, which a ``TurnContext.persist_filters`` entry rewrites) are never evicted: the backend
   write and the recorded reference would persist them.

The retry's overflow, or having nothing left to compact, raises
:class:`ContextOverflowUnrecoverable` (a ``ContextOverflowError``) that says what to change.
The target is ``max_input_tokens * target_ratio`` when the window is known, else half of the
rejected request's estimate.

Evictions made here are recorded in the thread state (``state_key``, the newest 64, by message
id) and re-applied by ``before_model_call`` to every later request, so the same oversized result
does not overflow every following dispatch. The thread store keeps the raw messages.

**Placement: first in the middleware list.** Its ``wrap_model_call`` is then outermost (it sees
the overflow after any retrying middleware gave up, and retries through all of them), and its
``before_model_call`` applies recorded evictions before ``SummarizationMiddleware`` estimates.
If the agent also uses a ``SummarizationMiddleware``, pass that instance as ``summarization=``:
there is then one summary per thread (a private one would sit in front of it, and a
summarization middleware leaves alone a request that does not start with the thread history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from plait.backends.base import BackendWriteSurface
from plait.context.events import ContextOverflowRecovered
from plait.context.eviction import ResultEvictionMiddleware
from plait.context.offload import (
    EVICTED_ROOT,
    READ_TOOL_NAME,
    evicted_path,
    is_offloaded,
    offload_result,
    persistable,
    preview,
    serialize_result,
)
from plait.context.ratio import RatioMeter
from plait.context.reader import PageReader, shared_reader
from plait.context.summarization import SummarizationMiddleware
from plait.errors import ConfigurationError, ContextOverflowError
from plait.messages import Message, ToolMessage
from plait.middleware.base import Middleware, ModelHandler
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.tokens import CHARS_PER_TOKEN, TokenAccountant, TokenCounter, thread_counter
from plait.tools import Tool

__all__ = ["OVERFLOW_SOURCE", "ContextOverflowUnrecoverable", "OverflowRecoveryMiddleware"]

STATE_KEY: Final = "plait.context.overflow"
OVERFLOW_SOURCE: Final = "plait.context.overflow"
_MAX_RECORDED: Final = 64


class ContextOverflowUnrecoverable(ContextOverflowError):
    """The request was still too long after one compaction (or nothing could be compacted)."""


class OverflowRecoveryMiddleware(Middleware):
    """Compact and retry once on ``ContextOverflowError``; see the module docstring.

    Tool results above ``result_tokens`` are eviction candidates. Pass the agent's
    ``SummarizationMiddleware`` as ``summarization=`` and its ``ResultEvictionMiddleware`` as
    ``eviction=`` so one summary and one eviction store serve both.
    """

    placement = Placement(position="outermost", after=("LimitsMiddleware",))

    def __init__(
        self,
        *,
        summarization: SummarizationMiddleware | None = None,
        eviction: ResultEvictionMiddleware | None = None,
        backend: BackendWriteSurface | None = None,
        max_input_tokens: int | None = None,
        target_ratio: float = 0.7,
        keep_messages: int = 6,
        result_tokens: int = 500,
        counter: TokenCounter | None = None,
        state_key: str = STATE_KEY,
    ) -> None:
        if not 0 < target_ratio <= 1 or result_tokens < 1:
            raise ConfigurationError(
                "OverflowRecoveryMiddleware needs 0 < target_ratio <= 1 and result_tokens >= 1."
            )
        self._owns_summary = summarization is None
        self.summarization = summarization or SummarizationMiddleware(
            2**62,
            keep_messages=keep_messages,
            backend=backend,
            counter=counter,
            state_key=f"{state_key}.summary",
        )
        if eviction is not None and backend is not None and backend is not eviction.backend:
            raise ConfigurationError(
                "OverflowRecoveryMiddleware got both eviction= and a different backend=; pass "
                "only eviction= so evicted results land where read_evicted_result reads."
            )
        # With eviction=, results evicted here use its backend and root, so its
        # read_evicted_result tool can page them back.
        self.backend = eviction.backend if eviction is not None else backend
        self.root = eviction.root if eviction is not None else EVICTED_ROOT
        self.max_input_tokens = max_input_tokens
        self.target_ratio = target_ratio
        self.result_tokens = result_tokens
        self.counter = counter
        self.accountant = TokenAccountant(counter)
        self.ratio_meter = RatioMeter()
        self.state_key = state_key
        self._replacements: dict[str, ToolMessage] = {}
        self._read_tools: tuple[Tool, ...] = ()
        wants_tool = eviction is None or bool(eviction.tools())
        if wants_tool and isinstance(self.backend, PageReader):
            page = max(1000, result_tokens * CHARS_PER_TOKEN)
            reader = shared_reader(self.backend, page)
            reader.allow(self.root, page_chars=page)
            self._read_tools = (reader.tool,)

    def tools(self) -> Sequence[Tool]:
        """``read_evicted_result`` over ``backend`` (results evicted here and, with a private
        summary, the history it folds), when the backend can read."""
        return self._read_tools

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        recorded = ctx.turn.state.get(self.state_key)
        if isinstance(recorded, dict) and recorded:
            request = request.replace(
                messages=[self._replacement(m, recorded) for m in request.messages]
            )
        if self._owns_summary:
            request = await self.summarization.before_model_call(request, ctx)
        return request

    def _replacement(self, message: Message, recorded: dict[str, Any]) -> Message:
        if not isinstance(message, ToolMessage) or message.id not in recorded:
            return message
        cached = self._replacements.get(message.id)
        if cached is None or cached.data is not recorded[message.id]:
            cached = self._replace(message, recorded[message.id])
        return cached

    def _replace(self, message: ToolMessage, data: Any) -> ToolMessage:
        if len(self._replacements) > 4 * _MAX_RECORDED:
            self._replacements.clear()
        meta = {**message.metadata, "source": OVERFLOW_SOURCE}
        replacement = ToolMessage(
            message.tool_call_id,
            message.name,
            data,
            is_error=message.is_error,
            metadata=meta,
            id=message.id,
        )
        self._replacements[message.id] = replacement
        return replacement

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        try:
            response = await call_next(request)
            if self.counter is None:
                self.ratio_meter.record_call(ctx.turn.state, request, response)
            return response
        except ContextOverflowUnrecoverable:
            raise
        except ContextOverflowError as first:
            compacted = await self._compact(request, ctx)
            if compacted is None:
                why = "there was nothing left to summarize or evict"
                raise self._give_up(first, why) from first
            try:
                return await call_next(compacted)
            except ContextOverflowError as again:
                why = "it was still too long after one compaction"
                raise self._give_up(again, why) from again

    def _give_up(self, error: ContextOverflowError, why: str) -> ContextOverflowUnrecoverable:
        return ContextOverflowUnrecoverable(
            f"The request exceeds the model's context window and {why} ({error}). Lower "
            "keep_messages, evict tool results earlier (ResultEvictionMiddleware max_tokens), "
            "shorten the system prompt or the user input, or use a model with a larger window.",
            provider=error.provider,
            status=error.status,
        )

    async def _compact(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest | None:
        # At the thread's measured characters per token, once a provider reported usage.
        self.accountant = TokenAccountant(thread_counter(ctx.turn.state, self.counter))

        def size(r: ModelRequest) -> int:
            return self.accountant.request(
                r.messages,
                system_prompt=r.system_prompt,
                tools=r.tools,
                anchor_from=len(r.messages),
            )

        before = size(request)
        target = (
            self.max_input_tokens * self.target_ratio if self.max_input_tokens else before * 0.5
        )
        summarized = await self.summarization.compact(request, ctx)
        compacted = summarized or request
        tokens = size(compacted)
        evicted = 0
        if tokens > target:
            compacted, evicted, tokens = await self._evict_largest(compacted, ctx, tokens, target)
        # Evicted messages keep their ids but shrink: checkpoints taken over the lists seen here
        # (the originals) would be reused for later lists holding the replacements.
        self.accountant.reset()
        if summarized is None and evicted == 0:
            return None
        self.summarization.reset_estimates()
        ctx.turn.emit(
            ContextOverflowRecovered(
                original_tokens=before,
                compacted_tokens=tokens,
                summarized=summarized is not None,
                evicted=evicted,
            )
        )
        return compacted

    async def _evict_largest(
        self, request: ModelRequest, ctx: DispatchContext, tokens: int, target: float
    ) -> tuple[ModelRequest, int, int]:
        messages = list(request.messages)
        sizes = sorted(
            (
                (self.accountant.message(m), i)
                for i, m in enumerate(messages)
                if isinstance(m, ToolMessage)
                and not is_offloaded(m.data)
                and persistable(m, ctx.turn.persist_filters)
            ),
            reverse=True,
        )
        recorded = dict(ctx.turn.state.get(self.state_key) or {})
        evicted = 0
        for before, i in sizes:
            if tokens <= target or before <= self.result_tokens:
                break
            original = messages[i]
            assert isinstance(original, ToolMessage)
            data = await self._shrink(original, ctx)
            messages[i] = self._replace(original, data)
            recorded[original.id] = data
            tokens += self.accountant.message(messages[i]) - before
            evicted += 1
        while len(recorded) > _MAX_RECORDED:
            recorded.pop(next(iter(recorded)))
        ctx.turn.state[self.state_key] = recorded
        return request.replace(messages=messages), evicted, tokens

    async def _shrink(self, message: ToolMessage, ctx: DispatchContext) -> dict[str, Any]:
        text = serialize_result(message.data)
        data, _ = await offload_result(
            self.backend,
            text=text,
            estimated_tokens=self.accountant.counter.count(text),
            tool=message.name,
            call_id=message.tool_call_id,
            path=evicted_path(self.root, ctx.turn.thread_id, message.tool_call_id),
            budget_chars=self.result_tokens * CHARS_PER_TOKEN,
            preview_text=preview,
            # Named only when this middleware allowed its root on the shared reader: another
            # read_evicted_result in the registry (a summary's, on the same backend) would
            # refuse a path under a root that eviction's read_tool=False kept unreadable.
            reader=READ_TOOL_NAME if self._read_tools and READ_TOOL_NAME in ctx.registry else None,
            emit=ctx.turn.emit,
        )
        return data
