"""Turning provider tool-call argument text into :class:`~plait.messages.ToolCall` objects.

Shared by the provider adapters: :func:`parse_tool_arguments` for whole argument strings and
:class:`ToolCallBuffer` for arguments that arrive in streamed fragments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from plait.messages import ToolCall
from plait.models.base import ToolCallDelta

__all__ = ["ToolCallBuffer", "dump_tool_arguments", "parse_tool_arguments"]


def parse_tool_arguments(text: object) -> tuple[dict[str, Any], str | None]:
    """``(args, raw_args)`` for a provider's argument text.

    A JSON object gives ``(object, None)``; empty text means no arguments, ``({}, None)``.
    Anything else (broken JSON, a list, a number) gives ``({}, text)`` so the tool fails
    validation with a message that quotes what the model sent. Some OpenAI-compatible servers
    send the arguments already decoded: a ``dict`` is taken as it is, ``None`` as no arguments,
    any other value as its JSON text.
    """
    if isinstance(text, dict):
        return text, None
    if text is None:
        return {}, None
    if not isinstance(text, str):
        return {}, to_json(text, fallback=repr).decode()
    if not text or text.isspace():
        return {}, None
    try:
        value = json.loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text


def dump_tool_arguments(call: ToolCall) -> str:
    """A call's arguments as compact JSON, for sending a past call back to a provider.

    A call whose ``raw_args`` were not a JSON object is sent with its (empty) ``args``: replaying
    broken JSON could make the provider reject the whole conversation, and the tool's error
    result already quotes the raw text to the model.
    """
    return to_json(call.args).decode()


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)


class ToolCallBuffer:
    """Collects streamed tool-call fragments into whole calls.

    Fragments are keyed by the provider's index. A fragment that carries a *different* id for an
    index already in use starts a new call: some OpenAI-compatible servers send every parallel
    call with index 0. The :class:`ToolCallDelta` events returned carry dense 0-based indexes in
    the order calls started.
    """

    __slots__ = ("_by_key", "_calls")

    def __init__(self) -> None:
        self._calls: list[_PendingCall] = []
        self._by_key: dict[int, int] = {}

    def add(
        self, key: int, *, id: str | None = None, name: str | None = None, fragment: str = ""
    ) -> ToolCallDelta:
        """Record one fragment and return the event that reports it."""
        index = self._by_key.get(key)
        if index is None or (id and self._calls[index].id and self._calls[index].id != id):
            index = len(self._calls)
            self._calls.append(_PendingCall())
            self._by_key[key] = index
        pending = self._calls[index]
        if id:
            pending.id = id
        if name:
            pending.name = name
        if fragment:
            pending.fragments.append(fragment)
        return ToolCallDelta(index, id or None, name or None, fragment)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def calls(self) -> list[ToolCall]:
        """Every call so far, arguments parsed with :func:`parse_tool_arguments`."""
        result = []
        for pending in self._calls:
            args, raw = parse_tool_arguments("".join(pending.fragments))
            result.append(ToolCall(pending.id, pending.name, args, raw))
        return result
