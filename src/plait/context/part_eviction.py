"""Evicting the images and files a tool returned, and reading them back.

A tool result's parts (:attr:`~plait.messages.ToolResult.parts`) are estimated part by part; one
above the eviction budget is written through the backend as the JSON of the part (its bytes as
base64, so any text backend holds it) at ``<evicted path>.part.json`` and replaced, in place, by a
text part naming it::

    [image image/png, 4,213,002 bytes, sha256:93497ee4808a evicted to
     large_tool_results/t1/1733100000000-a1b2c3-c1-0.part.json; read_evicted_result with that
     path shows it again]

``read_evicted_result`` on such a path answers with the part itself (the whole part: a part has
no character pages), so the model opens the image again when it needs it. A write that fails
keeps a text part saying the content was dropped (``EvictionFailed``): an oversized part is never
sent whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from plait.backends.base import BackendWriteSurface
from plait.context.events import EvictionFailed, ResultEvicted
from plait.messages import FilePart, ImagePart, Part, TextPart
from plait.middleware.context import EventSink
from plait.parts import part_label

__all__ = ["PART_SUFFIX", "evict_parts", "load_part"]

PART_SUFFIX: Final = ".part.json"
"""How the path of an evicted image or file ends; ``read_evicted_result`` returns such a file as
the part it holds."""

MAX_PART_FILE_CHARS: Final = 96 * 1024 * 1024
"""The most characters an evicted part's file may have when read back (64 MiB as base64, with
room for its fields)."""


async def evict_parts(
    parts: Sequence[Part],
    estimates: Sequence[int],
    *,
    max_tokens: int,
    backend: BackendWriteSurface,
    base_path: str,
    tool: str,
    call_id: str,
    reader: str | None,
    emit: EventSink,
) -> tuple[list[Part], bool]:
    """``parts`` with each image or file estimated above ``max_tokens`` written to the backend
    and replaced by a text part naming where; ``(parts, any evicted)``."""
    from pydantic import TypeAdapter

    out: list[Part] = []
    evicted = False
    adapter: TypeAdapter[ImagePart | FilePart] | None = None
    for i, (part, tokens) in enumerate(zip(parts, estimates, strict=True)):
        if not isinstance(part, ImagePart | FilePart) or tokens <= max_tokens:
            out.append(part)
            continue
        path = f"{base_path}-{i}{PART_SUFFIX}"
        if adapter is None:
            adapter = TypeAdapter(ImagePart | FilePart)
        try:
            await backend.write(path, adapter.dump_json(part).decode())
        except Exception as exc:
            emit(
                EvictionFailed(
                    tool=tool, call_id=call_id, path=path, estimated_tokens=tokens, error=exc
                )
            )
            out.append(
                TextPart(
                    f"{part_label(part)} was left out: it is about {tokens:,} tokens, over the "
                    f"budget of {max_tokens:,}, and could not be saved "
                    f"({type(exc).__name__}: {exc})"
                )
            )
            continue
        emit(ResultEvicted(tool=tool, call_id=call_id, path=path, estimated_tokens=tokens, chars=0))
        how = f"; {reader} with that path shows it again" if reader else ""
        out.append(TextPart(f"{part_label(part)} evicted to {path}{how}"))
        evicted = True
    return out, evicted


def load_part(text: str, path: str) -> ImagePart | FilePart:
    """The part an evicted part's file holds (``ValueError`` naming ``path`` when it does not
    hold one)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(ImagePart | FilePart).validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"{path} does not hold an evicted image or file: {exc}") from None
