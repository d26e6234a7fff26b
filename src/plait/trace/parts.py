"""How the trace records content parts: images and files by reference, each blob's bytes once,
and a reasoning part's readable text without its sealed payload.

* A message body in ``trace_messages`` holds each image and file part's source as
  ``{"sha256", "size"}`` (:data:`~plait.parts.BLOBS_BY_REFERENCE`): a thread whose every request
  carries a 1 MB screenshot stores the screenshot's bytes once, in the binary table, not in each
  message row that holds it (nor in each request, which lists message keys only).
* The binary table (``trace_binary`` / ``plait_trace_binary``) keeps each blob once by sha256,
  with the media type it was first recorded with and its size. A blob over the recorder's
  ``max_blob_bytes`` (:data:`MAX_BLOB_BYTES`, 5 MiB, by default) keeps its row without the bytes:
  the page names it, and ``/api/blobs/<sha256>`` answers 404 saying why.
* A :class:`~plait.parts.ReasoningPart` keeps its ``provider`` and ``text``; its ``payload``
  (a signature, ``redacted_thinking`` data, ``encrypted_content``) is replaced by its type, the
  length of each sealed field and a short hash of the whole (so a payload edited between two
  requests still shows as a changed message in the context diff).

:func:`blob_answer` decides how the server answers for a blob: inline only for a PNG, JPEG, GIF
or WebP whose bytes carry that format's signature; anything else (SVG, HTML, a "PNG" that is
not one) as an attachment, under its recorded type only for passive types
(:data:`NAMED_TYPES`), else ``application/octet-stream``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from plait.errors import clipped
from plait.messages import Message, Part, ToolMessage, dump_messages
from plait.parts import (
    BLOBS_BY_REFERENCE,
    IMAGE_MEDIA_TYPES,
    Blob,
    FilePart,
    ImagePart,
    ReasoningPart,
    sniff_media_type,
)

__all__ = [
    "MAX_BLOB_BYTES",
    "NAMED_TYPES",
    "BinaryRow",
    "blob_answer",
    "download_name",
    "is_sha256",
    "keep_blobs",
    "message_body",
    "part_blobs",
    "part_refs",
    "reasoning_ref",
]

MAX_BLOB_BYTES = 5 * 1024 * 1024
"""Default bound on one blob's bytes kept in the trace store (``TraceRecorder(max_blob_bytes=)``,
5 MiB); a larger image or file keeps its reference only (sha256, media type, size)."""

NAMED_TYPES = frozenset(
    {
        "application/pdf",
        "application/json",
        "text/plain",
        "text/csv",
        "text/markdown",
        *IMAGE_MEDIA_TYPES,
    }
)
"""Media types a blob is served under by name (as an attachment unless an image whose bytes
match); audio/* and video/* too. Any other recorded type (``image/svg+xml``, ``text/html``,
anything scriptable) is served as ``application/octet-stream``, as an attachment."""

BinaryRow = tuple[str, int, bytes | None]
"""A binary table row as the batch carries it: media type, size, bytes (``None``: over the cap,
reference only)."""

_SEALED = ("signature", "data", "encrypted_content")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SUFFIXES = {
    "application/pdf": ".pdf",
    "application/json": ".json",
    "text/plain": ".txt",
    "text/csv": ".csv",
    "text/markdown": ".md",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


def is_sha256(text: str) -> bool:
    """Whether ``text`` is a blob address as the trace stores it (64 lowercase hex digits)."""
    return _SHA256.fullmatch(text) is not None


def _parts_of(message: Message) -> list[Part]:
    return message.parts if isinstance(message, ToolMessage) else message.content


def reasoning_ref(part: ReasoningPart) -> dict[str, Any]:
    """What the trace keeps of a reasoning part: provider, readable text, the payload's type,
    the length of each sealed field (never its value) and a 16-digit hash of the payload."""
    payload = part.payload
    sealed = {k: len(v) for k in _SEALED if isinstance(v := payload.get(k), str)}
    encoded = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return {
        "type": "reasoning",
        "provider": part.provider,
        "text": part.text,
        "payload_type": str(payload.get("type", "")),
        "sealed": sealed,
        "payload_sha256": hashlib.sha256(encoded.encode()).hexdigest()[:16],
    }


def message_body(message: Message) -> tuple[str, dict[str, tuple[Blob, str]]]:
    """``message`` as its ``trace_messages`` body (JSON, blobs by reference, reasoning payloads
    by :func:`reasoning_ref`) and the blobs it holds (sha256 to the blob and the media type of
    the first part holding it). A text-only message is :func:`~plait.messages.dump_messages`'s
    row unchanged."""
    parts = _parts_of(message)
    blobs = part_blobs(parts)
    reasoning = any(type(part) is ReasoningPart for part in parts)
    if not blobs and not reasoning:
        return dump_messages([message])[1:-1], blobs
    from plait.messages import _messages_adapter

    body = _messages_adapter().dump_json([message], context={BLOBS_BY_REFERENCE: True})
    text = body.decode()[1:-1]
    if reasoning:
        value = json.loads(text)
        key = "parts" if isinstance(message, ToolMessage) else "content"
        value[key] = [
            reasoning_ref(part) if type(part) is ReasoningPart else item
            for part, item in zip(parts, value[key], strict=True)
        ]
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text, blobs


def part_blobs(parts: Iterable[Part]) -> dict[str, tuple[Blob, str]]:
    """The blobs of ``parts``' images and files: sha256 to the blob and the media type of the
    first part holding it."""
    blobs: dict[str, tuple[Blob, str]] = {}
    for part in parts:
        if type(part) is ImagePart or type(part) is FilePart:
            source = part.source
            if isinstance(source, Blob) and source.sha256 not in blobs:
                blobs[source.sha256] = (source, part.media_type or "application/octet-stream")
    return blobs


def part_refs(parts: Iterable[Part], max_chars: int | None = None) -> list[dict[str, Any]]:
    """The parts as the trace shows them on a span (a tool's images and files, a response's
    reasoning): image and file sources by reference, reasoning by :func:`reasoning_ref` (its
    text clipped to ``max_chars``); text parts are left out (the span has the text)."""
    refs: list[dict[str, Any]] = []
    for part in parts:
        if type(part) is ImagePart or type(part) is FilePart:
            source = part.source
            ref: dict[str, Any] = {"type": part.type, "media_type": part.media_type}
            ref["source"] = (
                {"sha256": source.sha256, "size": source.size}
                if isinstance(source, Blob)
                else source
            )
            if type(part) is FilePart:
                ref["filename"] = part.filename
            refs.append(ref)
        elif type(part) is ReasoningPart:
            ref = reasoning_ref(part)
            if max_chars is not None:
                ref["text"] = clipped(part.text, max_chars)
            refs.append(ref)
    return refs


def keep_blobs(
    target: MutableMapping[str, BinaryRow],
    blobs: Mapping[str, tuple[Blob, str]],
    sent: MutableMapping[str, None],
    max_bytes: int,
) -> None:
    """Add to ``target`` (a batch's binary rows) each of ``blobs`` not in ``sent`` (the digests
    this recorder already queued; noted there), with its bytes unless over ``max_bytes``."""
    for digest, (blob, media_type) in blobs.items():
        if digest in sent:
            continue
        sent[digest] = None
        target[digest] = (media_type, blob.size, blob.data if blob.size <= max_bytes else None)


def download_name(name: str | None, digest: str, served: str) -> str:
    """The file name an attachment is saved under: ``name`` (a recorded file name) kept to
    letters, digits, ``.``, ``-``, ``_`` and spaces (at most 100, no leading dot), else the
    digest's first 12 digits with the served type's suffix."""
    kept = re.sub(r"[^A-Za-z0-9._ -]", "_", name or "").strip(" .")[:100]
    return kept or digest[:12] + _SUFFIXES.get(served, "")


def blob_answer(
    digest: str, media_type: str, data: bytes, name: str | None = None
) -> tuple[str, dict[str, str]]:
    """The ``Content-Type`` and the other headers of the answer serving blob ``digest``:
    inline for an image type of :data:`~plait.parts.IMAGE_MEDIA_TYPES` whose bytes carry its
    signature, else ``Content-Disposition: attachment`` (saved as :func:`download_name`) under
    the recorded type if it is in :data:`NAMED_TYPES` (or audio/video) and
    ``application/octet-stream`` otherwise. Every answer is sandboxed
    (``Content-Security-Policy: sandbox``)."""
    headers = {"content-security-policy": "sandbox; default-src 'none'"}
    kind = media_type.strip().lower()
    if kind in IMAGE_MEDIA_TYPES and sniff_media_type(data[:16]) == kind:
        headers["content-disposition"] = "inline"
        return kind, headers
    named = kind in NAMED_TYPES and kind not in IMAGE_MEDIA_TYPES
    named = named or re.fullmatch(r"(audio|video)/[a-z0-9][a-z0-9.+-]{0,60}", kind) is not None
    served = kind if named else "application/octet-stream"
    filename = download_name(name, digest, served)
    headers["content-disposition"] = f'attachment; filename="{filename}"'
    return served, headers
