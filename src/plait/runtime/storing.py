"""How a turn writes to its thread store: storable values, and writes that settle.

Two guarantees the turn relies on:

* **What entered the turn can be stored.** Input, model responses and tool results pass through
  :mod:`plait.storable` where they enter (:func:`storable_input`, :func:`storable_response`); a
  write the store still rejects with :class:`~plait.stores.base.ThreadDataError` (a value
  middleware added, a non-JSON value in the state) is made storable and retried once, so a
  dispatch whose tools ran is always persisted. Every replacement is reported as a
  :class:`~plait.runtime.events.ValuesReplaced` event.
* **A write settles before the turn lets go.** A store's ``append`` must not leave a write in
  flight when it raises ``CancelledError`` (the :class:`~plait.stores.base.ThreadStore`
  contract): the SQLite store lets its worker-thread write finish first, the memory store writes
  without suspending. So when ``agent.run`` raises ``CancelledError`` the thread is at rest and
  the next turn on it starts cleanly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from plait.messages import Message, UserMessage
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
    "append_storable",
    "storable_input",
    "storable_response",
    "swap_written",
    "unanswered_repeat",
]

SETTLE_TIMEOUT = 30.0
"""Seconds a new turn waits in all, when an abandoned turn (a stream left with ``break``) is
still running on its thread: for that turn to settle, then for the thread's lease. Past it the
new turn raises :class:`~plait.errors.ThreadBusyError`; nothing was loaded or sent."""


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


_SMALL_INT = 2**63


def _plainly_ascii(response: ModelResponse) -> bool:
    """Whether ``response`` certainly needs no change, decided inline for the common case (ASCII
    text, calls whose arguments are a flat dict of ASCII text, small ints, finite floats, bools
    and ``None``): every response passes here, and ASCII text holds no surrogate."""
    content, reason = response.content, response.finish_reason
    if type(content) is not str or not content.isascii():
        return False
    if reason is not None and (type(reason) is not str or not reason.isascii()):
        return False
    for call in response.tool_calls:
        ident, name, args = call.id, call.name, call.args
        if call.raw_args is not None or type(args) is not dict:
            return False
        if type(ident) is not str or type(name) is not str:
            return False
        if not (ident.isascii() and name.isascii()):
            return False
        for key, value in args.items():
            kind = type(value)
            if type(key) is not str or not key.isascii():
                return False
            if not (
                (kind is str and value.isascii())
                or (kind is int and -_SMALL_INT < value < _SMALL_INT)
                or value is None
                or kind is bool
                or (kind is float and math.isfinite(value))
            ):
                return False
    return True


def storable_response(response: ModelResponse, emit: EventSink) -> ModelResponse:
    """``response`` with its text, tool calls and finish reason made storable (the same object
    when nothing changed), so the tools run with exactly the arguments the thread keeps."""
    if _plainly_ascii(response):
        return response
    found: list[Replacement] = []
    content = storable_text(response.content, "content", found)
    calls = storable_calls(response.tool_calls, found)
    reason = storable_text(response.finish_reason, "finish_reason", found)
    if not found:
        return response
    _report(emit, "model_response", found)
    return response.replace(content=content, tool_calls=calls, finish_reason=reason)


def swap_written(
    history: list[Message], sent: Sequence[Message], written: Sequence[Message]
) -> None:
    """Put each storable copy in ``written`` in place of its original in ``sent`` where
    ``history`` holds it (found by identity, searching from the end), so the rest of the turn
    works with the values the store holds. Originals not in ``history`` are left alone."""
    for before, after in zip(sent, written, strict=True):
        if before is after:
            continue
        for i in range(len(history) - 1, -1, -1):
            if history[i] is before:
                history[i] = after
                break


async def append_storable(
    store: ThreadStore,
    thread_id: str,
    messages: Sequence[Message],
    *,
    expected_version: int,
    state: Mapping[str, Any] | None,
    emit: EventSink,
) -> tuple[int, list[Message]]:
    """``store.append``; if the store rejects a value, retried once with the messages and state
    made storable (the state as written; the live dict the middleware holds is left as is).

    Returns the new version and the messages as written: ``messages`` itself (as a list) when
    the store took it, else the storable copies, so the caller reports exactly what the thread
    holds (``RunResult.new_messages``, ``DispatchFinished``).
    """
    try:
        version = await store.append(
            thread_id, messages, expected_version=expected_version, state=state
        )
        return version, messages if isinstance(messages, list) else list(messages)
    except ThreadDataError:
        pass
    fixed = storable_messages(messages, emit, "persist")
    found: list[Replacement] = []
    fixed_state = (
        None if state is None else storable_value(dict(state), "state", found, str_keys=True)
    )
    _report(emit, "state", found)
    version = await store.append(
        thread_id, fixed, expected_version=expected_version, state=fixed_state
    )
    return version, fixed


def unanswered_repeat(stored: Sequence[Message], input: Sequence[Message]) -> list[Message] | None:
    """The stored messages a new turn's ``input`` repeats, when the thread ends with user
    messages of exactly that content and nothing after them: the turn that stored them failed
    before any answer, and this is its retry (``plait run -c`` again). The turn then goes on from
    them instead of storing a second copy; otherwise ``None``."""
    count = len(input)
    if not count or len(stored) < count:
        return None
    tail = stored[len(stored) - count :]
    for old, new in zip(tail, input, strict=True):
        if type(new) is not UserMessage or type(old) is not UserMessage:
            return None
        if old.content != new.content or old.metadata != new.metadata:
            return None
    return list(tail)
