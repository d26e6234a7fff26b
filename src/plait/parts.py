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
the serialization context says so, see :data:`BLOBS_BY_REFERENCE`).

Checks made when a part is built (each a :class:`~plait.errors.ContentError` naming the limit):

- a URL's scheme is ``http`` or ``https`` (``data:`` URLs are decoded into a :class:`Blob`;
  ``file:``, ``ftp:`` and the rest are refused: a model request must not name local files);
- an image's media type is one of :data:`IMAGE_MEDIA_TYPES`, and bytes given with a media type
  start with that format's signature (a "PNG" that is not a PNG is refused);
- a part's bytes are at most :data:`MAX_PART_BYTES` (a provider adapter checks its own, smaller
  limits before any request is sent).
"""

from __future__ import annotations

import base64 as _b64
import binascii
import hashlib
import json as _json
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from plait.errors import ContentError

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

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

MAX_PART_BYTES = 64 * 1024 * 1024
"""The most bytes one image or file part may hold (64 MiB); providers' own limits are lower and
are checked by their adapters before a request is sent."""

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image formats every supported provider accepts."""

BLOBS_BY_REFERENCE = "blobs_by_reference"
"""Serialization context key. ``dump_json(..., context={BLOBS_BY_REFERENCE: True})`` writes each
:class:`Blob` as ``{"sha256", "size"}`` only (a store then keeps the bytes once, by address);
validation with ``context={BLOBS_BY_REFERENCE: resolve}`` calls ``resolve(sha256) -> bytes`` for
each such reference. Without the key a blob is written inline as base64 (lossless on its own)."""

_SIGNATURES: tuple[tuple[str, bytes, int], ...] = (
    ("image/png", b"\x89PNG\r\n\x1a\n", 0),
    ("image/jpeg", b"\xff\xd8\xff", 0),
    ("image/gif", b"GIF87a", 0),
    ("image/gif", b"GIF89a", 0),
    ("image/webp", b"WEBP", 8),  # after b"RIFF" and a 4-byte size
    ("application/pdf", b"%PDF-", 0),
)


def sniff_media_type(data: bytes) -> str | None:
    """The media type ``data``'s first bytes announce (PNG, JPEG, GIF, WebP, PDF), or ``None``."""
    for media_type, signature, offset in _SIGNATURES:
        if data[offset : offset + len(signature)] == signature and (
            offset == 0 or data[:4] == b"RIFF"
        ):
            return media_type
    return None


