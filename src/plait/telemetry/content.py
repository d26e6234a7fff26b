"""Message content as the GenAI conventions' JSON (``gen_ai.input.messages`` and friends).

Only built when content capture is on and the span records. Each message becomes ``{"role",
"parts"}`` with ``text``, ``reasoning``, ``uri`` (an image or file, by reference: its URL or
``sha256:<hex>``, never its bytes), ``tool_call`` and ``tool_call_response`` parts; every text,
argument and result is clipped to ``max_chars`` (the JSON structure stays intact), so one huge
tool result cannot make a span attribute of megabytes. A turn's :class:`JsonMemo` serializes
each tool call's arguments and result once, though they appear up to three times (the call's
``output``, the next call's ``input``, the ``execute_tool`` span).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from plait.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolMessage,
)
from plait.models.base import ModelResponse

__all__ = [
    "MAX_CONTENT_CHARS",
    "JsonMemo",
    "input_messages",
    "output_messages",
    "system_instructions",
    "to_json",
]

MAX_CONTENT_CHARS = 8_000
"""Default bound on each text, tool argument or tool result recorded in a content attribute."""


def _clip(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… [{len(text) - max_chars} more chars]"


def to_json(value: Any, max_chars: int = MAX_CONTENT_CHARS) -> str:
    """``value`` as compact JSON text (strings as they are), clipped to ``max_chars``."""
    if isinstance(value, str):
        return _clip(value, max_chars)
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return _clip(text, max_chars)


_MAX_MEMO = 512


class JsonMemo:
    """:func:`to_json` texts of tool arguments and results, by call id and value (the value is
    held, so an entry never answers for a different object). Holds at most 512 entries; emptied
    when full."""

    __slots__ = ("_texts",)

    def __init__(self) -> None:
        self._texts: dict[tuple[str, int], tuple[Any, str]] = {}

    def text(self, call_id: str, value: Any, max_chars: int) -> str:
        key = (call_id, id(value))
        found = self._texts.get(key)
        if found is not None and found[0] is value:
            return found[1]
        text = to_json(value, max_chars)
        if len(self._texts) >= _MAX_MEMO:
            self._texts.clear()
        self._texts[key] = (value, text)
        return text


def _json(call_id: str, value: Any, max_chars: int, memo: JsonMemo | None) -> str:
    return to_json(value, max_chars) if memo is None else memo.text(call_id, value, max_chars)


def _parts(message: Message, max_chars: int, memo: JsonMemo | None) -> list[dict[str, Any]]:
    if isinstance(message, ToolMessage):
        return [
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": _json(message.tool_call_id, message.data, max_chars, memo),
            },
            *(_part(p, max_chars) for p in message.parts),
        ]
    parts = [_part(p, max_chars) for p in message.content]
    if isinstance(message, AssistantMessage):
        parts.extend(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _json(call.id, call.args, max_chars, memo),
            }
            for call in message.tool_calls
        )
    return parts


def _part(part: Part, max_chars: int) -> dict[str, Any]:
    """One content part in the conventions' shape; images and files by reference only (their
    URL, or ``sha256:<hex>``, the address the thread store keeps their bytes under), never the
    bytes; reasoning as its readable text, never the provider's signature or encrypted payload."""
    if isinstance(part, TextPart):
        return {"type": "text", "content": _clip(part.text, max_chars)}
    if isinstance(part, ReasoningPart):
        return {"type": "reasoning", "content": _clip(part.text, max_chars)}
    modality = "image" if isinstance(part, ImagePart) else _modality(part.media_type)
    blob = part.blob
    recorded: dict[str, Any] = {
        "type": "uri",
        "modality": modality,
        "mime_type": part.media_type,
        "uri": part.source if blob is None else blob.ref,
    }
    if blob is not None:
        recorded["size"] = blob.size
    return recorded


def _modality(media_type: str) -> str:
    kind = media_type.split("/", 1)[0]
    return kind if kind in ("image", "audio", "video") else "document"


def input_messages(
    messages: Iterable[Message], max_chars: int = MAX_CONTENT_CHARS, memo: JsonMemo | None = None
) -> str:
    """``gen_ai.input.messages``: ``messages`` as one JSON array."""
    return json.dumps(
        [{"role": m.role, "parts": _parts(m, max_chars, memo)} for m in messages],
        ensure_ascii=False,
        separators=(",", ":"),
    )


def output_messages(
    response: ModelResponse, max_chars: int = MAX_CONTENT_CHARS, memo: JsonMemo | None = None
) -> str:
    """``gen_ai.output.messages``: the response as one assistant message with its finish
    reason."""
    parts: list[dict[str, Any]] = [_part(p, max_chars) for p in response.reasoning]
    if response.content:
        parts.append({"type": "text", "content": _clip(response.content, max_chars)})
    parts.extend(
        {
            "type": "tool_call",
            "id": call.id,
            "name": call.name,
            "arguments": _json(call.id, call.args, max_chars, memo),
        }
        for call in response.tool_calls
    )
    message = {"role": "assistant", "parts": parts, "finish_reason": response.finish_reason}
    return json.dumps([message], ensure_ascii=False, separators=(",", ":"))


def system_instructions(text: str, max_chars: int = MAX_CONTENT_CHARS) -> str:
    """``gen_ai.system_instructions``: the system prompt as one text part."""
    return json.dumps([{"type": "text", "content": _clip(text, max_chars)}], ensure_ascii=False)
