"""Image dimensions read from the first bytes of a PNG, JPEG, GIF or WebP, without decoding it,
and a PDF's page count.

Token estimates need an image's width and height (providers bill images by their pixels, see
:func:`plait.tokens.image_tokens`), and plait has no image library. :func:`image_size` reads them
from the format's header:

======  ==================================================================================
format  where the size is
======  ==================================================================================
PNG     the ``IHDR`` chunk, bytes 16-24 (big-endian width, height)
GIF     the logical screen descriptor, bytes 6-10 (little-endian width, height)
WebP    the first chunk: ``VP8X`` (24-bit canvas size), ``VP8L`` (14-bit sizes after the
        ``0x2f`` signature) or ``VP8 `` (14-bit sizes after the ``9d 01 2a`` start code)
JPEG    the first start-of-frame segment (``SOF0``-``SOF15`` but ``DHT``, ``JPG``,
        ``DAC``), reached by walking the segments' lengths from the start
======  ==================================================================================

The parser is bounded: it reads at most :data:`MAX_HEADER_SCAN` bytes and
:data:`MAX_JPEG_SEGMENTS` JPEG segments, and returns ``None`` (size unknown) for anything it
cannot read: a truncated or malformed header, a size of 0, or more than :data:`MAX_DIMENSION`
pixels a side. It never raises on bad input. An EXIF rotation is not applied: the estimates
that use the size do not depend on which side is the long one.

:attr:`plait.parts.Blob.image_size` caches the result on the blob, so a blob is parsed once
however often a thread holding it is estimated.

:func:`pdf_page_count` counts a PDF's ``/Type /Page`` objects; when the page tree sits in
compressed object streams (PDF 1.5+) it reads the largest ``/Count`` it finds, and failing that
estimates one page per :data:`PDF_BYTES_PER_PAGE` bytes (cached as
:attr:`plait.parts.Blob.page_count`).
"""

from __future__ import annotations

import re
from typing import Final, Literal

__all__ = [
    "MAX_DIMENSION",
    "MAX_HEADER_SCAN",
    "MAX_JPEG_SEGMENTS",
    "PDF_BYTES_PER_PAGE",
    "image_size",
    "pdf_page_count",
]

MAX_HEADER_SCAN: Final = 1 << 20
"""Bytes of a JPEG searched for its frame header (metadata segments such as EXIF come first;
each is at most 64 KiB). The other formats need their first 30 bytes."""

MAX_JPEG_SEGMENTS: Final = 1024
"""JPEG segments walked before giving up."""

MAX_DIMENSION: Final = 1 << 24
"""Largest width or height believed (WebP's own limit); a larger one reads as unknown."""

PDF_BYTES_PER_PAGE: Final = 100_000
"""Bytes per page assumed for a PDF whose pages cannot be counted (scanned pages run larger,
plain text pages much smaller)."""

_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_COUNT = re.compile(rb"/Count\s+(\d{1,7})")

_JPEG_SOF: Final = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def image_size(data: bytes) -> tuple[int, int] | None:
    """``(width, height)`` of the PNG, JPEG, GIF or WebP image ``data``, or ``None``."""
    size: tuple[int, int] | None
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        size = _png(data)
    elif data[:6] in (b"GIF87a", b"GIF89a"):
        size = _pair(data, 6, 2, "little") if len(data) >= 10 else None
    elif data[:3] == b"\xff\xd8\xff":
        size = _jpeg(data)
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        size = _webp(data)
    else:
        size = None
    if size is None:
        return None
    width, height = size
    if not (0 < width <= MAX_DIMENSION and 0 < height <= MAX_DIMENSION):
        return None
    return size


def _pair(data: bytes, at: int, width: int, order: Literal["big", "little"]) -> tuple[int, int]:
    w = int.from_bytes(data[at : at + width], order)
    h = int.from_bytes(data[at + width : at + 2 * width], order)
    return w, h


def _png(data: bytes) -> tuple[int, int] | None:
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    return _pair(data, 16, 4, "big")


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        w = int.from_bytes(data[26:28], "little") & 0x3FFF
        h = int.from_bytes(data[28:30], "little") & 0x3FFF
        return w, h
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    end = min(len(data), MAX_HEADER_SCAN)
    at = 2
    for _ in range(MAX_JPEG_SEGMENTS):
        start = at
        while at < end and data[at] == 0xFF:  # a marker's 0xFF, and any fill bytes before it
            at += 1
        if at == start or at >= end:
            return None  # not at a marker: the lengths walked did not add up
        marker = data[at]
        at += 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:
            continue  # standalone markers: no length
        if marker in (0xD9, 0xDA) or at + 2 > end:
            return None  # end of image or start of scan before any frame header
        length = int.from_bytes(data[at : at + 2], "big")
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            if at + 7 > end:
                return None
            h = int.from_bytes(data[at + 3 : at + 5], "big")
            w = int.from_bytes(data[at + 5 : at + 7], "big")
            return w, h
        at += length
    return None


def pdf_page_count(data: bytes) -> int:
    """The pages of the PDF ``data``, at least 1 (see the module docstring)."""
    pages = sum(1 for _ in _PAGE.finditer(data))
    if pages:
        return pages
    counts = [int(m.group(1)) for m in _COUNT.finditer(data)]
    if counts and max(counts) > 0:
        return max(counts)
    return max(1, -(-len(data) // PDF_BYTES_PER_PAGE))
