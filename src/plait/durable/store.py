"""The thread store a durable turn writes through: its load and every append are DBOS steps.

On replay a recorded load returns the snapshot the first run saw (not today's thread, which
already holds that run's dispatches) and a recorded append returns its version without writing
again, so no message is stored twice. The one append that can be in flight at a crash, written
to the store but not yet recorded in the journal, is recognised when it runs again: the store
answers ``ThreadConflictError`` and the thread's newest messages are the ones being appended
(same roles, call ids and text; message ids are fresh on replay), so the version it reached is
recorded and nothing is written.

Outside a workflow every call goes straight to the wrapped store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from plait.durable.codec import dump_snapshot, load_snapshot
from plait.errors import ThreadConflictError
from plait.messages import Message, ToolMessage
from plait.stores.base import ThreadSnapshot, ThreadStore
from plait.stores.lease import thread_lease

__all__ = ["JournaledStore"]


def _fingerprint(message: Message) -> tuple[Any, ...]:
    """What identifies a message across a replay (its id is new each run)."""
    if isinstance(message, ToolMessage):
        return ("tool", message.tool_call_id, message.name, message.is_error)
    calls = tuple(c.id for c in getattr(message, "tool_calls", ()))
    return (message.role, message.text, calls)


class JournaledStore:
    """``store`` with ``load`` and ``append`` journaled as DBOS steps inside a durable turn."""

    def __init__(self, store: ThreadStore) -> None:
        self.inner = store

    def lease(self, thread_id: str) -> AbstractAsyncContextManager[object]:
        return thread_lease(self.inner, thread_id)

    async def load(self, thread_id: str) -> ThreadSnapshot:
        from dbos import DBOS

        if DBOS.workflow_id is None:
            return await self.inner.load(thread_id)

        async def load_step() -> str:
            return dump_snapshot(await self.inner.load(thread_id))

        text = await DBOS.run_step_async({"name": "plait.load"}, load_step)
        return load_snapshot(text)

    async def append(
        self,
        thread_id: str,
        messages: Sequence[Message],
        *,
        expected_version: int,
        state: Mapping[str, Any] | None = None,
    ) -> int:
        from dbos import DBOS

        if DBOS.workflow_id is None:
            return await self.inner.append(
                thread_id, messages, expected_version=expected_version, state=state
            )

        async def append_step() -> str:
            try:
                version = await self.inner.append(
                    thread_id, messages, expected_version=expected_version, state=state
                )
            except ThreadConflictError:
                if not await self._landed(thread_id, messages, expected_version):
                    raise
                version = expected_version + 1
            return json.dumps(version)

        name = f"plait.append:{expected_version}"
        return int(json.loads(await DBOS.run_step_async({"name": name}, append_step)))

    async def _landed(
        self, thread_id: str, messages: Sequence[Message], expected_version: int
    ) -> bool:
        """Whether this very append landed before the crash: the thread is one version on and
        ends with these messages."""
        snapshot = await self.inner.load(thread_id)
        if snapshot.version != expected_version + 1:
            return False
        if not messages:
            return True
        tail = snapshot.messages[-len(messages) :]
        return [_fingerprint(m) for m in tail] == [_fingerprint(m) for m in messages]

    async def list_threads(self) -> list[str]:
        return await self.inner.list_threads()

    async def delete(self, thread_id: str) -> bool:
        return await self.inner.delete(thread_id)

    async def aclose(self) -> None:
        """The wrapped store is the caller's: nothing to close here."""
