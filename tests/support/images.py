"""Small real images made in pure Python (no Pillow): PNG, GIF and JPEG of any size that any
decoder opens, and WebP (a real 1 x 1 lossless and lossy file, and VP8X / VP8 / VP8L headers of
any size)."""

from __future__ import annotations

import base64
import struct
import zlib


def png(width: int, height: int, *, seed: int = 0) -> bytes:
    """An RGB PNG; ``seed`` varies the pixels (so two images of one size differ)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = bytes((seed + x) % 256 for x in range(width * 3))
    raw = b"".join(b"\x00" + row for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    """A GIF89a of one colour, its pixels LZW-coded as literals (8-bit codes, a clear code
    every 126 pixels, so the code width never grows)."""
    palette = bytes(3 * 128)
    codes: list[int] = []
    pixels = width * height
    for i in range(pixels):
        if i % 126 == 0:
            codes.append(128)  # clear
        codes.append(0)
    codes.append(129)  # end of information
    data = bytes(codes)
    blocks = b"".join(
        bytes([len(data[i : i + 255])]) + data[i : i + 255] for i in range(0, len(data), 255)
    )
    return (
        b"GIF89a"
        + struct.pack("<HHBBB", width, height, 0xF6, 0, 0)  # global table of 128 colours
        + palette
        + b","
        + struct.pack("<HHHHB", 0, 0, width, height, 0)
        + bytes([7])  # LZW minimum code size
        + blocks
        + b"\x00;"
    )


def jpeg(width: int, height: int, *, exif: int = 0) -> bytes:
    """A baseline greyscale JPEG, mid-grey: every 8 x 8 block is "DC difference 0, end of
    block", two one-bit Huffman codes. ``exif`` inserts an APP1 segment of that many bytes
    before the frame header (as cameras do)."""
    out = bytearray(b"\xff\xd8")
    out += b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    if exif:
        out += b"\xff\xe1" + struct.pack(">H", exif + 2) + b"Exif\x00\x00" + bytes(exif - 6)
    out += b"\xff\xdb" + struct.pack(">H", 67) + b"\x00" + bytes([1] * 64)
    out += b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    dc = b"\x00" + bytes([1] + [0] * 15) + b"\x00"  # one code of length 1: category 0
    ac = b"\x10" + bytes([1] + [0] * 15) + b"\x00"  # one code of length 1: end of block
    out += b"\xff\xc4" + struct.pack(">H", 2 + len(dc) + len(ac)) + dc + ac
    out += b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00" + b"\x00\x3f\x00"
    blocks = -(-width // 8) * -(-height // 8)
    bits = 2 * blocks
    scan = bytearray(bits // 8)
    if bits % 8:
        scan.append(0xFF >> (bits % 8))  # pad the last byte with ones
    out += scan + b"\xff\xd9"
    return bytes(out)


WEBP_LOSSLESS_1X1 = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
WEBP_LOSSY_1X1 = base64.b64decode("UklGRiIAAABXRUJQVlA4IBYAAAAwAQCdASoBAAEADsD+JaQAA3AAAAAA")


def _riff(chunk: bytes, body: bytes) -> bytes:
    payload = b"WEBP" + chunk + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", len(payload)) + payload


def webp_vp8x(width: int, height: int) -> bytes:
    """A WebP extended-format header (VP8X) of a ``width`` x ``height`` canvas."""
    body = (
        b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    )
    return _riff(b"VP8X", body)


def webp_vp8l(width: int, height: int) -> bytes:
    """A lossless WebP header (VP8L) of a ``width`` x ``height`` image."""
    bits = (width - 1) | ((height - 1) << 14)
    return _riff(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 4)


def webp_vp8(width: int, height: int) -> bytes:
    """A lossy WebP header (VP8 key frame) of a ``width`` x ``height`` image."""
    body = b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 8
    return _riff(b"VP8 ", body)
