"""Content parts beyond text: images, files (documents, audio) and a model's reasoning.

A message's ``content`` is a list of parts (:data:`plait.messages.Part`). Beside
:class:`~plait.messages.TextPart`:

==========================  ================================================================
part                        holds
==========================  ================================================================
:class:`ImagePart`          an image: a :class:`Blob` of its bytes, or an ``http(s)`` URL
:class:`FilePart`           a document (PDF, text) or audio: a :class:`Blob` or a URL, a
                            media type and an optional file name
:class:`ReasoningPart`      on assistant messages: the provider's reasoning payload kept
                            verbatim (Anthropic ``thinking`` + ``signature``,
                            ``redacted_thinking`` ``data``; an OpenAI reasoning item's ``id``,
                            ``encrypted_content`` and ``summary``), the ``provider`` it came from,
                            and its readable text (thinking or summary)
==========================  ================================================================

Binary content moves by reference. A :class:`Blob` is immutable bytes that hash once (its
``sha256`` address) and encode once (:meth:`Blob.base64`, cached): a request built a thousand
times from one thread copies and re-encodes nothing. Stores keep each blob's bytes once, keyed by
its address, and the message rows hold the address only (``Blob`` serializes by reference when
the serialization context says so, see :data:`BLOBS_BY_REFERENCE`). :class:`Blob` and its
serialization live in :mod:`plait.parts.blob`; import every name here from ``plait.parts``.

Checks made when a part is built (each a :class:`~plait.errors.ContentError` naming the limit):

- a URL's scheme is ``http`` or ``https`` (``data:`` URLs are decoded into a :class:`Blob`;
  ``file:``, ``ftp:`` and the rest are refused: a model request must not name local files);
- an image's media type is one of :data:`IMAGE_MEDIA_TYPES`, and bytes given with a media type
  start with that format's signature (a "PNG" that is not a PNG is refused);
- a part's bytes are at most :data:`MAX_PART_BYTES` (a provider adapter checks its own, smaller
  limits before any request is sent).
"""

from __future__ import annotations

import json as _json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from plait.errors import ContentError
from plait.parts.blob import (
    BLOBS_BY_REFERENCE,
    MAX_PART_BYTES,
    Blob,
    live_blobs,
    sniff_media_type,
)

