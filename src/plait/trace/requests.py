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
* Image and file parts are stored by reference (:func:`~plait.trace.parts.message_body`): the
  body holds each blob's sha256 and size, and the blob's bytes go to the binary table once (the
  digests sent are remembered, up to 1,024; the store skips the ones it holds). A projected
  message's blobs are not stored.
* State is bounded: the last request of up to 256 threads is kept in memory; an older thread's is
  read back from the store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import operator
from collections import OrderedDict
from collections.abc import Sequence

from plait.errors import PlaitError
from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
)
from plait.middleware.context import TurnContext
from plait.models.base import ModelRequest
from plait.parts import Blob
from plait.tokens import CHARS_PER_TOKEN, message_tokens, tool_tokens
from plait.trace.parts import MAX_BLOB_BYTES, keep_blobs, message_body
from plait.trace.store import CHECKPOINT_EVERY, RequestRow, TraceBatch, TraceStore

__all__ = ["RequestDeltas", "TurnMessages", "delta", "digest", "persistable", "signature"]

_MAX_THREADS = 256
_MAX_BLOBS = 1_024


def digest(text: str) -> str:
    """A short content hash (SHA-256, 16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclasses.dataclass(slots=True, eq=False)
class Known:
    """A message already keyed on this thread: recognised again by id and signature."""

    signature: tuple[object, ...]
    key: str
    tokens: int


def signature(message: Message) -> tuple[object, ...]:
    """A cheap structural fingerprint of a message: role, parts, text length, tool calls, and
    for a tool result its size, error flag, parts and whether it is an evicted reference.

    Thread stores are append-only, so a stored id keeps its content; a message rewritten under
    its id inside a turn (an overflow eviction, a projected skill body, a redaction) differs in
    size or kind and gets a new key.
    """
    if isinstance(message, ToolMessage):
        data = message.data
        evicted = isinstance(data, dict) and bool(data.get("_evicted"))
        size = len(data) if isinstance(data, str | dict | list) else -1
        return ("tool", message.is_error, size, evicted, len(message.parts))
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
    """What one turn has keyed so far, so each request costs O(what changed):

    * ``history``: the messages the turn loaded from the thread store, in order (taken by
      :meth:`start` before any request; a request message is "as loaded" when it is the history's
      object at the same position);
    * ``objects``/``entries``: the previous request of this turn and the key of each message;
    * ``seen``: every other message object keyed in this turn, by ``id()`` (the objects are
      kept, so no ``id()`` is reused while the turn runs).
    """

    history: Sequence[Message] = dataclasses.field(default_factory=list)
    objects: list[Message] = dataclasses.field(default_factory=list)
    entries: list[Known] = dataclasses.field(default_factory=list)
    seen: dict[int, tuple[Message, Known]] = dataclasses.field(default_factory=dict)

    def start(self, turn: TurnContext) -> None:
        """Note the turn's history (its messages without the new input); call in
        ``turn_input``."""
        head = len(turn.messages) - len(turn.input)
        if head >= 0 and all(map(operator.is_, turn.messages[head:], turn.input)):
            self.history = turn.messages[:head]
        else:  # middleware moved things around: find the input by identity
            fresh = {id(m) for m in turn.input}
            self.history = [m for m in turn.messages if id(m) not in fresh]

    def leading(self, messages: Sequence[Message], stored: dict[str, Known]) -> list[Known]:
        """The keys of the longest leading run of ``messages`` known without looking at them:
        the same objects as this turn's previous request, or, for the turn's first request, the
        same objects as the history whose ids were keyed in an earlier turn as loaded."""
        prior, entries = (self.objects, self.entries) if self.objects else (self.history, None)
        same = list(map(operator.is_, messages, prior))
        n = same.index(False) if False in same else len(same)
        if entries is not None:
            return entries[:n]
        found = list(map(stored.get, map(_ID, prior[:n])))
        return found[: found.index(None)] if None in found else found  # type: ignore[return-value]


_ID = operator.attrgetter("id")
_KEY = operator.attrgetter("key")
_TOKENS = operator.attrgetter("tokens")


class RequestDeltas:
    """Builds request rows for one recorder over ``store`` (read only for a thread's last
    request when it is not in memory). Blobs over ``max_blob_bytes`` keep their reference
    only."""

    def __init__(self, store: TraceStore, max_blob_bytes: int = MAX_BLOB_BYTES) -> None:
        self.store = store
        self.max_blob_bytes = max_blob_bytes
        self._binary: OrderedDict[str, None] = OrderedDict()
        self._last: OrderedDict[str, tuple[int, list[str]]] = OrderedDict()
        self._known: OrderedDict[str, dict[str, Known]] = OrderedDict()
        self._stored: dict[str, dict[str, Known]] = {}
        self._blobs: OrderedDict[str, None] = OrderedDict()
        self._prompt_cache: tuple[tuple[object, ...], list[str]] | None = None

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
        is (thread stores are append-only: a stored id keeps its content), and a leading run of
        the same objects as the turn's previous request is taken whole, so a turn serializes
        only what is new or rewritten."""
        thread = turn.thread_id
        previous = await self._previous(thread)
        seq, old = (previous[0] + 1, previous[1]) if previous else (0, [])
        stored = self._stored.setdefault(thread, {})
        messages = request.messages
        entries = turn_messages.leading(messages, stored)
        if len(entries) < len(messages):
            self._key_rest(batch, turn_messages, messages, entries, set(old), turn)
        keys = list(map(_KEY, entries))
        batch.requests.append(
            delta(span_id, thread, seq, old, keys, self._prompts(batch, request, turn))
        )
        self._remember(thread, seq, keys)
        turn_messages.objects = list(messages)
        turn_messages.entries = entries
        system = request.system_prompt
        estimate: int = sum(map(_TOKENS, entries)) + sum(tool_tokens(t) for t in request.tools)
        return estimate - (-len(system) // CHARS_PER_TOKEN)

    def _key_rest(
        self,
        batch: TraceBatch,
        turn_messages: TurnMessages,
        messages: Sequence[Message],
        entries: list[Known],
        old_set: set[str],
        turn: TurnContext,
    ) -> None:
        """Key the messages after the leading run (appended to ``entries``); queue the rows of
        messages new to the thread."""
        thread = turn.thread_id
        known = self._known.get(thread)
        if known is None:
            known = self._known[thread] = {}
        stored = self._stored[thread]
        seen, history = turn_messages.seen, turn_messages.history
        ephemeral = {id(m) for m in turn.ephemeral}
        for index in range(len(entries), len(messages)):
            message = messages[index]
            same = seen.get(id(message))
            if same is not None and same[0] is message:
                entries.append(same[1])
                continue
            # As loaded from the thread store: the history's object, at its place.
            from_store = index < len(history) and history[index] is message
            entry = stored.get(message.id) if from_store else None
            if entry is None:
                shape = signature(message)
                entry = known.get(message.id)
                if entry is None or entry.signature != shape:
                    body, blobs = message_body(message)
                    entry = Known(shape, f"{message.id}:{digest(body)}", message_tokens(message))
                    known[message.id] = entry
                    if entry.key not in old_set:
                        projected = id(message) in ephemeral or not persistable(message, turn)
                        kind = message_kind(message, projected)
                        row = (thread, entry.key, message.role, entry.tokens, kind)
                        batch.messages.append((*row, None if projected else body))
                        if blobs and not projected:
                            self.keep(batch, blobs)
                if from_store:
                    stored[message.id] = entry
            seen[id(message)] = (message, entry)
            entries.append(entry)

    def keep(self, batch: TraceBatch, blobs: dict[str, tuple[Blob, str]]) -> None:
        """Queue the bytes of ``blobs`` (sha256 to blob and media type) not queued before."""
        keep_blobs(batch.binary, blobs, self._binary, self.max_blob_bytes)
        while len(self._binary) > _MAX_BLOBS:
            self._binary.popitem(last=False)

    def forget(self, batch: TraceBatch) -> None:
        """``batch`` was not written (its write failed, or it was dropped): send its blobs again
        when a later request holds them."""
        for digest in batch.binary:
            self._binary.pop(digest, None)
        for digest in batch.blobs:
            self._blobs.pop(digest, None)
        self._prompt_cache = None

    def _prompts(self, batch: TraceBatch, request: ModelRequest, turn: TurnContext) -> list[str]:
        """Hash the system prompt, the tool list and the base prompt; queue unseen ones. The
        last request's hashes are reused while its prompts and tool objects are the same."""
        system = request.system_prompt
        shape = (system, turn.system_prompt, tuple(request.tools))
        if self._prompt_cache is not None and self._prompt_cache[0] == shape:
            return self._prompt_cache[1]
        hashes = self._hash_prompts(batch, request, turn)
        self._prompt_cache = (shape, hashes)
        return hashes

    def _hash_prompts(
        self, batch: TraceBatch, request: ModelRequest, turn: TurnContext
    ) -> list[str]:
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
    head = len(old)
    if keys[:head] == old:  # the common case: the history kept, messages appended
        old_set, tail = set(old), keys[head:]
        if len(old_set) == head and len(set(tail)) == len(tail) and old_set.isdisjoint(tail):
            full = seq % CHECKPOINT_EVERY == 0
            return RequestRow(
                span_id=span_id,
                thread_id=thread,
                seq=seq,
                full=full,
                removed=[],
                added=list(enumerate(keys if full else tail, 0 if full else head)),
                system_hash=hashes[0],
                tools_hash=hashes[1],
                base_prompt_hash=hashes[2],
            )
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
