"""The request-delta builder: turns each model request into a ``RequestRow`` against the thread's
previous request, and the new messages and blobs it introduces, for a ``TraceBatch``.

* Each message is keyed ``id:sha256(json)[:16]`` once per thread, so a message rewritten in place
  (an overflow eviction) is a new key. Messages reloaded from the thread store are new objects
  every turn; their id plus a cheap structural fingerprint (:func:`signature`) finds the key
  computed before, so a turn serializes and hashes only its new messages.
* A row lists the keys removed and ``[position, key]`` pairs added; every
  :data:`~plait.trace.store.CHECKPOINT_EVERY` calls, or when the kept keys changed order, the row
  is whole (see :func:`delta`).
* A message in ``TurnContext.ephemeral`` or one the persist filters would drop or rewrite is
  stored by reference only: ``body`` ``None``, kind ``projected``.
* System prompt, tool list and the agent's base prompt are blobs by hash; the hashes written by
  this builder are remembered (up to 1,024) so each is sent to the store once.
* State is bounded: the last request of up to 256 threads is kept in memory; an older thread's is
  read back from the store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict

from plait.errors import PlaitError
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    dump_messages,
)
from plait.middleware.context import TurnContext
from plait.models.base import ModelRequest
from plait.tokens import CHARS_PER_TOKEN, message_tokens, tool_tokens
from plait.trace.store import CHECKPOINT_EVERY, RequestRow, TraceBatch, TraceStore

__all__ = ["RequestDeltas", "TurnMessages", "delta", "digest", "persistable", "signature"]

_MAX_THREADS = 256
_MAX_BLOBS = 1_024


def digest(text: str) -> str:
    """A short content hash (SHA-256, 16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclasses.dataclass(slots=True)
class Known:
    """A message already keyed on this thread: recognised again by id and signature."""

    signature: tuple[object, ...]
    key: str
    tokens: int


def signature(message: Message) -> tuple[object, ...]:
    """A cheap structural fingerprint of a message: role, text length, tool calls, and for a
    tool result its size, error flag and whether it is an evicted reference.

    Thread stores are append-only, so a stored id keeps its content; a message rewritten under
    its id inside a turn (an overflow eviction, a projected skill body, a redaction) differs in
    size or kind and gets a new key.
    """
    if isinstance(message, ToolMessage):
        data = message.data
        evicted = isinstance(data, dict) and bool(data.get("_evicted"))
        size = len(data) if isinstance(data, str | dict | list) else -1
        return ("tool", message.is_error, size, evicted)
    chars = sum(len(p.text) for p in message.content if isinstance(p, TextPart))
    calls = len(message.tool_calls) if isinstance(message, AssistantMessage) else 0
    return (message.role, len(message.content), chars, calls)


def message_kind(message: Message, projected: bool) -> str:
    """The kind a stored message row carries (``projected``, ``summary``, ``evicted`` …)."""
    if projected:
        return "projected"
    if isinstance(message, SystemMessage):
        return "summary"
    if isinstance(message, ToolMessage):
        data = message.data
        return "evicted" if isinstance(data, dict) and data.get("_evicted") else "tool_result"
    return message.role


def persistable(message: Message, turn: TurnContext) -> bool:
    """Whether the persist filters would write ``message`` unchanged (see ``persist_filters``)."""
    kept: list[Message] = [message]
    for keep_out in turn.persist_filters:
        kept = keep_out(kept)
    return len(kept) == 1 and (kept[0] is message or kept[0] == message)


@dataclasses.dataclass(slots=True)
class TurnMessages:
    """What one turn has keyed so far: message objects seen in its requests (by ``id()``, the
    objects kept so no ``id()`` is reused while the turn runs) and the messages it loaded from
    the thread store (its history without the new input), found once per turn."""

    seen: dict[int, tuple[Message, Known]] = dataclasses.field(default_factory=dict)
    history: list[Message] | None = None
    loaded: set[int] = dataclasses.field(default_factory=set)

    def load(self, turn: TurnContext) -> set[int]:
        if self.history is None:
            fresh = {id(m) for m in turn.input}
            self.history = [m for m in turn.messages if id(m) not in fresh]
            self.loaded = {id(m) for m in self.history}
        return self.loaded


class RequestDeltas:
    """Builds request rows for one recorder over ``store`` (read only for a thread's last
    request when it is not in memory)."""

    def __init__(self, store: TraceStore) -> None:
        self.store = store
        self._last: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()
        self._known: OrderedDict[str, dict[str, Known]] = OrderedDict()
        self._stored: dict[str, dict[str, Known]] = {}
        self._blobs: OrderedDict[str, None] = OrderedDict()

    async def record(
        self,
        batch: TraceBatch,
        turn_messages: TurnMessages,
        span_id: str,
        request: ModelRequest,
        turn: TurnContext,
    ) -> int:
        """Add ``request`` (model span ``span_id``) to ``batch`` as a delta; return its estimated
        input tokens. ``turn_messages`` is the turn's own (one per turn).

        A message loaded from the thread store whose id was keyed before as loaded is taken as
        is (thread stores are append-only: a stored id keeps its content), so a turn pays a set
        lookup per history message and serializes only what is new or rewritten."""
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
        stored = self._stored.get(thread)
        if stored is None:
            stored = self._stored[thread] = {}
        seen = turn_messages.seen
        loaded = turn_messages.load(turn)
        for message in request.messages:
            same = seen.get(id(message))
            if same is not None and same[0] is message:
                keys.append(same[1].key)
                estimate += same[1].tokens
                continue
            from_store = id(message) in loaded
            entry = stored.get(message.id) if from_store else None
            if entry is not None:  # as loaded from the append-only thread store: unchanged
                seen[id(message)] = (message, entry)
                keys.append(entry.key)
                estimate += entry.tokens
                continue
            shape = signature(message)
            entry = known.get(message.id)
            if entry is None or entry.signature != shape:
                body = dump_messages([message])[1:-1]
                entry = Known(shape, f"{message.id}:{digest(body)}", message_tokens(message))
                known[message.id] = entry
                if entry.key not in old_set:
                    projected = id(message) in ephemeral or not persistable(message, turn)
                    kind = message_kind(message, projected)
                    row = (thread, entry.key, message.role, entry.tokens, kind)
                    batch.messages.append((*row, None if projected else body))
            if from_store:
                stored[message.id] = entry
            seen[id(message)] = (message, entry)
            keys.append(entry.key)
            estimate += entry.tokens
        hashes = self._prompts(batch, request, turn)
        batch.requests.append(delta(span_id, thread, seq, old, keys, hashes))
        self._remember(thread, seq, keys)
        system = request.system_prompt
        estimate += sum(tool_tokens(t) for t in request.tools) - (-len(system) // CHARS_PER_TOKEN)
        return estimate

    def _prompts(self, batch: TraceBatch, request: ModelRequest, turn: TurnContext) -> list[str]:
        """Hash the system prompt, the tool list and the base prompt; queue unseen ones."""
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
        for hashed, text in zip(hashes, (system, tools, base), strict=True):
            if hashed not in self._blobs:
                self._blobs[hashed] = None
                batch.blobs[hashed] = text
        while len(self._blobs) > _MAX_BLOBS:
            self._blobs.popitem(last=False)
        return hashes

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
            self._stored.pop(forgotten, None)


def delta(
    span_id: str, thread: str, seq: int, old: list[str], keys: list[str], hashes: list[str]
) -> RequestRow:
    """The row for request ``seq`` with message ``keys``, given the previous request's ``old``:
    whole at every checkpoint or when kept keys changed order (or repeat), else a delta."""
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
