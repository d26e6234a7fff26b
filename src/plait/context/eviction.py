"""``ResultEvictionMiddleware``: move an oversized tool result out of the context window.

On ``after_tool_call``, a result whose serialized text is estimated above ``max_tokens`` is
written through the backend and replaced by the seed's reference object::

    {"_evicted": True, "preview": <first/last lines>, "full_result_path": <path>,
     "estimated_tokens": <n>, "note": <how to read it back>}

=========================================  ==================================================
situation                                  what the model gets
=========================================  ==================================================
estimate ``<= max_tokens``                 the result, unchanged
tool in ``excluded_tools``                 the result, unchanged (never evicted)
already offloaded upstream (a dict with    the result, unchanged
``_evicted`` or ``full_result_path``)
estimate ``> max_tokens``, write succeeds  the reference; ``ResultEvicted`` event
the write fails                            ``{_truncated, preview, estimated_tokens, note}``:
                                           start and end within the budget;
                                           ``EvictionFailed`` event. Never the whole result.
=========================================  ==================================================

Images and files a tool returned (``ToolResult.parts``) are estimated one by one
(:func:`plait.tokens.part_tokens`); one above ``max_tokens`` is written to the backend and
replaced by a text part naming its path, which ``read_evicted_result`` opens again as the part
(:mod:`~plait.context.part_eviction`).

``is_error`` is preserved. The persisted thread holds the reference, not the blob. If the backend
can read, the middleware contributes ``read_evicted_result(path, offset, limit)`` to every turn
(:mod:`~plait.context.reader`, shared with summarization on the same backend): character pages
of a result evicted in the *same thread* (other threads' paths are refused), each page naming the
next offset. That tool's own results are never evicted (no evict/read loop). If the
backend can list and delete, the :class:`~plait.context.retention.RetentionPolicy` is applied to
the thread after each eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from plait.backends.base import BackendWriteSurface
from plait.context.events import (
    EvictedResultsPurged,
    RetentionFailed,
)
from plait.context.offload import (
    EVICTED_ROOT,
    READ_TOOL_NAME,
    evicted_path,
    is_offloaded,
    offload_result,
    persistable,
    preview,
    serialize_result,
    thread_prefix,
)
from plait.context.part_eviction import evict_parts
from plait.context.ratio import RatioMeter
from plait.context.reader import EvictedResultUnavailable, PageReader, shared_reader
from plait.context.retention import (
    DEFAULT_RETENTION,
    PrunableBackend,
    RetentionPolicy,
    apply_retention,
    enforce,
    purge,
)
from plait.errors import ConfigurationError
from plait.messages import ToolCall, ToolMessage, ToolResult
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.paths import normalize_virtual_path
from plait.runtime.output import FINAL_RESULT_TOOL
from plait.tokens import (
    CHARS_PER_TOKEN,
    TokenCounter,
    part_tokens,
    thread_counter,
)
from plait.tools import Tool

__all__ = ["READ_TOOL_NAME", "EvictedResultUnavailable", "ResultEvictionMiddleware"]


class ResultEvictionMiddleware(Middleware):
    """Evict tool results above ``max_tokens`` (default 2000) to ``backend``; see the module
    docstring for the full behaviour table.

    ``preview_lines`` head and tail lines, each clipped to ``preview_line_chars``, make the
    preview; ``page_chars`` is the read tool's default page (``max_tokens`` worth of characters,
    at least 1000), and a page is never longer than four of those.
    """

    def __init__(
        self,
        max_tokens: int = 2000,
        *,
        backend: BackendWriteSurface,
        excluded_tools: Iterable[str] = (),
        counter: TokenCounter | None = None,
        root: str = EVICTED_ROOT,
        preview_lines: int = 5,
        preview_line_chars: int = 200,
        page_chars: int | None = None,
        retention: RetentionPolicy | None = DEFAULT_RETENTION,
        read_tool: bool = True,
    ) -> None:
        if max_tokens < 1:
            raise ConfigurationError("ResultEvictionMiddleware needs max_tokens >= 1.")
        if not isinstance(backend, BackendWriteSurface):
            raise ConfigurationError(
                f"{backend!r} has no async write(path, content); pass a plait backend such as "
                "MemoryBackend or LocalBackend."
            )
        self.max_tokens = max_tokens
        self.backend = backend
        self.counter: TokenCounter | None = counter
        self.ratio_meter = RatioMeter()
        self.root = normalize_virtual_path(root)
        self.preview_lines = max(0, preview_lines)
        self.preview_line_chars = max(16, preview_line_chars)
        self.page_chars = page_chars or max(1000, max_tokens * CHARS_PER_TOKEN)
        self.retention = retention
        self._read_tool: Tool | None = None
        if read_tool and isinstance(backend, PageReader):
            reader = shared_reader(backend, self.page_chars)
            reader.allow(self.root, page_chars=self.page_chars)
            self._read_tool = reader.tool
        # the final-answer tool's result is the structured output's receipt: never evicted
        self.excluded_tools = frozenset(excluded_tools) | {READ_TOOL_NAME, FINAL_RESULT_TOOL}
        self._prunable = backend if isinstance(backend, PrunableBackend) else None

    def tools(self) -> Sequence[Tool]:
        return () if self._read_tool is None else (self._read_tool,)

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        if call.name in self.excluded_tools:
            return result
        if self.counter is None:
            self.ratio_meter.record(ctx)
        filters = ctx.turn.persist_filters
        if filters and not persistable(ToolMessage.from_result(result, call.name), filters):
            return result  # projected content (a skill body): never written to a backend
        if result.parts:
            result = await self._evict_parts(call, result, ctx)
        if is_offloaded(result.data):
            return result
        text = serialize_result(result.data)
        tokens = thread_counter(ctx.turn.state, self.counter).count(text)
        if tokens <= self.max_tokens:
            return result
        turn = ctx.turn
        data, evicted = await offload_result(
            self.backend,
            text=text,
            estimated_tokens=tokens,
            tool=call.name,
            call_id=call.id,
            path=evicted_path(self.root, turn.thread_id, call.id),
            budget_chars=self.max_tokens * CHARS_PER_TOKEN // 2,
            preview_text=self._preview,
            reader=READ_TOOL_NAME if self._read_tool is not None else None,
            emit=turn.emit,
        )
        if evicted:
            await self._retain(ctx)
        return ToolResult(result.tool_call_id, data, result.is_error, result.parts)

    async def _evict_parts(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        estimates = [part_tokens(p) for p in result.parts]
        if max(estimates) <= self.max_tokens:
            return result
        turn = ctx.turn
        parts, evicted = await evict_parts(
            result.parts,
            estimates,
            max_tokens=self.max_tokens,
            backend=self.backend,
            base_path=evicted_path(self.root, turn.thread_id, call.id),
            tool=call.name,
            call_id=call.id,
            reader=READ_TOOL_NAME if self._read_tool is not None else None,
            emit=turn.emit,
        )
        if evicted:
            await self._retain(ctx)
        return ToolResult(result.tool_call_id, result.data, result.is_error, parts)

    def _preview(self, text: str) -> str:
        return preview(
            text,
            head_lines=self.preview_lines,
            tail_lines=self.preview_lines,
            line_chars=self.preview_line_chars,
        )

    async def _retain(self, ctx: DispatchContext) -> None:
        if self._prunable is None or self.retention is None:
            return
        thread = ctx.turn.thread_id
        try:
            deleted = await enforce(
                self._prunable, thread_prefix(self.root, thread), self.retention
            )
        except Exception as exc:
            ctx.turn.emit(RetentionFailed(thread_id=thread, error=exc))
            return
        if deleted:
            ctx.turn.emit(EvictedResultsPurged(thread_id=thread, paths=deleted))

    async def purge_thread(self, thread_id: str) -> list[str]:
        """Delete every result this middleware evicted for ``thread_id``."""
        return await purge(self._require_prunable(), thread_prefix(self.root, thread_id))

    async def apply_retention(self, *, now: float | None = None) -> list[str]:
        """Apply the retention policy to every thread; return the deleted paths."""
        policy = self.retention or DEFAULT_RETENTION
        return await apply_retention(self._require_prunable(), policy, root=self.root, now=now)

    def _require_prunable(self) -> PrunableBackend:
        if self._prunable is None:
            raise ConfigurationError(
                f"{self.backend!r} cannot list and delete, so evicted results cannot be purged; "
                "use a full backend (MemoryBackend, LocalBackend, SQLiteBackend)."
            )
        return self._prunable
