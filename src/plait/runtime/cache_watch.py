"""``CacheWatch``: says when a request's prefix stops matching the thread's previous request.

Provider prompt caches (Anthropic's breakpoints, OpenAI's automatic prefix cache) bill a
prefix at a tenth of the input price only while it stays byte-identical from one call to the
next. ``CacheWatch`` keeps, per thread, a fingerprint of each block of the last request the
model answered (each tool definition, the system prompt, each stable message: the projected tail
is left out, :mod:`plait.models.prompt_cache`) and emits one :class:`CacheBroken` when the next
request of the thread differs *before the end* of that list: everything from there on is read
from the cache no more. A request that only adds messages after the old ones (a plain next call
or turn) emits nothing. A tool added, removed or changed is a break in the tools (``"tools
changed"``): the system block and every message come after them.

A request whose model call raised is not remembered (one refused with a
``ContextOverflowError`` cached nothing). When a middleware outside retries the call with
another request (:class:`~plait.context.OverflowRecoveryMiddleware`'s compacted one), that
request is compared too, against the last answered one, and reported unless its break is the
one already reported for the dispatch: a result evicted there is reported as ``"evicted
result"`` in that dispatch if the cache held it, and not at all if it was the newest (never
cached) result.

The system block counts the system prompt and the text of the projected tail's
:class:`~plait.messages.SystemMessage` s (a managed skill's body, reason ``"projected system
message changed"`` when only those differ): the Anthropic adapter folds system messages into
``system``, ahead of every message, so loading or unloading a managed skill rewrites the whole
cached history there. (OpenAI's adapters send them in place, after the history, where only
their own tokens are lost: the report overstates that case.)

Cost: identity checks against the previous request's objects, and a fingerprint (``repr``
hashed) only for the messages that are not the same objects as before (the new ones), so a
call costs O(messages) comparisons and no serialization of the history. An edit made *in place*
to a message object already sent is not seen (plait's batteries make new messages).

Placement: innermost (its ``before_model_call`` runs last, on the request as sent, and its
``wrap_model_call`` sees every retry). Opt in with
``Agent(middleware=[..., CacheWatch()])``; at most ``max_threads`` threads are remembered
(least recently used dropped: its next request starts afresh).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from plait.errors import ConfigurationError
from plait.messages import Message, SystemMessage, ToolMessage
from plait.middleware.base import Middleware, ModelHandler
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest, ModelResponse
from plait.models.prompt_cache import stable_length
from plait.runtime.events import CacheBroken

__all__ = ["CacheBroken", "CacheWatch"]

_SUMMARY_SOURCE = "plait.context.summary"


_Entry = tuple[str, object, int]  # (kind, object, fingerprint)
_ORDER = {"tools": 0, "system": 1, "messages": 2}  # the order of the blocks in a request


def _message_print(message: Message) -> int:
    return hash(repr(message))


def _is_stub(data: object) -> bool:
    """An eviction's reference or an overflow's cut (:func:`plait.context.offload.is_offloaded`,
    not imported: ``plait.runtime`` does not load ``plait.context``)."""
    return isinstance(data, dict) and (bool(data.get("_evicted")) or data.get("_truncated") is True)


def _reason(kind: str, new: object | None, old: object) -> str:
    if kind == "tools":
        return "tools changed"
    if kind == "system":
        if isinstance(new, tuple) and isinstance(old, tuple) and new[0] == old[0]:
            return "projected system message changed"
        return "system prompt changed"
    if new is None:
        return "message removed"
    metadata: Any = getattr(new, "metadata", {})
    if metadata.get("source") == _SUMMARY_SOURCE:
        return "summary"
    if isinstance(new, ToolMessage) and _is_stub(new.data):
        return "evicted result"
    return "message changed"


def _first_break(previous: list[_Entry] | None, entries: list[_Entry]) -> int | None:
    """The first block of ``previous`` that ``entries`` does not repeat, if any."""
    for block, old in enumerate(previous or ()):
        new = entries[block] if block < len(entries) else None
        if new is None or not (new[1] is old[1] or (new[0] == old[0] and new[2] == old[2])):
            return block
    return None


@dataclass(slots=True)
class _Thread:
    answered: list[_Entry] | None = None
    """The blocks of the thread's last request the model answered: what the cache holds."""
    request: ModelRequest | None = None
    """The dispatch's request as last compared, its blocks, the block reported for it."""
    entries: list[_Entry] = field(default_factory=list)
    reported: int | None = None
    calls: int = 0
    """Model calls made for the dispatch so far (more than one: an outer wrapper retried)."""


