"""How a turn writes to its thread store: storable values, and writes that settle.

Two guarantees the turn relies on:

* **What entered the turn can be stored.** Input, model responses and tool results pass through
  :mod:`plait.storable` where they enter (:func:`storable_input`, :func:`storable_response`); a
  write the store still rejects with :class:`~plait.stores.base.ThreadDataError` (a value
  middleware added, a non-JSON value in the state) is made storable and retried once, so a
  dispatch whose tools ran is always persisted. Every replacement is reported as a
  :class:`~plait.runtime.events.ValuesReplaced` event.
* **A write settles before the turn lets go.** Stores may write in a worker thread
  (``asyncio.to_thread``), which a cancellation cannot stop. If the turn is cancelled while a write
  is in flight, :func:`append_settled` waits for the write to finish (at most
  ``SETTLE_TIMEOUT`` seconds) before letting the cancellation through, so when ``agent.run``
  raises ``CancelledError`` the thread is at rest and the next turn on it starts cleanly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from plait.messages import Message
from plait.middleware.context import EventSink
from plait.models.base import ModelResponse
from plait.runtime.events import ValuesReplaced
from plait.storable import (
    Replacement,
    storable_calls,
    storable_message,
    storable_text,
    storable_value,
)
from plait.stores.base import ThreadDataError, ThreadStore

__all__ = [
    "SETTLE_TIMEOUT",
    "append_settled",
    "settled",
    "storable_input",
    "storable_response",
]

SETTLE_TIMEOUT = 30.0
"""Seconds a cancelled turn waits for its in-flight store write before giving up on it."""

T = TypeVar("T")


def _report(emit: EventSink, source: str, found: list[Replacement]) -> None:
    if found:
        emit(ValuesReplaced(source=source, replacements=found))


def storable_messages(messages: Sequence[Message], emit: EventSink, source: str) -> list[Message]:
    """``messages`` made storable (unchanged messages are the same objects); reports what was
    replaced as one event, each ``where`` prefixed with the message's position."""
    out: list[Message] = []
    found: list[Replacement] = []
    for i, message in enumerate(messages):
        fixed, replaced = storable_message(message)
        found.extend(Replacement(f"message {i}: {r.where}", r.problem) for r in replaced)
        out.append(fixed)
    _report(emit, source, found)
    return out


def storable_input(messages: Sequence[Message], emit: EventSink) -> list[Message]:
    """The turn's input made storable (e.g. a command-line argument that was not UTF-8)."""
    return storable_messages(messages, emit, "input")


def storable_response(response: ModelResponse, emit: EventSink) -> ModelResponse:
    """``response`` with its text, tool calls and finish reason made storable (the same object
    when nothing changed), so the tools run with exactly the arguments the thread keeps."""
    found: list[Replacement] = []
    content = storable_text(response.content, "content", found)
    calls = storable_calls(response.tool_calls, found)
    reason = storable_text(response.finish_reason, "finish_reason", found)
    if not found:
        return response
    _report(emit, "model_response", found)
    return response.replace(content=content, tool_calls=calls, finish_reason=reason)


async def settled(write: Awaitable[T], within: float = SETTLE_TIMEOUT) -> T:
    """Await ``write``; if cancelled meanwhile, let ``write`` finish first (at most ``within``
    seconds, however often the cancellation is repeated), then re-raise the cancellation."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not task.done() and loop.time() < deadline:
            try:
                await asyncio.wait({task}, timeout=deadline - loop.time())
            except asyncio.CancelledError:
                continue
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: the cancellation is what the caller sees
        raise


async def append_settled(
    store: ThreadStore,
    thread_id: str,
    messages: Sequence[Message],
    *,
    expected_version: int,
    state: Mapping[str, Any] | None,
    emit: EventSink,
) -> int:
    """``store.append`` that settles on cancellation (:func:`settled`) and, if the store rejects
    a value, retries once with the messages and state made storable (the state as written; the
    live dict the middleware holds is left as it is)."""
    try:
        return await settled(
            store.append(thread_id, messages, expected_version=expected_version, state=state)
        )
    except ThreadDataError:
        pass
    fixed = storable_messages(messages, emit, "persist")
    found: list[Replacement] = []
    fixed_state = (
        None if state is None else storable_value(dict(state), "state", found, str_keys=True)
    )
    _report(emit, "state", found)
    return await settled(
        store.append(thread_id, fixed, expected_version=expected_version, state=fixed_state)
    )
