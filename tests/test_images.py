"""plait.images: image sizes from header bytes (PNG, JPEG, GIF, WebP) and PDF page counts."""

from __future__ import annotations

import pytest
from images import (
    WEBP_LOSSLESS_1X1,
    WEBP_LOSSY_1X1,
    gif,
    jpeg,
    png,
    webp_vp8,
    webp_vp8l,
    webp_vp8x,
)

from plait.images import MAX_HEADER_SCAN, PDF_BYTES_PER_PAGE, image_size, pdf_page_count
from plait.parts import Blob, ImagePart


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (png, "image/png"),
        (gif, "image/gif"),
        (jpeg, "image/jpeg"),
        (webp_vp8x, "image/webp"),
        (webp_vp8l, "image/webp"),
        (webp_vp8, "image/webp"),
    ],
)
@pytest.mark.parametrize("size", [(1, 1), (3, 2), (640, 480), (1000, 3000)])
def test_the_size_is_read_from_each_formats_header(
    make: object, kind: str, size: tuple[int, int]
) -> None:
    assert callable(make)
    data = make(*size)
    assert image_size(data) == size
    part = ImagePart(Blob(data))  # the bytes pass the part's own signature check
    assert part.media_type == kind
    assert part.source.image_size == size  # type: ignore[union-attr]


def test_real_one_pixel_webp_files_read_as_one_by_one() -> None:
    assert image_size(WEBP_LOSSLESS_1X1) == (1, 1)
    assert image_size(WEBP_LOSSY_1X1) == (1, 1)


def test_a_jpeg_frame_header_after_large_metadata_segments_is_found() -> None:
    data = jpeg(800, 600, exif=60_000)
    assert image_size(data) == (800, 600)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("empty", b""),
        ("text", b"hello, not an image"),
        ("truncated png", png(10, 10)[:20]),
        ("png without IHDR", png(10, 10)[:12] + b"IDAT" + bytes(20)),
        ("zero-width png", png(10, 10)[:16] + bytes(4) + png(10, 10)[20:]),
        ("truncated gif", b"GIF89a\x01"),
        ("jpeg without a frame header", b"\xff\xd8\xff\xd9"),
        ("jpeg scan before its frame", b"\xff\xd8\xff\xda\x00\x08" + bytes(8)),
        ("jpeg segment lengths that do not add up", b"\xff\xd8\xff\xe0\x00\x10" + bytes(40)),
        ("jpeg with a zero segment length", b"\xff\xd8\xff\xe0\x00\x00" + bytes(10)),
        ("truncated jpeg", jpeg(8, 8)[:30]),
        ("webp of an unknown chunk", b"RIFF\x00\x00\x00\x00WEBPABCD" + bytes(20)),
        ("truncated webp", webp_vp8x(5, 5)[:26]),
    ],
)
def test_unreadable_headers_give_none_not_an_error(name: str, data: bytes) -> None:
    assert image_size(data) is None, name


def test_a_jpeg_whose_metadata_runs_past_the_scan_bound_gives_none() -> None:
    # APP1 segments of 65,533 bytes each, more of them than MAX_HEADER_SCAN holds.
    segment = b"\xff\xe1\xff\xff" + bytes(0xFFFF - 2)
    data = b"\xff\xd8" + segment * (MAX_HEADER_SCAN // len(segment) + 2) + jpeg(9, 9)[2:]
    assert image_size(data) is None
    assert image_size(b"\xff\xd8" + segment * 3 + jpeg(9, 9)[2:]) == (9, 9)


def test_the_size_is_parsed_once_per_blob() -> None:
    blob = Blob(png(30, 20))
    assert blob._image_size is False  # not parsed until asked
    assert blob.image_size == (30, 20)
    cached: object = blob._image_size
    assert cached == (30, 20)
    blob._image_size = (1, 2)  # the cache is what later estimates read
    assert blob.image_size == (1, 2)


def test_pdf_pages_are_counted_from_page_objects_or_the_page_tree() -> None:
    pages = b"".join(b"%d 0 obj <</Type /Page /Parent 1 0 R>> endobj\n" % i for i in range(7))
    pdf = b"%PDF-1.4\n1 0 obj <</Type /Pages /Count 7>> endobj\n" + pages
    assert pdf_page_count(pdf) == 7
    assert Blob(pdf).page_count == 7
    assert pdf_page_count(b"%PDF-1.7\n<</Type/Pages/Count 12>> (compressed pages)") == 12
    unreadable = b"%PDF-1.7\n" + bytes(PDF_BYTES_PER_PAGE * 3)
    assert pdf_page_count(unreadable) == 4
    assert pdf_page_count(b"%PDF-1.7") == 1
