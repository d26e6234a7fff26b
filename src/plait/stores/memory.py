"""``MemoryThreadStore``: threads in a dict, for tests and short-lived processes.

The store keeps private copies, never the caller's objects: ``append`` copies what it is given
and ``load`` hands out fresh copies, so mutating a loaded or appended message (or the state)
cannot change the store. It accepts and rejects exactly what the SQLite store does, and gives
back what SQLite would: messages and state made only of plain JSON values (``str``, ``int``,
finite ``float``, ``bool``, ``None``, ``list``, ``dict`` with ``str`` keys; exact types; ints
up to 64 bits, nesting up to 32 levels) are copied field by field; anything else (a tuple, an
enum, a NaN, an ``int`` dict key, a ``Message`` subclass, text UTF-8 cannot encode, a huge int,
deep nesting) goes through the same JSON codec SQLite uses, which either normalises it as SQLite
would (a tuple comes back a list) or raises :class:`~plait.stores.base.ThreadDataError`.

Why copies and not JSON text for everything: an agent writes every dispatch, and encoding the
dispatch's messages and the state to JSON cost about 15 µs a dispatch, half the per-turn budget
(``bench/overhead.py``); copying plain values costs a few µs, and a ``load`` of 1,500 mixed
messages (4.3 ms, on a loaded machine) costs less than parsing their JSON rows (5.7 ms).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from plait.errors import ThreadConflictError
from plait.messages import (
    AssistantMessage,
    Blob,
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    new_id,
)
from plait.stores.base import (
    ThreadSnapshot,
    check_parts,
    messages_from_json,
    messages_to_json,
    state_from_json,
    state_to_json,
)
from plait.stores.lease import DEFAULT_LEASE_WAIT_S, LocalLeases

__all__ = ["MemoryThreadStore"]


@dataclass(slots=True)
class _StoredThread:
    version: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)


class MemoryThreadStore:
    """A :class:`~plait.stores.base.ThreadStore` held in process memory (lost when it exits).

    ``lease_wait`` (default 30 s; 0 fails fast) bounds how long a turn waits for another turn
    on the same thread in this process (see :mod:`plait.stores.lease`).
    """

    def __init__(self, *, lease_wait: float = DEFAULT_LEASE_WAIT_S) -> None:
        self._leases = LocalLeases(lease_wait)
        # Insertion order is recency order: a written thread is moved to the end. No lock:
        # append and delete do not await between checking the version and writing, so on the
        # event loop each is atomic (the store is not for sharing across threads).
        self._threads: dict[str, _StoredThread] = {}

    async def aclose(self) -> None:
        """Nothing to release: the threads stay readable."""

    async def load(self, thread_id: str) -> ThreadSnapshot:
        stored = self._threads.get(thread_id)
        if stored is None:
            return ThreadSnapshot(thread_id)
        return ThreadSnapshot(
            thread_id,
            [_loaded_message(m) for m in stored.messages],
            _loaded_state(stored.state),
            stored.version,
        )

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        copies = _stored_messages(thread_id, messages)
        state_copy = None if state is None else _stored_state(thread_id, state)
        current = self._threads.get(thread_id)
        version = 0 if current is None else current.version
        if version != expected_version:
            raise ThreadConflictError(thread_id, expected_version, version)
        stored = self._threads.pop(thread_id, None) or _StoredThread()
        stored.messages.extend(copies)
        if state_copy is not None:
            stored.state = state_copy
        stored.version += 1
        self._threads[thread_id] = stored
        return stored.version

    async def list_threads(self) -> list[str]:
        return list(reversed(self._threads))

    async def delete(self, thread_id: str) -> bool:
        return self._threads.pop(thread_id, None) is not None

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[None]:
        """One turn at a time on ``thread_id`` in this process; raises
        :class:`~plait.errors.ThreadBusyError` after ``lease_wait`` seconds."""
        return self._leases.lease(thread_id)


_new = object.__new__


class _NotPlain(Exception):
    """Raised inside the copiers for a value that must take the JSON codec's path."""