class CacheWatch(Middleware):
    """Emit :class:`CacheBroken` when a thread's request prefix changes (module docstring)."""

    placement = Placement(position="innermost")

    def __init__(self, *, max_threads: int = 1_000) -> None:
        if max_threads < 1:
            raise ConfigurationError("CacheWatch needs max_threads >= 1.")
        self.max_threads = max_threads
        self._threads: OrderedDict[str, _Thread] = OrderedDict()

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        thread_id = ctx.turn.thread_id
        watch = self._threads.get(thread_id)
        if watch is None:
            watch = self._threads[thread_id] = _Thread()
            while len(self._threads) > self.max_threads:
                self._threads.popitem(last=False)
        else:
            self._threads.move_to_end(thread_id)
        watch.request, watch.calls = request, 0
        watch.entries = self._entries(request, watch.answered)
        watch.reported = _first_break(watch.answered, watch.entries)
        if watch.reported is not None:
            self._report(watch.answered, watch.entries, watch.reported, ctx)
        return request

    async def wrap_model_call(
        self, request: ModelRequest, ctx: DispatchContext, call_next: ModelHandler
    ) -> ModelResponse:
        watch = self._threads.get(ctx.turn.thread_id)
        if watch is None:  # dropped meanwhile (max_threads other threads since)
            return await call_next(request)
        watch.calls += 1
        # A retry with another request (OverflowRecoveryMiddleware's compacted one) is compared
        # too; the first call is the request compared above, whatever an outer wrapper added.
        if watch.calls > 1 and request is not watch.request:
            entries = self._entries(request, watch.answered)
            block = _first_break(watch.answered, entries)
            if block is not None and block != watch.reported:  # not the break reported above
                self._report(watch.answered, entries, block, ctx)
                watch.reported = block
            watch.request, watch.entries = request, entries
        entries = watch.entries
        response = await call_next(request)
        watch.answered = entries  # a rejected request (an overflow) left the cache as it was
        return response

    @staticmethod
    def _report(
        previous: list[_Entry] | None, entries: list[_Entry], block: int, ctx: DispatchContext
    ) -> None:
        """Emit the break of ``entries`` against ``previous`` at ``block``."""
        assert previous is not None
        old = previous[block]
        new = entries[block] if block < len(entries) else None
        # A tool added at the end meets the old system block: the break is in the tools.
        kind = old[0] if new is None or _ORDER[old[0]] <= _ORDER[new[0]] else new[0]
        obj = new[1] if new is not None and new[0] == kind else None
        message = obj if kind == "messages" else None
        ctx.turn.emit(
            CacheBroken(
                dispatch=ctx.index,
                thread_id=ctx.turn.thread_id,
                block=block,
                where=kind,
                index=sum(1 for e in previous[:block] if e[0] == kind),
                reason=_reason(kind, obj, old[1]),
                blocks=len(previous) - block,
                message_id=getattr(message, "id", None),
            )
        )

    @staticmethod
    def _entries(request: ModelRequest, previous: list[_Entry] | None) -> list[_Entry]:
        old = previous or []
        entries: list[_Entry] = []
        for i, tool in enumerate(request.tools):
            same = i < len(old) and old[i][1] is tool
            entries.append(old[i] if same else ("tools", tool, hash(repr(tool))))
        messages = request.messages
        stable = stable_length(request)
        # Anthropic folds system messages into `system`, ahead of every message: a projected
        # one (a managed skill's body) is part of the system block there.
        projected = tuple(m.text for m in messages[stable:] if isinstance(m, SystemMessage))
        system = (request.system_prompt, projected)
        entries.append(("system", system, hash(system)))
        start = len(entries)
        for i in range(stable):
            message = messages[i]
            at = start + i
            if at < len(old) and old[at][1] is message:
                entries.append(old[at])
            else:
                entries.append(("messages", message, _message_print(message)))
        return entries
