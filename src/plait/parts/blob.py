"""Binary content by reference: :class:`Blob`, immutable bytes hashed and encoded once.

A :class:`Blob` computes its ``sha256`` address and its base64 text on first use and caches
them, so a request built a thousand times from one thread copies and re-encodes nothing. With
:data:`BLOBS_BY_REFERENCE` in a pydantic serialization context a blob is written as its address
only (a store keeps the bytes once); validating such a row reuses a blob still in memory
(:func:`live_blobs`) or asks the context's resolver for the bytes, and checks them against the
address. :func:`sniff_media_type` names the format a blob's first bytes announce. Import these
from :mod:`plait.parts`.
"""

from __future__ import annotations

import base64 as _b64
import binascii
import hashlib
import sys
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from plait.errors import ContentError

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema

__all__ = ["BLOBS_BY_REFERENCE", "MAX_PART_BYTES", "Blob", "live_blobs", "sniff_media_type"]

MAX_PART_BYTES = 64 * 1024 * 1024
"""The most bytes one image or file part may hold (64 MiB); providers' own limits are lower and
are checked by their adapters before a request is sent."""


def max_part_bytes() -> int:
    """The bound as set now: ``plait.parts.MAX_PART_BYTES`` (the documented knob, re-exported
    from this module), read at each use so setting it there takes effect here too."""
    parts = sys.modules.get("plait.parts")
    bound = getattr(parts, "MAX_PART_BYTES", MAX_PART_BYTES)
    return int(bound)


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
        bound = max_part_bytes()
        if len(data) > bound:
            raise ContentError(
                f"content of {len(data):,} bytes is over plait.parts.MAX_PART_BYTES "
                f"({bound:,}); send a smaller file or a URL"
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
        bound = max_part_bytes()
        if len(text) > (bound * 4) // 3 + 4:
            raise ContentError(
                f"base64 content of {len(text):,} characters decodes to more than "
                f"plait.parts.MAX_PART_BYTES ({bound:,}) bytes"
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
