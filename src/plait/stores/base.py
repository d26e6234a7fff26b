"""Thread stores: where a conversation's messages and state live between runs.

A thread is an append-only list of messages plus a state dict (JSON values). Every write names
the version it expects; a store that has moved on raises
:class:`~plait.errors.ThreadConflictError` and writes nothing (optimistic versioning), so two runs
appending to one thread can never interleave, lose or duplicate messages.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from plait.errors import ContentError, StoreError
from plait.messages import (
    FilePart,
    ImagePart,
    Message,
    ToolMessage,
    _messages_adapter,
    dump_messages,
    load_messages,
)
from plait.parts import BLOBS_BY_REFERENCE, Blob
from plait.storable import MAX_DEPTH, storable_message

__all__ = [
    "StoreError",
    "ThreadDataError",
    "ThreadSnapshot",
    "ThreadStore",
    "check_parts",
    "message_blobs",
    "messages_from_json",
    "messages_from_rows",
    "messages_to_json",
    "messages_to_rows",
    "state_from_json",
    "state_to_json",
]


@dataclass(slots=True)
class ThreadSnapshot:
    """A thread as loaded: its messages, its state, and the version to write against.

    A thread that was never written loads as an empty snapshot at version 0.
    """

    thread_id: str
    messages: list[Message] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    version: int = 0


@runtime_checkable
class ThreadStore(Protocol):
    """Persistence for threads. Implementations: ``MemoryThreadStore``, ``SQLiteThreadStore``,
    ``PostgresThreadStore``.

    Optionally a store has ``lease(thread_id)``, an async context manager a turn enters before it
    loads the thread, holding the thread for that turn alone (see :mod:`plait.stores.lease`).
    """

    async def load(self, thread_id: str) -> ThreadSnapshot:
        """The thread's messages, state and version (empty at version 0 if unknown)."""
        ...

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        """Append ``messages`` (and replace the state, if given) in one atomic write.

        Succeeds only if the thread is still at ``expected_version``; returns the new version
        (``expected_version + 1``). Otherwise raises ``ThreadConflictError`` and changes nothing.

        Cancellation settles: if the caller is cancelled, ``append`` raises ``CancelledError``
        only once the write has landed or certainly never will (a write handed to a thread or a
        server is waited for, within a bounded time), so the caller's next write sees it.
        """
        ...

    async def list_threads(self) -> list[str]:
        """Every thread id, most recently written first."""
        ...

    async def delete(self, thread_id: str) -> bool:
        """Remove a thread; return whether it existed."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds open (connections, pools). Idempotent; a store may
        reopen on its next call (SQLite does) or refuse it (a closed pool)."""
        ...


# --- Errors and the JSON codec every store shares --------------------------------------------
# Stores keep messages as the elements of a ``dump_messages`` array and the state as a JSON object,
# so the memory and SQLite stores accept and reject exactly the same values. SQLite and Postgres
# write the rows with blobs by reference (messages_to_rows) and keep the bytes apart, once.


class ThreadDataError(StoreError, TypeError):
    """A message or the state holds a value that cannot be stored as JSON; nothing was written.

    ``where`` names the value, e.g. ``state['plan'][2]`` or ``message 1 (id '…')``.
    """

    def __init__(self, thread_id: str, where: str, problem: str) -> None:
        self.thread_id = thread_id
        self.where = where
        super().__init__(
            f"Cannot store {where} of thread {thread_id!r}: {problem}. Thread data must be plain "
            "JSON values (dict with str keys, list, str, int, finite float, bool, None); convert "
            "it before writing."
        )


_SURROGATE = re.compile("[\ud800-\udfff]")
_LONG_DIGITS = re.compile(r"\d{3884,}")  # see plait.storable.MAX_INT_BITS