def _stored_messages(thread_id: str, messages: Sequence[Message]) -> list[Message]:
    check_parts(thread_id, messages)  # the copier below trusts each part's own checks
    try:
        copied: list[Message] = []
        for message in messages:  # a loop, not a comprehension: no extra frame (per dispatch)
            copied.append(_copy_message(message))
        return copied
    except (_NotPlain, UnicodeEncodeError):
        pass
    copies: list[Message | None] = []
    for message in messages:
        try:
            copies.append(_copy_message(message))
        except (_NotPlain, UnicodeEncodeError):
            copies.append(None)
    # The codec raises ThreadDataError naming the first message it cannot encode, or normalises.
    coded = messages_from_json(thread_id, messages_to_json(thread_id, messages))
    return [coded[i] if copy is None else copy for i, copy in enumerate(copies)]


def _loaded_message(message: Message) -> Message:
    """A fresh copy of a stored message (the codec's output may be deeper or hold bigger ints
    than the fast copier takes on; ``deepcopy`` copies those)."""
    try:
        return _copy_message(message)
    except (_NotPlain, UnicodeEncodeError):
        return deepcopy(message)


def _loaded_state(state: dict[str, Any]) -> dict[str, Any]:
    """A fresh copy of a stored state (see :func:`_loaded_message`)."""
    try:
        copy: dict[str, Any] = _plain(state)
    except (_NotPlain, UnicodeEncodeError):
        return deepcopy(state)
    return copy


def _stored_state(thread_id: str, state: Mapping[str, Any]) -> dict[str, Any]:
    try:
        copy: dict[str, Any] = _plain(state if type(state) is dict else dict(state))
    except (_NotPlain, UnicodeEncodeError):
        return state_from_json(state_to_json(thread_id, state))
    return copy


_FAST_DEPTH = 32
"""Nesting the copier handles itself; deeper values take the codec's path (and its limits)."""

_FAST_INT_BITS = 64
"""Largest ``int`` the copier handles itself; bigger ones take the codec's path."""
_FAST_INT = 2**_FAST_INT_BITS


def _plain(value: Any, depth: int = 0) -> Any:
    """A deep copy of ``value`` if it is made of exact plain JSON types, else :class:`_NotPlain`.

    Only the unremarkable is copied here: text UTF-8 can encode, ``int`` up to 64 bits, finite
    ``float``, nesting up to 32 levels. Everything else raises, so the codec decides it (the
    codec's own limits, e.g. on depth or huge integers, then apply to both stores alike).
    """
    kind = type(value)
    if kind is str:
        if not value.isascii():
            value.encode()
        return value
    if value is None or kind is bool:
        return value
    if kind is int:
        if value.bit_length() <= _FAST_INT_BITS:
            return value
        raise _NotPlain
    if kind is float:
        if math.isfinite(value):
            return value
        raise _NotPlain
    if depth >= _FAST_DEPTH:
        raise _NotPlain
    if kind is list:
        return [_plain(item, depth + 1) for item in value]
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            if not key.isascii():
                key.encode()
            # The usual flat values inline (a call per value would double the cost).
            kind = type(item)
            flat = (
                item is None
                or kind is bool
                or (kind is str and item.isascii())
                or (kind is int and -_FAST_INT < item < _FAST_INT)
            )
            copy[key] = item if flat else _plain(item, depth + 1)
        return copy
    raise _NotPlain


def _text(value: Any) -> str:
    """``value`` if it is an exact ``str`` UTF-8 can encode, else :class:`_NotPlain`."""
    if type(value) is str and (value.isascii() or value.encode()):
        return value
    raise _NotPlain


