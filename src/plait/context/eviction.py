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

``is_error`` is preserved. The persisted thread holds the reference, not the blob. If the backend
can read, the middleware contributes ``read_evicted_result(path, offset, limit)`` to every turn:
character pages of a result evicted in the *same thread* (other paths are refused), each page
naming the next offset. That tool's own results are never evicted (no evict/read loop). If the
backend can list and delete, the :class:`~plait.context.retention.RetentionPolicy` is applied to
the thread after each eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from plait.backends.base import BackendWriteSurface
from plait.context.events import (
    EvictedResultsPurged,
    EvictionFailed,
    ResultEvicted,
    RetentionFailed,
)
from plait.context.offload import (
    EVICTED_ROOT,
    READ_TOOL_NAME,
    evicted_path,
    eviction_reference,
    is_offloaded,
    persistable,
    preview,
    serialize_result,
    thread_prefix,
    truncation_reference,
)
from plait.context.retention import (
    DEFAULT_RETENTION,
    PrunableBackend,
    RetentionPolicy,
    apply_retention,
    enforce,
    purge,
)
from plait.context.tokens import CHARS_PER_TOKEN, DEFAULT_COUNTER, TokenCounter
from plait.errors import ConfigurationError, PlaitError
from plait.messages import ToolCall, ToolMessage, ToolResult
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.paths import normalize_virtual_path
from plait.tools import FunctionTool, Tool, ToolContext

__all__ = ["READ_TOOL_NAME", "EvictedResultUnavailable", "ResultEvictionMiddleware"]


class EvictedResultUnavailable(PlaitError):
    """``read_evicted_result`` was asked for a path it may not or cannot read."""


@runtime_checkable
class _Reader(Protocol):
    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str: ...


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
        self.counter: TokenCounter = counter or DEFAULT_COUNTER
        self.root = normalize_virtual_path(root)
        self.preview_lines = max(0, preview_lines)
        self.preview_line_chars = max(16, preview_line_chars)
        self.page_chars = page_chars or max(1000, max_tokens * CHARS_PER_TOKEN)
        self.retention = retention
        reader = backend if read_tool and isinstance(backend, _Reader) else None
        self._read_tool = None if reader is None else self._build_read_tool(reader)
        self.excluded_tools = frozenset(excluded_tools) | {READ_TOOL_NAME}
        self._prunable = backend if isinstance(backend, PrunableBackend) else None

    def tools(self) -> Sequence[Tool]:
        return () if self._read_tool is None else (self._read_tool,)

    async def after_tool_call(
        self, call: ToolCall, result: ToolResult, ctx: DispatchContext
    ) -> ToolResult:
        if call.name in self.excluded_tools or is_offloaded(result.data):
            return result
        filters = ctx.turn.persist_filters
        if filters and not persistable(ToolMessage.from_result(result, call.name), filters):
            return result  # projected content (a skill body): never written to a backend
        text = serialize_result(result.data)
        tokens = self.counter.count(text)
        if tokens <= self.max_tokens:
            return result
        turn = ctx.turn
        path = evicted_path(self.root, turn.thread_id, call.id)
        try:
            await self.backend.write(path, text)
        except Exception as exc:
            turn.emit(
                EvictionFailed(
                    tool=call.name, call_id=call.id, path=path, estimated_tokens=tokens, error=exc
                )
            )
            budget = self.max_tokens * CHARS_PER_TOKEN // 2
            reason = f"could not be saved ({type(exc).__name__}: {exc})"
            data = truncation_reference(
                text=text, estimated_tokens=tokens, max_chars=budget, reason=reason
            )
            return ToolResult(result.tool_call_id, data, result.is_error)
        shown = preview(
            text,
            head_lines=self.preview_lines,
            tail_lines=self.preview_lines,
            line_chars=self.preview_line_chars,
        )
        reader = READ_TOOL_NAME if self._read_tool is not None else None
        data = eviction_reference(
            text=text, path=path, estimated_tokens=tokens, preview_text=shown, reader=reader
        )
        turn.emit(
            ResultEvicted(
                tool=call.name, call_id=call.id, path=path, estimated_tokens=tokens, chars=len(text)
            )
        )
        await self._retain(ctx)
        return ToolResult(result.tool_call_id, data, result.is_error)

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

    def _build_read_tool(self, reader: _Reader) -> Tool:
        root, page = self.root, self.page_chars
        cap = page * 4

        async def read_evicted_result(
            path: str, offset: int = 0, limit: int = page, *, ctx: ToolContext
        ) -> str:
            """Read part of a tool result that was too large to show in full, by its
            full_result_path. offset and limit count characters; each page starts with a header
            giving the next offset. Read only the parts you need."""
            key = normalize_virtual_path(path)
            if not key.startswith(thread_prefix(root, ctx.turn.thread_id) + "/"):
                raise EvictedResultUnavailable(
                    f"{path!r} is not an evicted result of this conversation; pass the "
                    "full_result_path of an evicted result exactly as given."
                )
            if offset < 0 or limit < 1:
                raise EvictedResultUnavailable("offset must be >= 0 and limit >= 1.")
            limit = min(limit, cap)
            try:
                chunk = await reader.read(key, offset, limit + 1)
            except FileNotFoundError:
                raise EvictedResultUnavailable(
                    f"No evicted result at {key!r}: it was deleted by the retention policy or "
                    "never written. Call the original tool again if you still need it."
                ) from None
            more, chunk = len(chunk) > limit, chunk[:limit]
            if not chunk and offset > 0:
                return f"[{key}: offset {offset} is past the end of the result]"
            end = offset + len(chunk)
            tail = f"more follows; next offset {end}" if more else "end of result"
            return f"[{key}: characters {offset}-{end}; {tail}]\n{chunk}"

        return FunctionTool(read_evicted_result, name=READ_TOOL_NAME)
