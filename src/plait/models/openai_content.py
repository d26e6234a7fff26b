"""Images and files for OpenAI's two wire formats (Responses and Chat Completions): OpenAI's
published input limits, checked before a request is sent, and the data URLs the parts become.

OpenAI's limits (the *Images and vision* guide, "Image input requirements", and the *File
inputs* guide), checked by :func:`check_openai_content` as a
:class:`~plait.errors.ContentError` naming the limit:

===============================  ==================================================
limit                            figure
===============================  ==================================================
image types                      PNG, JPEG, WebP, non-animated GIF (the bytes must
                                 start with their type's signature)
one image                        at most 20 MB (:data:`OPENAI_MAX_IMAGE_BYTES`)
images in one request            at most 500 (:data:`OPENAI_MAX_IMAGES`)
image bytes in one request       at most 50 MB (:data:`OPENAI_MAX_IMAGE_BYTES_PER_REQUEST`)
file types                       PDF (:data:`OPENAI_FILE_MEDIA_TYPES`)
file bytes in one request        at most 32 MB (:data:`OPENAI_MAX_FILE_BYTES_PER_REQUEST`);
                                 OpenAI also caps a request at 100 PDF pages, which
                                 the API itself enforces (plait does not parse PDFs)
===============================  ==================================================

Sizes count the decoded bytes (MB = 1024 * 1024 bytes) of every image and file the request
carries, the whole conversation included: each request resends the thread. URL parts count one
image each and no bytes (OpenAI fetches them). A blob's base64 text is computed once and cached
(:meth:`~plait.parts.Blob.base64`), so a thread's images are not re-encoded on every call.
"""

from __future__ import annotations

from collections.abc import Iterable

from plait.errors import ContentError
from plait.messages import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    Part,
    ToolMessage,
)
from plait.parts import Blob, sniff_media_type

__all__ = [
    "OPENAI_FILE_MEDIA_TYPES",
    "OPENAI_IMAGE_MEDIA_TYPES",
    "OPENAI_MAX_FILE_BYTES_PER_REQUEST",
    "OPENAI_MAX_IMAGES",
    "OPENAI_MAX_IMAGE_BYTES",
    "OPENAI_MAX_IMAGE_BYTES_PER_REQUEST",
    "check_openai_content",
    "data_url",
    "is_animated_gif",
    "message_parts",
]

_MB = 1024 * 1024

OPENAI_IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The image types OpenAI accepts (a GIF only when it is not animated)."""

OPENAI_MAX_IMAGE_BYTES = 20 * _MB
"""The most bytes one image may have (20 MB)."""

OPENAI_MAX_IMAGES = 500
"""The most images one request may carry, across the whole conversation."""

OPENAI_MAX_IMAGE_BYTES_PER_REQUEST = 50 * _MB
"""The most image bytes one request may carry (50 MB), across the whole conversation."""

OPENAI_FILE_MEDIA_TYPES = frozenset({"application/pdf"})
"""The file types sent as file inputs; send text documents as text."""

OPENAI_MAX_FILE_BYTES_PER_REQUEST = 32 * _MB
"""The most file bytes one request may carry (32 MB)."""

_GIF_CACHE: dict[str, bool] = {}
_GIF_CACHE_SIZE = 1024


def message_parts(message: Message) -> Iterable[Part]:
    """The parts of ``message`` that may carry images or files: a tool result's attachments,
    any other message's content (an assistant message has none to send)."""
    if isinstance(message, ToolMessage):
        return message.parts
    if isinstance(message, AssistantMessage):
        return ()
    return message.content


