"""A stored thread as a document: ``threads show --json`` and ``threads export``.

=========================  =================================================================
form                       holds
=========================  =================================================================
:func:`thread_json`        ``{"thread_id", "version", "state", "messages"}``; ``messages`` as
                           :func:`~plait.messages.dump_messages` writes them. ``by_reference``
                           (``show --json``): each image and file part as ``{"type",
                           "media_type", "size", "sha256"}`` (plus ``filename``/``detail``),
                           no bytes; otherwise (``export``) lossless, bytes inline as base64,
                           so ``load_messages(json.dumps(doc["messages"]))`` gives the thread
                           back
:func:`thread_markdown`    a transcript to read: a heading per message, text as written, tool
                           calls and results in fenced blocks, images and files named (media
                           type, size, sha256 prefix), reasoning folded in ``<details>``
=========================  =================================================================
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from plait.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
    _messages_adapter,
)
from plait.parts import BLOBS_BY_REFERENCE, FilePart, ImagePart, ReasoningPart, part_label

if TYPE_CHECKING:
    from plait.stores.base import ThreadSnapshot

__all__ = ["thread_json", "thread_markdown"]


def thread_json(snapshot: ThreadSnapshot, *, by_reference: bool = False) -> dict[str, Any]:
    """The thread as one JSON-ready dict (see the module table)."""
    context = {BLOBS_BY_REFERENCE: True} if by_reference else None
    messages = _messages_adapter().dump_python(snapshot.messages, mode="json", context=context)
    if by_reference:
        for message in messages:
            for key in ("content", "parts"):
                if isinstance(message.get(key), list):
                    message[key] = [_by_reference(part) for part in message[key]]
    return {
        "thread_id": snapshot.thread_id,
        "version": snapshot.version,
        "state": snapshot.state,
        "messages": messages,
    }


def _by_reference(part: dict[str, Any]) -> dict[str, Any]:
    """An image or file part with its blob's address flattened in (``size``, ``sha256``); a
    URL source stays as ``url``."""
    if part.get("type") not in ("image", "file"):
        return part
    flat = {k: v for k, v in part.items() if k != "source"}
    source = part.get("source")
    if isinstance(source, dict):
        flat.update(size=source.get("size"), sha256=source.get("sha256"))
    else:
        flat["url"] = source
    return {k: v for k, v in flat.items() if v is not None}


_HEADINGS = {"system": "System", "user": "User", "assistant": "Assistant"}


def thread_markdown(snapshot: ThreadSnapshot, heading: str = "") -> str:
    """The thread as a Markdown transcript (see the module table); ``heading`` goes under the
    title (the model and when, for instance)."""
    lines = [f"# Thread {snapshot.thread_id.lower()}", ""]
    if heading:
        lines += [heading, ""]
    for message in snapshot.messages:
        lines += _message(message)
    return "\n".join(lines).rstrip("\n") + "\n"


def _message(message: Message) -> list[str]:
    if isinstance(message, ToolMessage):
        mark = " (error)" if message.is_error else ""
        lines = [f"## Tool result: {_inline(message.name)}{mark}", ""]
        lines += _fenced(_data_text(message.data), "json" if _is_json(message.data) else "text")
        for part in message.parts:
            if isinstance(part, ImagePart | FilePart):
                lines += [f"- *{_inline(part_label(part))}*"]
        return [*lines, ""]
    assert isinstance(message, SystemMessage | UserMessage | AssistantMessage)
    lines = [f"## {_HEADINGS[message.role]}", ""]
    for part in message.content:
        if isinstance(part, TextPart):
            lines += [part.text, ""]
        elif isinstance(part, ReasoningPart):
            lines += [f"<details><summary>{_inline(part_label(part))}</summary>", ""]
            lines += [*_fenced(part.text or "(redacted)", "text"), "</details>", ""]
        elif isinstance(part, ImagePart | FilePart):
            lines += [f"*{_inline(part_label(part))}*", ""]
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            lines += [f"**Tool call** `{_inline(call.name)}` (id `{_inline(call.id)}`):", ""]
            args = json.dumps(call.args, ensure_ascii=False, indent=2)
            lines += _fenced(args, "json")
    return lines


def _is_json(data: Any) -> bool:
    return not isinstance(data, str)


def _data_text(data: Any) -> str:
    if isinstance(data, str):
        return data
    return json.dumps(data, ensure_ascii=False, indent=2, default=str)


def _fenced(text: str, language: str) -> list[str]:
    """``text`` in a code fence longer than any run of backticks inside it, so it cannot close
    the fence early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", text, fence, ""]


def _inline(text: str) -> str:
    """One line of text for a heading or label: newlines and backticks cannot break it."""
    return " ".join(text.split()).replace("`", "'")