def _copy_message(message: Message) -> Message:
    """A copy of a message of one of the four exact kinds holding only plain values.

    Built slot by slot, without ``__init__``, and with the common case (ASCII ids and names, no
    metadata) tested inline: this runs for every message an agent persists.
    """
    kind = type(message)
    copy: Any = _new(kind)
    m: Any = message  # the exact kind is tested below (an isinstance assert per field costs)
    if kind is ToolMessage:
        data, call_id, name = m.data, m.tool_call_id, m.name
        ascii_id = type(call_id) is str and call_id.isascii()
        copy.tool_call_id = call_id if ascii_id else _text(call_id)
        copy.name = name if type(name) is str and name.isascii() else _text(name)
        copy.data = data if type(data) is str and data.isascii() else _plain(data)
        if type(m.is_error) is not bool:
            raise _NotPlain
        copy.is_error = m.is_error
        copy.parts = _content(m.parts) if m.parts else []
    elif kind is AssistantMessage:
        usage, reason, calls = m.usage, m.finish_reason, m.tool_calls
        copy.content = _content(m.content) if m.content else []
        copy.tool_calls = calls_copy = []
        for call in calls:
            calls_copy.append(_copy_call(call))
        copy.usage = None if usage is None else _copy_usage(usage)
        plain_reason = reason is None or (type(reason) is str and reason.isascii())
        copy.finish_reason = reason if plain_reason else _text(reason)
    elif kind is UserMessage or kind is SystemMessage:
        copy.content = _content(m.content)
    else:
        raise _NotPlain
    metadata, ident = message.metadata, message.id
    copy.metadata = {} if type(metadata) is dict and not metadata else _plain(metadata)
    if not ident:
        ident = new_id()  # as __init__ does for ""
    copy.id = ident if type(ident) is str and ident.isascii() else _text(ident)
    copy.role = message.role
    result: Message = copy
    return result


_DETAILS = (None, "auto", "low", "high")


def _content(parts: Any) -> list[Part]:
    """Copies of the parts. An image's or file's :class:`Blob` is immutable, so it is shared,
    never copied (nor re-hashed, re-encoded or re-sniffed: the copy is built field by field,
    its checks having passed when the original was built)."""
    if type(parts) is not list:
        raise _NotPlain
    copies: list[Part] = []
    for part in parts:
        kind = type(part)
        if kind is TextPart and part.type == "text":
            copies.append(TextPart(_text(part.text)))
        elif kind is ImagePart and part.type == "image":
            image = _new(ImagePart)
            image.source = _source(part.source)
            image.media_type = None if part.media_type is None else _text(part.media_type)
            if part.detail not in _DETAILS:
                raise _NotPlain
            image.detail = part.detail
            image.type = "image"
            copies.append(image)
        elif kind is FilePart and part.type == "file":
            file = _new(FilePart)
            file.source = _source(part.source)
            file.media_type = _text(part.media_type)
            file.filename = None if part.filename is None else _text(part.filename)
            file.type = "file"
            copies.append(file)
        elif kind is ReasoningPart and part.type == "reasoning":
            if type(part.payload) is not dict:
                raise _NotPlain
            reasoning = _new(ReasoningPart)
            reasoning.provider = _text(part.provider)
            reasoning.text = _text(part.text)
            reasoning.payload = _plain(part.payload)
            reasoning.type = "reasoning"
            copies.append(reasoning)
        else:
            raise _NotPlain
    return copies


def _source(source: Any) -> Blob | str:
    if type(source) is Blob:
        return source  # immutable: shared
    return _text(source)


def _copy_call(call: Any) -> ToolCall:
    if type(call) is not ToolCall or type(call.args) is not dict:
        raise _NotPlain
    copy = _new(ToolCall)
    ident, name, raw = call.id, call.name, call.raw_args
    copy.id = ident if type(ident) is str and ident.isascii() else _text(ident)
    copy.name = name if type(name) is str and name.isascii() else _text(name)
    copy.args = _plain(call.args) if call.args else {}
    copy.raw_args = None if raw is None else _text(raw)
    return copy


def _copy_usage(usage: Any) -> Usage:
    if type(usage) is not Usage:
        raise _NotPlain
    copy = _new(Usage)
    copy.input_tokens = count = usage.input_tokens
    plain = type(count) is int
    copy.output_tokens = count = usage.output_tokens
    plain = plain and type(count) is int
    copy.cache_read_tokens = count = usage.cache_read_tokens
    plain = plain and type(count) is int
    copy.cache_write_tokens = count = usage.cache_write_tokens
    plain = plain and type(count) is int
    copy.requests = count = usage.requests
    plain = plain and type(count) is int
    copy.reasoning_tokens = count = usage.reasoning_tokens
    plain = plain and type(count) is int
    copy.cache_write_1h_tokens = count = usage.cache_write_1h_tokens
    if not (plain and type(count) is int):
        raise _NotPlain
    result: Usage = copy
    return result
