"""MCP tool results as plait tool results.

==========================================  ============================================
the server returned                         the model reads
==========================================  ============================================
``structuredContent``                       that object (JSON), whatever the text blocks;
                                            ``{"result": v}`` alone (how SDK servers wrap a
                                            value that is not an object) gives ``v``
text blocks only                            their text, joined by blank lines
other blocks (image, audio, resource,       a list of parts: ``{"type": "text", "text"}``,
link), with or without text                 ``{"type": "image", "mime_type", "bytes",
                                            "note"}``, ``{"type": "resource", "uri", ...}``,
                                            ``{"type": "resource_link", "uri", "name"}``
no content at all                           ``""``
``isError: true``                           a :class:`~plait.errors.ToolError` with the
                                            text (the model sees an error result)
==========================================  ============================================

Binary data is never inlined: plait's messages carry text and JSON, so an image becomes a
description with its MIME type and size. Text is cut at ``max_chars`` (default
:data:`DEFAULT_MAX_RESULT_CHARS`) with a note saying how much was dropped; a list of parts is
bounded the same way (each part counts, and the blocks past the budget become one note).
"""

from __future__ import annotations

import json
from typing import Any

from plait.errors import ToolError
from plait.mcp.content import BinaryContent, CallOutcome, Content, LinkContent, TextContent

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "plait_result"]

DEFAULT_MAX_RESULT_CHARS = 100_000
"""Characters of text a result keeps (longer text is cut, with a note)."""

_BINARY_NOTE = "binary data is not passed to the model; only its type and size"


def plait_result(outcome: CallOutcome, *, tool: str, max_chars: int) -> Any:
    """The plait tool result for ``outcome`` (see the module table); raises :class:`ToolError`
    for an ``isError`` result."""
    if outcome.is_error:
        text = "\n\n".join(_text_of(c) for c in outcome.content) or "(no error text)"
        raise ToolError(f"Tool {tool!r} reported an error: {_cut(text, max_chars)}")
    if outcome.structured is not None:
        structured: Any = dict(outcome.structured)
        if list(structured) == ["result"]:
            structured = structured["result"]
        if isinstance(structured, str):
            return _cut(structured, max_chars)
        encoded = json.dumps(structured, default=str)
        return _cut(encoded, max_chars) if len(encoded) > max_chars else structured
    if all(isinstance(c, TextContent) and c.uri is None for c in outcome.content):
        return _cut("\n\n".join(_text_of(c) for c in outcome.content), max_chars)
    return _parts(outcome.content, max_chars)


def _parts(contents: tuple[Content, ...], max_chars: int) -> list[dict[str, Any]]:
    """Each block as a part; every part (its JSON) counts against ``max_chars``, each string
    in a part is cut to what is left, and once nothing is left the remaining blocks are
    replaced by one note: a result of many blocks is bounded like one of text."""
    budget = max_chars
    parts: list[dict[str, Any]] = []
    for index, content in enumerate(contents):
        if budget <= 0:
            cut = len(contents) - index
            parts.append({"type": "text", "text": f"[... {cut} more content blocks cut]"})
            break
        part = _part(content, budget)
        budget -= len(json.dumps(part))
        parts.append(part)
    return parts


def _part(content: Content, budget: int) -> dict[str, Any]:
    if isinstance(content, TextContent):
        if content.uri is not None:
            uri = _cut(content.uri, budget)
            return {"type": "resource", "uri": uri, "text": _cut(content.text, budget)}
        return {"type": "text", "text": _cut(content.text, budget)}
    if isinstance(content, BinaryContent):
        part: dict[str, Any] = {"type": content.kind, "mime_type": _cut(content.mime_type, budget)}
        part["bytes"] = content.size
        if content.uri is not None:
            part["uri"] = _cut(content.uri, budget)
        part["note"] = _BINARY_NOTE
        return part
    link: LinkContent = content
    return {"type": "resource_link", "uri": _cut(link.uri, budget), "name": _cut(link.name, budget)}


def _text_of(content: Content) -> str:
    if isinstance(content, TextContent):
        return content.text
    if isinstance(content, BinaryContent):
        return f"[{content.kind} {content.mime_type}, {content.size} bytes]"
    return f"[resource {content.uri}]"


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"
