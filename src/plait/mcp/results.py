"""MCP tool results as plait tool results.

A result becomes a :class:`~plait.messages.ToolResult` whose ``data`` is its text and whose
``parts`` are its images, audio and binary resources, in the server's order:

==========================================  ============================================
the server returned                         the model reads
==========================================  ============================================
``structuredContent``                       that object (JSON), whatever the text blocks;
                                            ``{"result": v}`` alone (how SDK servers wrap a
                                            value that is not an object) gives ``v``; beside
                                            parts it is sent as its JSON text
text blocks                                 their text, joined by blank lines
an embedded text resource                   ``[resource URI]`` and its text, in the text
``ImageContent``                            an :class:`~plait.parts.ImagePart` of the
                                            decoded bytes and its MIME type
``AudioContent``                            a :class:`~plait.parts.FilePart` (bytes, MIME
                                            type)
an embedded blob resource                   a ``FilePart`` named by the URI's last path
                                            segment (an ``ImagePart`` for ``image/*``)
``ResourceLink``                            a line naming the URI (it is not fetched)
a block that cannot be a part (bad          a note in the text naming the block and why,
base64, bytes that are not the MIME type,   and an :class:`~plait.mcp.events.McpContentDropped`
an image type no provider takes, over       event; the rest of the result is kept
:data:`~plait.parts.MAX_PART_BYTES`)
no content at all                           ``""``
``isError: true``                           a :class:`~plait.errors.ToolError` with the
                                            text (the model sees an error result)
==========================================  ============================================

Bounds: the text is cut at ``max_chars`` (default :data:`DEFAULT_MAX_RESULT_CHARS`) with a note
saying how much was dropped; at most :data:`MAX_RESULT_PARTS` blocks become parts (the rest
become one note); the bytes are bounded by the server's ``max_message_bytes`` (the whole
message) and each part by :data:`~plait.parts.MAX_PART_BYTES`.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from plait.errors import ContentError, ToolError
from plait.mcp.content import BinaryContent, CallOutcome, Content, LinkContent, TextContent
from plait.messages import Part
from plait.parts import Blob, FilePart, ImagePart, sniff_media_type

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "MAX_RESULT_PARTS", "plait_result"]

DEFAULT_MAX_RESULT_CHARS = 100_000
"""Characters of text a result keeps (longer text is cut, with a note)."""

MAX_RESULT_PARTS = 100
"""Image, audio and blob blocks one result may turn into parts; the blocks past it become one
note (no provider takes more than 100 images in a request)."""

DropSink = Callable[[str], None]
"""Called with the note that replaces each block that could not become a part."""


def plait_result(
    outcome: CallOutcome, *, tool: str, max_chars: int, on_drop: DropSink | None = None
) -> Any:
    """The plait tool result for ``outcome`` (see the module table): the text alone, or, when
    the result holds images, audio or blobs, ``[text, *parts]`` (which the runtime splits into
    ``ToolResult.data`` and ``ToolResult.parts``). Raises :class:`ToolError` for an ``isError``
    result; ``on_drop`` gets the note for each block left out."""
    if outcome.is_error:
        text = "\n\n".join(_describe(c) for c in outcome.content) or "(no error text)"
        raise ToolError(f"Tool {tool!r} reported an error: {_cut(text, max_chars)}")
    texts: list[str] = []
    notes: list[str] = []
    parts: list[Part] = []
    left_out = 0
    for content in outcome.content:
        if isinstance(content, TextContent | LinkContent):
            texts.append(_describe(content))
        elif len(parts) >= MAX_RESULT_PARTS:
            left_out += 1
        else:
            try:
                parts.append(_part(content))
            except ContentError as exc:
                notes.append(f"[{_describe(content)} left out: {exc}]")
                texts.append(notes[-1])
    if left_out:
        notes.append(
            f"[{left_out} more image, audio or resource blocks left out: a result keeps at "
            f"most {MAX_RESULT_PARTS} (plait.mcp.results.MAX_RESULT_PARTS)]"
        )
        texts.append(notes[-1])
    if on_drop is not None:
        for note in notes:
            on_drop(note)
    if outcome.structured is None:
        data: Any = _cut("\n\n".join(texts), max_chars)
    else:
        structured: Any = dict(outcome.structured)
        if list(structured) == ["result"]:
            structured = structured["result"]
        if isinstance(structured, str):
            data = _cut("\n\n".join([structured, *notes]), max_chars)
        else:
            encoded = json.dumps(structured, default=str)
            if parts or notes or len(encoded) > max_chars:  # beside parts: its JSON text
                data = _cut("\n\n".join([encoded, *notes]), max_chars)
            else:
                data = structured
    return [data, *parts] if parts else data


def _part(content: BinaryContent) -> Part:
    """The block as an image or file part; a :class:`ContentError` says why it cannot be one."""
    text = content.data
    if any(space in text for space in "\n\r \t"):
        text = "".join(text.split())  # base64 wrapped in lines (MIME style) is still base64
    blob = Blob.from_base64(text)
    mime = (content.mime_type or "").split(";", 1)[0].strip().lower()
    if content.kind == "image" or (content.kind == "resource" and mime.startswith("image/")):
        return ImagePart(blob, mime or None)
    if content.kind == "audio" and not mime:
        raise ContentError("an audio block needs a mimeType")
    if not mime or "/" not in mime:
        mime = sniff_media_type(blob.data[:16]) or "application/octet-stream"
    return FilePart(blob, mime, _filename(content.uri))


def _filename(uri: str | None) -> str | None:
    if not uri:
        return None
    name = posixpath.basename(unquote(urlsplit(uri).path))
    return name[:255] or None


def _describe(content: Content) -> str:
    """A block as the line the model reads: text as it is, a binary block by its kind, URI,
    MIME type and size (in an error result, or before the note saying why it was left out)."""
    if isinstance(content, TextContent):
        return content.text if content.uri is None else f"[resource {content.uri}]\n{content.text}"
    if isinstance(content, LinkContent):
        about = ", ".join(x for x in (content.name, content.mime_type) if x)
        return f"[resource link {content.uri}{f' ({about})' if about else ''}; not fetched]"
    where = f" {_short(content.uri)}" if content.uri else ""
    mime = _short(content.mime_type or "no MIME type")
    return f"{content.kind}{where} ({mime}, {content.size:,} bytes)"


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[... {len(text) - limit} more characters cut]"
