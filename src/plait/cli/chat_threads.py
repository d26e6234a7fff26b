"""What ``plait chat`` shows of stored threads: the recap of a continued thread (``-c``,
``--thread``, ``--resume``) and the list ``--resume`` picks from. Pure functions over
:class:`~plait.stores.base.ThreadSnapshot`; :mod:`plait.cli.chat` prints them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from plait.cli.console import short
from plait.cli.run import THREAD_INFO_KEY
from plait.cli.thread_choice import shown_id
from plait.errors import ConfigurationError
from plait.messages import AssistantMessage, Message, UserMessage

if TYPE_CHECKING:
    from plait.stores.base import ThreadSnapshot

__all__ = [
    "RECAP_CHARS",
    "RECAP_EXCHANGES",
    "RESUME_LIMIT",
    "age",
    "pick",
    "recap_lines",
    "resume_lines",
    "user_turns",
]

RECAP_EXCHANGES = 3
"""How many of the last user/assistant exchanges the recap of a continued thread shows."""

RECAP_CHARS = 100
"""Characters of each recap line (one message's text, whitespace folded); longer ones end in …."""

RESUME_LIMIT = 10
"""How many of the most recently written threads ``--resume`` lists."""

PREFIX_CHARS = 8
"""Characters of a thread id ``--resume`` shows (a unique prefix for any realistic store)."""


def _asked(message: Message) -> bool:
    """A message the person wrote (a pinned skill's SKILL.md is a user message they did not)."""
    return isinstance(message, UserMessage) and message.metadata.get("source") != "pinned_skill"


def user_turns(snapshot: ThreadSnapshot) -> int:
    """The number of messages the person wrote in the thread (its turns)."""
    return sum(1 for m in snapshot.messages if _asked(m))


def recap_lines(snapshot: ThreadSnapshot, exchanges: int = RECAP_EXCHANGES) -> list[str]:
    """The thread's id and turn count, then its last ``exchanges`` questions with the answer
    each got (the last assistant text after it; tool calls and results left out), each
    :data:`RECAP_CHARS` at most."""
    turns = user_turns(snapshot)
    lines = [f"continuing thread {shown_id(snapshot.thread_id)} · {_turns(turns)}"]
    pairs: list[tuple[str, str]] = []
    for message in snapshot.messages:
        if _asked(message):
            pairs.append((message.text, ""))
        elif isinstance(message, AssistantMessage) and message.text.strip() and pairs:
            pairs[-1] = (pairs[-1][0], message.text)
    if len(pairs) > exchanges:
        lines.append(f"  … {len(pairs) - exchanges} earlier")
    for asked, answer in pairs[-exchanges:] if exchanges else []:
        lines.append(f"  you> {short(asked, RECAP_CHARS)}")
        if answer:
            lines.append(f"  {short(answer, RECAP_CHARS)}")
    return lines


def age(updated: object, now: datetime | None = None) -> str:
    """How long ago an ISO time was: ``12s``, ``5m``, ``3h``, ``2d`` (``-`` when unknown)."""
    if not isinstance(updated, str):
        return "-"
    try:
        when = datetime.fromisoformat(updated)
    except ValueError:
        return "-"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = max(int(((now or datetime.now(UTC)) - when).total_seconds()), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def resume_lines(snapshots: Sequence[ThreadSnapshot], now: datetime | None = None) -> list[str]:
    """``--resume``'s list: one numbered line per thread (id prefix, age, turns, first words of
    its first question)."""
    lines = []
    width = len(str(len(snapshots)))
    for number, snapshot in enumerate(snapshots, 1):
        info = snapshot.state.get(THREAD_INFO_KEY)
        updated = info.get("updated") if isinstance(info, dict) else None
        first = next((m.text for m in snapshot.messages if _asked(m)), "")
        prefix = shown_id(snapshot.thread_id)[:PREFIX_CHARS]
        lines.append(
            f"{number:>{width}}. {prefix}  {age(updated, now):>8}  "
            f"{_turns(user_turns(snapshot)):>8}  {short(first, 60)}"
        )
    return lines


def pick(answer: str, count: int) -> int | None:
    """The index (0-based) of the thread numbered ``answer`` among ``count``; ``None`` for an
    empty answer. Anything else is a :class:`~plait.errors.ConfigurationError`."""
    text = answer.strip()
    if not text:
        return None
    if text.isdigit() and 1 <= int(text) <= count:
        return int(text) - 1
    raise ConfigurationError(
        f"Pick a thread by its number, 1 to {count}, not {text!r} (or give --resume ID)."
    )


def _turns(count: int) -> str:
    return f"{count} turn{'s' if count != 1 else ''}"