def check_openai_content(messages: Iterable[Message], *, model: str) -> None:
    """Raise :class:`ContentError` if the images and files of ``messages`` break one of OpenAI's
    limits (the module table); ``model`` names the model in the message."""
    images = image_bytes = file_bytes = 0
    for message in messages:
        for part in message_parts(message):
            if isinstance(part, ImagePart):
                images += 1
                image_bytes += _check_image(part, model)
            elif isinstance(part, FilePart):
                file_bytes += _check_file(part, model)
    if images > OPENAI_MAX_IMAGES:
        raise ContentError(
            f"{model}: the request carries {images} images; OpenAI takes at most "
            f"{OPENAI_MAX_IMAGES} per request (OPENAI_MAX_IMAGES). Send fewer, or drop old ones "
            "from the thread."
        )
    if image_bytes > OPENAI_MAX_IMAGE_BYTES_PER_REQUEST:
        raise ContentError(
            f"{model}: the request carries {image_bytes:,} bytes of images; OpenAI takes at "
            f"most {OPENAI_MAX_IMAGE_BYTES_PER_REQUEST:,} (50 MB) per request. Send smaller "
            "images, URLs, or drop old ones from the thread."
        )
    if file_bytes > OPENAI_MAX_FILE_BYTES_PER_REQUEST:
        raise ContentError(
            f"{model}: the request carries {file_bytes:,} bytes of files; OpenAI takes at most "
            f"{OPENAI_MAX_FILE_BYTES_PER_REQUEST:,} (32 MB) per request. Send fewer or smaller "
            "files."
        )


def _check_image(part: ImagePart, model: str) -> int:
    blob = part.blob
    media_type = part.media_type
    if media_type is not None and media_type not in OPENAI_IMAGE_MEDIA_TYPES:
        raise ContentError(
            f"{model}: OpenAI does not take {media_type} images; convert to one of "
            f"{', '.join(sorted(OPENAI_IMAGE_MEDIA_TYPES))}."
        )
    if blob is None:
        return 0
    sniffed = sniff_media_type(blob.data[:16])
    if sniffed != media_type:
        raise ContentError(
            f"{model}: image bytes are not {media_type} (their signature says "
            f"{sniffed or 'no known image format'}); give the right media type or convert them."
        )
    if blob.size > OPENAI_MAX_IMAGE_BYTES:
        raise ContentError(
            f"{model}: an image of {blob.size:,} bytes is over OpenAI's limit of "
            f"{OPENAI_MAX_IMAGE_BYTES:,} (20 MB) per image; resize or recompress it."
        )
    if media_type == "image/gif" and is_animated_gif(blob):
        raise ContentError(
            f"{model}: OpenAI takes only non-animated GIFs; send one frame (as PNG) instead."
        )
    return blob.size


def _check_file(part: FilePart, model: str) -> int:
    if part.media_type not in OPENAI_FILE_MEDIA_TYPES:
        raise ContentError(
            f"{model}: OpenAI file inputs here are PDFs, not {part.media_type}; send a text "
            "document's contents as text, or convert it to PDF."
        )
    blob = part.blob
    return 0 if blob is None else blob.size


def data_url(blob: Blob, media_type: str) -> str:
    """``data:<media_type>;base64,<bytes>``, cached on the blob (built once)."""
    return blob.data_url(media_type)


def is_animated_gif(blob: Blob) -> bool:
    """Whether a GIF holds more than one frame (walks the block structure; cached by address).

    Bytes that end early or break the format count as one frame: the provider judges them."""
    cached = _GIF_CACHE.get(blob.sha256)
    if cached is None:
        cached = _count_gif_frames(blob.data) > 1
        if len(_GIF_CACHE) >= _GIF_CACHE_SIZE:
            _GIF_CACHE.clear()
        _GIF_CACHE[blob.sha256] = cached
    return cached


def _count_gif_frames(data: bytes) -> int:
    if len(data) < 13:
        return 0
    pos = 13
    if data[10] & 0x80:  # a global colour table follows the screen descriptor
        pos += 3 * (2 ** ((data[10] & 0x07) + 1))
    frames = 0
    while pos < len(data):
        block = data[pos]
        if block == 0x3B:  # trailer
            break
        if block == 0x21:  # extension: label, then sub-blocks
            pos = _skip_sub_blocks(data, pos + 2)
        elif block == 0x2C:  # image descriptor, optional local colour table, LZW data
            frames += 1
            if frames > 1 or pos + 10 > len(data):
                break
            packed = data[pos + 9]
            pos += 10
            if packed & 0x80:
                pos += 3 * (2 ** ((packed & 0x07) + 1))
            pos = _skip_sub_blocks(data, pos + 1)
        else:
            break
    return frames


def _skip_sub_blocks(data: bytes, pos: int) -> int:
    while pos < len(data):
        size = data[pos]
        pos += 1 + size
        if size == 0:
            break
    return pos
