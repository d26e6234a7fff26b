"""Which skills the messages of a request disclose: successful reads of a SKILL.md and pins.

A skill counts as read when the request holds a successful (not ``is_error``) result of a
``read_file`` call whose ``path`` (or ``file_path``) argument is the skill's SKILL.md, at any
offset or limit; it counts as pinned when the request holds its pinned-skill user message. Only
what is *in the request* counts: a read that compaction dropped no longer discloses anything.

:class:`DisclosureScan` keeps the result per thread and rescans only what changed: when the new
request starts with the same message and still holds the last message scanned at the same
position, only the messages after it are read. Anything else (a summary replaced the head, a
projected message moved) triggers one full pass, which is linear and allocation-light.
"""

from __future__ import annotations

from collections.abc import Sequence

from plait.messages import AssistantMessage, Message, ToolMessage, UserMessage
from plait.skills.disclosure.snapshot import normalize_location

__all__ = ["PINNED_SOURCE", "READ_TOOL_NAME", "DisclosureScan", "read_path"]

READ_TOOL_NAME = "read_file"
"""The tool whose SKILL.md reads disclose a skill (the middleware's own, or the agent's)."""

PINNED_SOURCE = "pinned_skill"
"""``metadata["source"]`` of a pinned-skill user message."""

_PATH_KEYS = ("path", "file_path")


def read_path(args: object) -> str | None:
    """The path argument of a ``read_file`` call (``path`` or ``file_path``), if any."""
    if isinstance(args, dict):
        for key in _PATH_KEYS:
            value = args.get(key)
            if isinstance(value, str):
                return value
    return None


def _pinned_path(message: UserMessage) -> str | None:
    meta = message.metadata
    if meta.get("source") != PINNED_SOURCE:
        return None
    skill = meta.get("skill")
    path = skill.get("path") if isinstance(skill, dict) else None
    return path if isinstance(path, str) else None


class DisclosureScan:
    """Disclosed SKILL.md locations (normalised) of the last request scanned, in the order they
    were first disclosed. Not thread-safe; one per conversation thread."""

    __slots__ = ("_count", "_first", "_last", "_pending", "_seen")

    def __init__(self) -> None:
        self._first = ""
        self._last = ""
        self._count = 0
        self._pending: dict[str, str] = {}
        self._seen: dict[str, None] = {}

    def update(self, messages: Sequence[Message]) -> tuple[str, ...]:
        """Scan ``messages`` (incrementally when possible); return the disclosed locations."""
        count = len(messages)
        start = self._count
        unchanged = (
            start > 0
            and count >= start
            and messages[0].id == self._first
            and messages[start - 1].id == self._last
        )
        if not unchanged:
            self._pending = {}
            self._seen = {}
            start = 0
        for index in range(start, count):
            self._scan(messages[index])
        self._count = count
        if count:
            self._first = messages[0].id
            self._last = messages[-1].id
        return tuple(self._seen)

    def _scan(self, message: Message) -> None:
        if isinstance(message, ToolMessage):
            path = self._pending.pop(message.tool_call_id, None)
            if path is not None and not message.is_error and message.name == READ_TOOL_NAME:
                self._seen.setdefault(path, None)
        elif isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.name == READ_TOOL_NAME:
                    path = read_path(call.args)
                    if path is not None:
                        self._pending[call.id] = normalize_location(path)
        elif isinstance(message, UserMessage) and message.metadata:
            pinned = _pinned_path(message)
            if pinned is not None:
                self._seen.setdefault(normalize_location(pinned), None)