__all__ = [
    "BLOBS_BY_REFERENCE",
    "IMAGE_MEDIA_TYPES",
    "MAX_PART_BYTES",
    "MEDIA_SUFFIXES",
    "Blob",
    "FilePart",
    "ImagePart",
    "ReasoningPart",
    "live_blobs",
    "part_label",
    "sniff_media_type",
]

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image formats every supported provider accepts."""


def _check_source(source: Blob | str, kind: str) -> Blob | str:
    if isinstance(source, Blob):
        return source
    if isinstance(source, bytes | bytearray | memoryview):
        return Blob(source)
    if not isinstance(source, str):
        raise ContentError(f"an {kind} part's source is a Blob, bytes or a URL string")
    scheme = source.split(":", 1)[0].lower() if ":" in source else ""
    if scheme in ("http", "https"):
        if len(source) > 8192:
            raise ContentError(f"an {kind} URL is over 8,192 characters")
        return source
    if scheme == "data":
        header, _, payload = source.partition(",")
        if not header.endswith(";base64"):
            raise ContentError(f"a data: URL in an {kind} part must be base64 (';base64,')")
        return Blob.from_base64(payload)
    raise ContentError(
        f"an {kind} URL must be http(s) or a data: URL, not {scheme or 'a bare path'!r}: "
        f"read a local file into bytes instead (ImagePart.from_path / FilePart.from_path)"
    )


def _data_url_media_type(source: Any) -> str | None:
    if isinstance(source, str) and source[:5].lower() == "data:":
        return source[5:].split(";", 1)[0].split(",", 1)[0] or None
    return None


class _Sourced:
    """What image and file parts share: a source that is bytes or a URL."""

    __slots__ = ()
    source: Blob | str

    @property
    def blob(self) -> Blob | None:
        """The bytes, or ``None`` when the source is a URL."""
        return self.source if isinstance(self.source, Blob) else None

    @property
    def url(self) -> str | None:
        """The URL, or ``None`` when the source is bytes."""
        return self.source if isinstance(self.source, str) else None


MEDIA_SUFFIXES: Mapping[str, str] = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".pdf": "application/pdf",
}
"""File name suffixes that tools read as an image or PDF part (lowercase, with the dot)."""


_DETAILS = (None, "auto", "low", "high")


@dataclass(slots=True)
class ImagePart(_Sourced):
    """An image: bytes (a :class:`Blob`, or ``bytes``/a ``data:`` URL turned into one) or an
    ``http(s)`` URL. ``media_type`` is sniffed from the bytes when not given; it is optional for
    a URL. ``detail`` is OpenAI's ``"low"``/``"high"``/``"auto"`` hint (other providers ignore
    it)."""

    source: Blob | str
    media_type: str | None = None
    detail: Literal["auto", "low", "high"] | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        if self.media_type is None:
            self.media_type = _data_url_media_type(self.source)
        self.source = _check_source(self.source, "image")
        self._check_type()
        if self.detail not in _DETAILS:
            raise ContentError(f"an image's detail is 'auto', 'low' or 'high', not {self.detail!r}")
        if isinstance(self.source, Blob):
            sniffed = sniff_media_type(self.source.data[:16])
            if self.media_type is None:
                self.media_type = sniffed
            if self.media_type is None:
                raise ContentError(
                    "image bytes are not PNG, JPEG, GIF or WebP (give media_type, or convert)"
                )
            if sniffed != self.media_type:
                raise ContentError(
                    f"image bytes are not {self.media_type} "
                    f"(their signature says {sniffed or 'no known image format'})"
                )

    def _check_type(self) -> None:
        if self.media_type is not None and self.media_type not in IMAGE_MEDIA_TYPES:
            raise ContentError(
                f"image media type {self.media_type!r} is not one of "
                f"{', '.join(sorted(IMAGE_MEDIA_TYPES))}"
            )

    @classmethod
    def from_path(cls, path: str | Any, *, media_type: str | None = None) -> ImagePart:
        """Read an image file (at most :data:`MAX_PART_BYTES`)."""
        return cls(Blob(_read_bounded(path)), media_type)


@dataclass(slots=True)
class FilePart(_Sourced):
    """A document (``application/pdf``, ``text/plain``, …) or audio clip, as bytes or a URL.

    ``media_type`` is required unless the bytes announce it (PDF); ``filename`` is what a
    provider is told the file is called."""

    source: Blob | str
    media_type: str = ""
    filename: str | None = None
    type: Literal["file"] = "file"

    def __post_init__(self) -> None:
        if not self.media_type:
            self.media_type = _data_url_media_type(self.source) or ""
        self.source = _check_source(self.source, "file")
        if not self.media_type and isinstance(self.source, Blob):
            self.media_type = sniff_media_type(self.source.data[:16]) or ""
        if not self.media_type or "/" not in self.media_type:
            raise ContentError("a file part needs a media type such as 'application/pdf'")
        if (
            self.media_type == "application/pdf"
            and isinstance(self.source, Blob)
            and sniff_media_type(self.source.data[:16]) != "application/pdf"
        ):
            raise ContentError("file bytes are not a PDF (they do not start with '%PDF-')")

    @classmethod
    def from_path(cls, path: str | Any, *, media_type: str | None = None) -> FilePart:
        """Read a file (at most :data:`MAX_PART_BYTES`); the media type is guessed from the name
        when not given."""
        import mimetypes
        import os

        guessed = media_type or mimetypes.guess_type(os.fspath(path))[0] or ""
        return cls(Blob(_read_bounded(path)), guessed, os.path.basename(os.fspath(path)))


@dataclass(slots=True)
class ReasoningPart:
    """A model's reasoning, kept verbatim for the provider that made it.

    ``provider`` names the wire format (``"anthropic"``, ``"openai-responses"``); ``payload`` is
    the provider's block or item exactly as received (``{"type": "thinking", "thinking": ...,
    "signature": ...}``, ``{"type": "redacted_thinking", "data": ...}``, ``{"type":
    "reasoning", "id": ..., "encrypted_content": ..., "summary": [...]}``), replayed byte for
    byte to that provider and never sent to another; ``text`` is the readable thinking or summary
    (empty when redacted or encrypted only). Middleware must not edit ``payload``: a changed
    signature makes the provider reject the request.
    """

    provider: str
    text: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    type: Literal["reasoning"] = "reasoning"

    def __post_init__(self) -> None:
        # The payload is replayed verbatim, so it is never rewritten to make it storable: a
        # value JSON cannot hold is refused here, where the model adapter builds the part.
        if type(self.payload) is not dict:
            raise ContentError(
                f"a ReasoningPart's payload is the provider's JSON object (a dict), "
                f"got {type(self.payload).__name__}"
            )
        try:
            text = _json.dumps(self.payload, ensure_ascii=False, allow_nan=False)
            text.encode()
            # json.dumps turns a tuple into a list and an int key into a string: such a
            # payload would come back from a store as something else.
            same = _json.loads(text) == self.payload
        except (TypeError, ValueError, RecursionError) as exc:
            problem = str(exc)
        else:
            problem = "" if same else "a tuple, or a key that is not a string"
        if problem:
            raise ContentError(
                f"a {self.provider!r} ReasoningPart's payload is not plain JSON ({problem}); "
                "keep the provider's block exactly as received (e.g. the SDK object's "
                "model_dump())"
            ) from None

    @property
    def redacted(self) -> bool:
        """True when the provider sent no readable reasoning (redacted or encrypted only)."""
        return not self.text


def part_label(part: ImagePart | FilePart | ReasoningPart) -> str:
    """A short line naming a part without its content, for summaries, logs and the trace:
    ``[image image/png, 48,213 bytes, sha256:93497ee4808a]``, ``[file report.pdf
    application/pdf, https://…]``, ``[reasoning anthropic, 1,204 characters]``."""
    if isinstance(part, ReasoningPart):
        size = f"{len(part.text):,} characters" if part.text else "redacted"
        return f"[reasoning {part.provider}, {size}]"
    kind = "image" if isinstance(part, ImagePart) else "file"
    name = f" {_clip_label(part.filename)}" if isinstance(part, FilePart) and part.filename else ""
    source = part.source
    where = (
        f"{source.size:,} bytes, sha256:{source.sha256[:12]}"
        if isinstance(source, Blob)
        else _clip_label(source)
    )
    return f"[{kind}{name} {part.media_type or 'unknown type'}, {where}]"


def _clip_label(text: str) -> str:
    # A file name or URL in a label is at most 80 characters on one line: a tool's 1 MB file
    # name must not become a 1 MB line in every summary and eviction note.
    text = " ".join(text[:160].split())
    return text if len(text) <= 80 else text[:77] + "..."


def _read_bounded(path: str | Any) -> bytes:
    import os

    with open(os.fspath(path), "rb") as f:
        data = f.read(MAX_PART_BYTES + 1)
    if len(data) > MAX_PART_BYTES:
        raise ContentError(
            f"{os.fspath(path)!r} is over plait.parts.MAX_PART_BYTES ({MAX_PART_BYTES:,} bytes)"
        )
    return data