def state_to_json(thread_id: str, state: Mapping[str, Any]) -> str:
    """The state as a JSON object, after checking that loading it gives back an equal dict.

    Raises :class:`ThreadDataError` naming the first offending key: a value JSON cannot hold
    (a set, an object), a non-``str`` dict key or a tuple (both would come back changed), a NaN,
    text with a lone surrogate (UTF-8 cannot encode it). The runtime makes such values storable
    before writing (:mod:`plait.storable`).
    """
    _check_json(thread_id, dict(state), "state")
    return json.dumps(dict(state), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def state_from_json(data: str) -> dict[str, Any]:
    """The state dict written by :func:`state_to_json`."""
    state: dict[str, Any] = json.loads(data)
    return state


def messages_to_json(thread_id: str, messages: Sequence[Message]) -> list[str]:
    """One JSON document per message (each an element of :func:`dump_messages`' array).

    Raises :class:`ThreadDataError` naming the message whose data cannot be serialised.
    """
    check_parts(thread_id, messages)
    return [_row(thread_id, index, message, None) for index, message in enumerate(messages)]


def check_parts(thread_id: str, messages: Sequence[Message]) -> None:
    """Raise :class:`ThreadDataError` if an image or file part of ``messages`` no longer passes
    the checks it passed when built (a field changed since: a ``file:`` URL, a media type its
    bytes do not match, a ``detail`` no provider takes). Such a part would be written but never
    read back, leaving the thread unreadable; its bytes are not copied by the check."""
    for index, message in enumerate(messages):
        parts = message.parts if isinstance(message, ToolMessage) else message.content
        for i, part in enumerate(parts):
            if not isinstance(part, ImagePart | FilePart):
                continue
            problem = _part_problem(part)
            if problem is not None:
                field = "parts" if isinstance(message, ToolMessage) else "content"
                where = f"message {index} (id {message.id!r}) {field}[{i}]"
                raise ThreadDataError(thread_id, where, problem)


def _part_problem(part: ImagePart | FilePart) -> str | None:
    try:
        if isinstance(part, ImagePart):
            ImagePart(part.source, part.media_type, part.detail)
        else:
            if part.filename is not None and type(part.filename) is not str:
                return f"a file name is text, not {type(part.filename).__name__}"
            if type(part.media_type) is not str:
                return f"a media type is text, not {type(part.media_type).__name__}"
            FilePart(part.source, part.media_type, part.filename)
    except ContentError as exc:
        return str(exc)
    if isinstance(part.source, str) and part.source[:5].lower() == "data:":
        return "a data: URL source is held as bytes (build the part again to decode it)"
    return None


def _row(thread_id: str, index: int, message: Message, context: dict[str, Any] | None) -> str:
    from pydantic_core import PydanticSerializationError  # loaded by dump_messages anyway

    where = f"message {index} (id {message.id!r})"
    try:
        if context is None:
            row = dump_messages([message])[1:-1]
        else:
            row = _messages_adapter().dump_json([message], context=context).decode()[1:-1]
    except PydanticSerializationError as exc:
        raise ThreadDataError(thread_id, where, str(exc)) from exc
    if row.count("[") + row.count("{") > MAX_DEPTH or _LONG_DIGITS.search(row) is not None:
        # Maybe nesting or an int that JSON readers refuse: it would write but never read
        # back. Only then walk the message to be sure (brackets and digits in text are fine).
        _, found = storable_message(message)
        if found:
            raise ThreadDataError(thread_id, f"{where} {found[0].where}", found[0].problem)
    return row


def message_blobs(messages: Sequence[Message]) -> dict[str, Blob]:
    """Every :class:`~plait.parts.Blob` the messages' image and file parts hold, by sha256."""
    blobs: dict[str, Blob] = {}
    for message in messages:
        parts = message.parts if isinstance(message, ToolMessage) else message.content
        for part in parts:
            if isinstance(part, ImagePart | FilePart):
                blob = part.source
                if isinstance(blob, Blob):
                    blobs.setdefault(blob.sha256, blob)
    return blobs


def messages_to_rows(
    thread_id: str, messages: Sequence[Message]
) -> tuple[list[str], dict[str, Blob]]:
    """The rows of :func:`messages_to_json` with every blob written by reference
    (``{"sha256", "size"}``), and those blobs by sha256: a store keeps each blob's bytes once,
    in its blob table, and the rows hold only the address. A message without blobs gives the
    same row as :func:`messages_to_json`.
    """
    check_parts(thread_id, messages)
    blobs = message_blobs(messages)
    if not blobs:
        return messages_to_json(thread_id, messages), blobs
    context = {BLOBS_BY_REFERENCE: True}
    return [_row(thread_id, i, m, context) for i, m in enumerate(messages)], blobs


def messages_from_rows(
    thread_id: str, rows: Sequence[str], blobs: Mapping[str, bytes]
) -> list[Message]:
    """The messages written by :func:`messages_to_rows`, each blob reference resolved from
    ``blobs`` (sha256 -> bytes, the thread's blob rows read in one query). Rows written before
    blobs were stored apart (inline base64) load unchanged.

    Raises :class:`StoreError` if a row no longer parses or names a blob the store lacks.
    """

    def resolve(digest: str) -> bytes:
        data = blobs.get(digest)
        if data is None:
            raise ValueError(f"blob sha256:{digest[:12]} is missing from the store's blob table")
        return data

    try:
        return _messages_adapter().validate_json(
            "[" + ",".join(rows) + "]", context={BLOBS_BY_REFERENCE: resolve}
        )
    except ValueError as exc:
        raise _unreadable(thread_id, exc) from exc


def messages_from_json(thread_id: str, rows: Sequence[str]) -> list[Message]:
    """The messages written by :func:`messages_to_json`, parsed in one pass.

    Raises :class:`StoreError` if a stored row no longer parses (the store was edited or damaged).
    """
    try:
        return load_messages("[" + ",".join(rows) + "]")
    except ValueError as exc:
        raise _unreadable(thread_id, exc) from exc


def _unreadable(thread_id: str, exc: ValueError) -> StoreError:
    return StoreError(
        f"Thread {thread_id!r} holds a message that cannot be read back ({exc}). The store "
        "was changed outside plait or is damaged; delete the thread or restore a backup."
    )


def _check_json(thread_id: str, value: object, where: str) -> None:
    if isinstance(value, str):
        if _SURROGATE.search(value) is not None:
            raise ThreadDataError(
                thread_id, where, "text holds a lone surrogate, which UTF-8 cannot encode"
            )
        return
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ThreadDataError(thread_id, where, f"{value} is not a JSON number")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(thread_id, item, f"{where}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ThreadDataError(
                    thread_id, f"{where}[{key!r}]", "JSON object keys must be str"
                )
            _check_json(thread_id, key, f"{where} key {key!r}")
            _check_json(thread_id, item, f"{where}[{key!r}]")
        return
    hint = "use a list" if isinstance(value, tuple) else "JSON cannot hold it"
    raise ThreadDataError(thread_id, where, f"{type(value).__name__} value ({hint})")
