"""``CacheWatch``: says when a request's prefix stops matching the thread's previous request.

Provider prompt caches (Anthropic's breakpoints, OpenAI's automatic prefix cache) bill a
prefix at a tenth of the input price only while it stays byte-identical from one call to the
next. ``CacheWatch`` keeps, per thread, a fingerprint of each block of the last request it saw
(each tool definition, the system prompt, each stable message: the projected tail is left out,
:mod:`plait.models.prompt_cache`) and emits one :class:`CacheBroken` when the next request of
the thread differs *before the end* of that list: everything from there on is read from the
cache no more. A request that only adds messages after the old ones (a plain next call or turn)
emits nothing.

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

Placement: innermost (its ``before_model_call`` runs last, on the request as sent). Opt in with
``Agent(middleware=[..., CacheWatch()])``; at most ``max_threads`` threads are remembered
(least recently used dropped: its next request starts afresh).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from plait.errors import ConfigurationError
from plait.messages import Message, SystemMessage, ToolMessage
from plait.middleware.base import Middleware
from plait.middleware.context import DispatchContext
from plait.middleware.ordering import Placement
from plait.models.base import ModelRequest
from plait.models.prompt_cache import stable_length
from plait.runtime.events import CacheBroken

__all__ = ["CacheBroken", "CacheWatch"]

_SUMMARY_SOURCE = "plait.context.summary"


_Entry = tuple[str, object, int]  # (kind, object, fingerprint)


def _message_print(message: Message) -> int:
    return hash(repr(message))


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
    if isinstance(new, ToolMessage) and isinstance(new.data, dict) and new.data.get("_evicted"):
        return "evicted result"
    return "message changed"


class CacheWatch(Middleware):
    """Emit :class:`CacheBroken` when a thread's request prefix changes (module docstring)."""

    placement = Placement(position="innermost")

    def __init__(self, *, max_threads: int = 1_000) -> None:
        if max_threads < 1:
            raise ConfigurationError("CacheWatch needs max_threads >= 1.")
        self.max_threads = max_threads
        self._threads: OrderedDict[str, list[_Entry]] = OrderedDict()

    async def before_model_call(self, request: ModelRequest, ctx: DispatchContext) -> ModelRequest:
        thread_id = ctx.turn.thread_id
        previous = self._threads.get(thread_id)
        entries = self._entries(request, previous)
        self._threads[thread_id] = entries
        self._threads.move_to_end(thread_id)
        while len(self._threads) > self.max_threads:
            self._threads.popitem(last=False)
        if previous is None:
            return request
        for block, old in enumerate(previous):
            new = entries[block] if block < len(entries) else None
            if new is not None and (new[1] is old[1] or (new[0] == old[0] and new[2] == old[2])):
                continue
            kind = old[0]
            obj = new[1] if new is not None and new[0] == kind else None
            index = block - sum(1 for e in previous[:block] if e[0] != kind)
            message = obj if kind == "messages" else None
            ctx.turn.emit(
                CacheBroken(
                    dispatch=ctx.index,
                    thread_id=thread_id,
                    block=block,
                    where=kind,
                    index=index,
                    reason=_reason(kind, obj, old[1]),
                    blocks=len(previous) - block,
                    message_id=getattr(message, "id", None),
                )
            )
            break
        return request

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
