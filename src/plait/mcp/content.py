"""What an MCP server sends, in plait's own terms: :class:`RemoteTool` (a listed tool),
:class:`CallOutcome` (a ``tools/call`` result) and its content blocks, plus the conversions from
the SDK's (1.x) types, which import the SDK only when called.

Everything past :mod:`plait.mcp.client` sees only these dataclasses, so an SDK major-version
change stays in the conversions here and in the client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "BinaryContent",
    "CallOutcome",
    "Content",
    "LinkContent",
    "RemoteTool",
    "TextContent",
    "outcome_of",
    "remote_tool_of",
]


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as the server lists it (its own name, not yet prefixed)."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TextContent:
    """A text block of a tool result; ``uri`` is set for an embedded text resource."""

    text: str
    uri: str | None = None


@dataclass(frozen=True, slots=True)
class BinaryContent:
    """An image, audio clip or binary resource (``kind`` ``"image"``, ``"audio"`` or
    ``"resource"``): its MIME type (``None`` when a resource gives none) and its data as the
    server sent it, base64 text (not decoded here: :mod:`plait.mcp.results` decodes and checks
    it, and a block that fails becomes a note instead of failing the call); ``uri`` is set for
    an embedded resource."""

    kind: str
    mime_type: str | None
    data: str
    uri: str | None = None

    @property
    def size(self) -> int:
        """The decoded size in bytes, as the base64 text announces it (not decoded)."""
        text = self.data.rstrip("=\n\r ")
        return len(text) * 3 // 4


@dataclass(frozen=True, slots=True)
class LinkContent:
    """A link to a resource the server can serve (``resources/read``)."""

    uri: str
    name: str
    mime_type: str | None = None


Content: TypeAlias = TextContent | BinaryContent | LinkContent


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What a ``tools/call`` returned, in plait's terms."""

    content: tuple[Content, ...]
    structured: Mapping[str, Any] | None
    is_error: bool


def remote_tool_of(tool: Any) -> RemoteTool:
    """An SDK ``Tool`` as a :class:`RemoteTool` (a missing input schema is an empty object)."""
    return RemoteTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.inputSchema or {"type": "object"}),
        output_schema=dict(tool.outputSchema) if tool.outputSchema else None,
    )


def outcome_of(result: Any) -> CallOutcome:
    """An SDK ``CallToolResult`` as a :class:`CallOutcome`."""
    return CallOutcome(
        content=tuple(_content(block) for block in result.content),
        structured=result.structuredContent,
        is_error=bool(result.isError),
    )


def _content(block: Any) -> Content:
    from mcp import types

    if isinstance(block, types.TextContent):
        return TextContent(block.text)
    if isinstance(block, types.ImageContent | types.AudioContent):
        return BinaryContent(block.type, block.mimeType, block.data)
    if isinstance(block, types.ResourceLink):
        return LinkContent(str(block.uri), block.name, block.mimeType)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return TextContent(resource.text, uri=str(resource.uri))
        return BinaryContent("resource", resource.mimeType, resource.blob, uri=str(resource.uri))
    return TextContent(f"[unsupported content block {getattr(block, 'type', '?')!r}]")
