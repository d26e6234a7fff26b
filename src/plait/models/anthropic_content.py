"""Images and documents for the Anthropic Messages API, and the API's limits on them, checked
before any request is sent (each a :class:`~plait.errors.ContentError` naming the limit).

==========================  ================================================================
plait                       Messages API
==========================  ================================================================
``ImagePart`` (bytes)       ``{"type": "image", "source": {"type": "base64", "media_type",
                            "data"}}``; ``data`` is :meth:`Blob.base64` (encoded once per blob,
                            never per request)
``ImagePart`` (URL)         ``{"type": "image", "source": {"type": "url", "url"}}``
``FilePart`` PDF (bytes)    ``{"type": "document", "source": {"type": "base64", "media_type":
                            "application/pdf", "data"}}``; ``filename`` becomes ``title``
``FilePart`` PDF (URL)      ``{"type": "document", "source": {"type": "url", "url"}}``
``FilePart`` ``text/plain`` ``{"type": "document", "source": {"type": "text", "media_type":
                            "text/plain", "data": <the UTF-8 text>}}`` (bytes only)
other media types           refused (audio, Word, CSV as a file: send text instead)
==========================  ================================================================

Limits (the API's own, so a request that breaks one fails here, with the limit named, instead
of as a 400 after the upload):

==============================  ==========  ================================================
constant                        value       what
==============================  ==========  ================================================
:data:`MAX_IMAGE_BYTES`         5 MiB       one image's decoded bytes
:data:`MAX_IMAGES`              100         images in one request (every message counted,
                                            tool results included)
:data:`MAX_PDF_BYTES`           32 MiB      one PDF's bytes
:data:`MAX_PDF_PAGES`           100         PDF pages in one request
:data:`IMAGE_TYPES`             PNG, JPEG,  image media types; bytes must carry the
                                GIF, WebP   signature of the type they claim
:data:`DOCUMENT_TYPES`          PDF, text   document media types
==============================  ==========  ================================================

Pages are counted cheaply, without parsing the PDF: the number of page objects
(``/Type /Page``, not ``/Pages``), or the largest page-tree ``/Count`` if that is higher (a PDF
that keeps its page objects in compressed object streams shows only the tree's count). A PDF
whose pages are all hidden in compressed streams and whose page tree is compressed too counts
as 0 here and is left to the API to judge. The count is cached by the blob's address, so a
thread that resends a PDF on every call scans it once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from plait.errors import ContentError
from plait.messages import FilePart, ImagePart, Part
from plait.parts import Blob, sniff_media_type

__all__ = [
    "DOCUMENT_TYPES",
    "IMAGE_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "MAX_PDF_BYTES",
    "MAX_PDF_PAGES",
    "ContentBudget",
    "count_pdf_pages",
]

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGES = 100
MAX_PDF_BYTES = 32 * 1024 * 1024
MAX_PDF_PAGES = 100
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
DOCUMENT_TYPES = frozenset({"application/pdf", "text/plain"})

_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(
    rb"/Type\s*/Pages(?![A-Za-z])[^<>]{0,300}?/Count\s+(\d{1,7})"
    rb"|/Count\s+(\d{1,7})[^<>]{0,300}?/Type\s*/Pages(?![A-Za-z])"
)
_PAGE_CACHE: dict[str, int] = {}
_PAGE_CACHE_SIZE = 256


def count_pdf_pages(data: bytes, *, limit: int = MAX_PDF_PAGES) -> int:
    """About how many pages the PDF ``data`` has (see the module docstring): stops counting
    page objects once past ``limit``, so a hostile PDF costs one bounded scan."""
    pages = 0
    for _ in _PAGE.finditer(data):
        pages += 1
        if pages > limit:
            return pages
    counts = [int(a or b) for a, b in _COUNT.findall(data)]
    return max(pages, max(counts, default=0))


def _pdf_pages(blob: Blob) -> int:
    pages = _PAGE_CACHE.get(blob.sha256)
    if pages is None:
        pages = count_pdf_pages(blob.data)
        if len(_PAGE_CACHE) >= _PAGE_CACHE_SIZE:
            _PAGE_CACHE.pop(next(iter(_PAGE_CACHE)))
        _PAGE_CACHE[blob.sha256] = pages
    return pages


class ContentBudget:
    """What one request has used of the per-request limits (images, PDF pages); one per
    request build. :meth:`blocks` maps parts to content blocks and charges them here."""

    __slots__ = ("images", "pages")

    def __init__(self) -> None:
        self.images = 0
        self.pages = 0

    def blocks(self, parts: Iterable[Part], where: str) -> list[Any]:
        """Content blocks for the image and file parts of ``parts`` (text and reasoning parts
        are the caller's); ``where`` names the message in errors (``"messages[3]"``)."""
        out: list[Any] = []
        for part in parts:
            if isinstance(part, ImagePart):
                out.append(self.image(part, where))
            elif isinstance(part, FilePart):
                out.append(self.document(part, where))
        return out

    def image(self, part: ImagePart, where: str) -> dict[str, Any]:
        self.images += 1
        if self.images > MAX_IMAGES:
            raise ContentError(
                f"{where}: more than {MAX_IMAGES} images in one request (Anthropic's limit, "
                "plait.models.anthropic_content.MAX_IMAGES); send fewer, or summarize old ones"
            )
        media_type = part.media_type
        if media_type is not None and media_type not in IMAGE_TYPES:
            raise ContentError(
                f"{where}: image media type {media_type!r} is not one Anthropic takes "
                f"({', '.join(sorted(IMAGE_TYPES))})"
            )
        source = part.source
        if isinstance(source, str):
            return {"type": "image", "source": {"type": "url", "url": source}}
        if source.size > MAX_IMAGE_BYTES:
            raise ContentError(
                f"{where}: an image of {source.size:,} bytes is over Anthropic's 5 MiB limit "
                f"(plait.models.anthropic_content.MAX_IMAGE_BYTES = {MAX_IMAGE_BYTES:,}); "
                "downscale or recompress it"
            )
        sniffed = sniff_media_type(source.data[:16])
        if media_type is None or sniffed != media_type:
            raise ContentError(
                f"{where}: image bytes are not {media_type or 'a known image format'} (their "
                f"signature says {sniffed or 'no known image format'})"
            )
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": source.base64()},
        }

    def document(self, part: FilePart, where: str) -> dict[str, Any]:
        media_type = part.media_type
        if media_type not in DOCUMENT_TYPES:
            raise ContentError(
                f"{where}: Anthropic takes documents of type "
                f"{' or '.join(sorted(DOCUMENT_TYPES))}, not {media_type!r}; send the content "
                "as text, or convert it to PDF"
            )
        source = part.source
        block: dict[str, Any]
        if isinstance(source, str):
            if media_type != "application/pdf":
                raise ContentError(
                    f"{where}: Anthropic fetches PDF URLs only; read the {media_type} file and "
                    "send its bytes"
                )
            block = {"type": "document", "source": {"type": "url", "url": source}}
        elif media_type == "application/pdf":
            block = self._pdf(source, where)
        else:
            try:
                text = source.data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ContentError(
                    f"{where}: a text/plain document is not UTF-8 ({exc}); decode it yourself "
                    "and send a TextPart"
                ) from None
            block = {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": text},
            }
        if part.filename:
            block["title"] = part.filename
        return block

    def _pdf(self, source: Blob, where: str) -> dict[str, Any]:
        if source.size > MAX_PDF_BYTES:
            raise ContentError(
                f"{where}: a PDF of {source.size:,} bytes is over Anthropic's 32 MiB limit "
                f"(plait.models.anthropic_content.MAX_PDF_BYTES = {MAX_PDF_BYTES:,}); split it"
            )
        if sniff_media_type(source.data[:16]) != "application/pdf":
            raise ContentError(f"{where}: file bytes are not a PDF (no '%PDF-' header)")
        self.pages += _pdf_pages(source)
        if self.pages > MAX_PDF_PAGES:
            raise ContentError(
                f"{where}: the PDFs of this request have more than {MAX_PDF_PAGES} pages "
                "(Anthropic's limit, plait.models.anthropic_content.MAX_PDF_PAGES); send fewer "
                "pages"
            )
        return {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": source.base64()},
        }