class Blob:
    """Immutable binary content with its address computed once.

    ``sha256`` (hex) and :meth:`base64` are computed on first use and cached, so a blob sent in
    every request of a long thread is hashed and encoded once. Two blobs are equal when their
    bytes are.
    """

    __slots__ = ("__weakref__", "_base64", "_data", "_data_url", "_image_size", "_pages", "_sha256")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        if not isinstance(data, bytes):
            if not isinstance(data, bytearray | memoryview):
                raise ContentError(f"a Blob holds bytes, got {type(data).__name__}")
            data = bytes(data)
        if len(data) > MAX_PART_BYTES:
            raise ContentError(
                f"content of {len(data):,} bytes is over plait.parts.MAX_PART_BYTES "
                f"({MAX_PART_BYTES:,}); send a smaller file or a URL"
            )
        self._data = data
        self._sha256: str | None = None
        self._base64: str | None = None
        self._data_url: tuple[str, str] | None = None
        self._image_size: tuple[int, int] | bool | None = False  # False: not parsed yet
        self._pages: int | None = None

    @classmethod
    def from_base64(cls, text: str) -> Blob:
        """Decode base64 text (strict: a character outside the alphabet is a ContentError)."""
        if len(text) > (MAX_PART_BYTES * 4) // 3 + 4:
            raise ContentError(
                f"base64 content of {len(text):,} characters decodes to more than "
                f"plait.parts.MAX_PART_BYTES ({MAX_PART_BYTES:,}) bytes"
            )
        try:
            blob = cls(_b64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise ContentError(f"content is not valid base64: {exc}") from None
        blob._base64 = text if _b64.b64encode(blob._data).decode() == text else None
        return blob

    @property
    def data(self) -> bytes:
        return self._data

    @property
    def size(self) -> int:
        return len(self._data)

    @property
    def sha256(self) -> str:
        digest = self._sha256
        if digest is None:
            digest = self._sha256 = hashlib.sha256(self._data).hexdigest()
        return digest

    @property
    def ref(self) -> str:
        """The content address, ``"sha256:<hex>"``."""
        return f"sha256:{self.sha256}"

    @property
    def image_size(self) -> tuple[int, int] | None:
        """``(width, height)`` if the bytes are a PNG, JPEG, GIF or WebP whose header says so,
        else ``None``; read from the header once, then cached (:func:`plait.images.image_size`)."""
        size = self._image_size
        if size is False:
            from plait.images import image_size

            size = self._image_size = image_size(self._data)
        assert size is not True
        return size

    @property
    def page_count(self) -> int:
        """The pages of a PDF (:func:`plait.images.pdf_page_count`: at least 1, an estimate
        when the page tree is compressed); counted once, then cached."""
        pages = self._pages
        if pages is None:
            from plait.images import pdf_page_count

            pages = self._pages = pdf_page_count(self._data)
        return pages

    def base64(self) -> str:
        """The bytes as standard base64 text (encoded once, then cached)."""
        text = self._base64
        if text is None:
            text = self._base64 = _b64.b64encode(self._data).decode("ascii")
        return text

    def data_url(self, media_type: str) -> str:
        """``data:<media_type>;base64,<bytes>``, built once per media type and cached (the
        last one asked for), so a request that embeds the blob copies nothing per call."""
        cached = self._data_url
        if cached is not None and cached[0] == media_type:
            return cached[1]
        url = f"data:{media_type};base64,{self.base64()}"
        self._data_url = (media_type, url)
        return url

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Blob):
            return NotImplemented
        return self._data == other._data

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Blob({self.size:,} bytes, sha256:{self.sha256[:12]})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.with_info_plain_validator_function(
            _validate_blob,
            serialization=core_schema.plain_serializer_function_ser_schema(
                _serialize_blob, info_arg=True
            ),
        )


def _serialize_blob(blob: Blob, info: Any) -> dict[str, Any]:
    context = info.context
    if isinstance(context, Mapping) and context.get(BLOBS_BY_REFERENCE):
        return {"sha256": blob.sha256, "size": blob.size}
    return {"sha256": blob.sha256, "size": blob.size, "base64": blob.base64()}


def _validate_blob(value: Any, info: Any) -> Blob:
    if isinstance(value, Blob):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return Blob(value)
    if not isinstance(value, Mapping) or not isinstance(value.get("sha256"), str):
        raise ValueError("a blob is {'sha256': hex, 'size': n, 'base64': text}")
    digest: str = value["sha256"]
    text = value.get("base64")
    if isinstance(text, str):
        blob = Blob.from_base64(text)
    else:
        live = _LIVE.get(digest)
        if live is not None:
            # Stored by reference and in memory already, checked when it got there: a thread
            # loaded every turn neither re-hashes nor re-encodes its images (one copy shared).
            return live
        context = info.context
        resolve: Callable[[str], bytes] | None = None
        if isinstance(context, Mapping):
            candidate = context.get(BLOBS_BY_REFERENCE)
            resolve = candidate if callable(candidate) else None
        if resolve is None:
            raise ValueError(
                f"blob sha256:{digest[:12]} is stored by reference and no blob resolver was given"
            )
        blob = Blob(resolve(digest))
    if blob.sha256 != digest:
        raise ValueError(f"blob content does not match its address sha256:{digest[:12]}")
    blob._sha256 = digest
    _LIVE[digest] = blob
    return blob


_LIVE: weakref.WeakValueDictionary[str, Blob] = weakref.WeakValueDictionary()
"""Blobs validated from stored rows and still referenced somewhere, by address: loading a thread
whose images are in memory reuses them (their hash, base64 and data URL already made)."""


def live_blobs() -> dict[str, Blob]:
    """The blobs in memory now, by address, held strongly while the caller keeps the dict: a
    store's load asks for the bytes of the others only (a thread loaded every turn reads no
    image bytes from its store once they are in memory)."""
    for _ in range(3):  # another thread's load may add one meanwhile: then look again
        try:
            return dict(_LIVE.items())
        except RuntimeError:
            continue
    return {}  # nothing skipped: the store reads every byte, as it would without


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
