"""What a turn of ``plait run`` / ``plait chat`` is given: the task (argument and standard input)
and ``--attach`` files, as the user message.

=========================================  ==================================================
invocation                                 the task
=========================================  ==================================================
``plait run "TASK"``                       ``TASK`` (standard input a terminal, or nothing)
``echo TEXT | plait run``                  ``TEXT``
``plait run -``                            standard input, whatever it is
``cat file | plait run "TASK"``            ``TASK``, a blank line, then the piped text (as
                                           ``llm`` does)
=========================================  ==================================================

Standard input is read only when it is a pipe or a file (never a terminal, nor ``/dev/null``),
and at most :data:`MAX_STDIN_BYTES`; more is a usage error (exit 2), as is text that is not
UTF-8.

An ``--attach FILE`` becomes a part of the user message: an image (PNG, JPEG, GIF, WebP) as an
:class:`~plait.messages.ImagePart`, a PDF as a :class:`~plait.messages.FilePart`, UTF-8 text
inlined under a line naming the file. A missing, unreadable, oversized (text over
:data:`MAX_TEXT_ATTACHMENT_BYTES`, images and PDFs over :data:`~plait.parts.MAX_PART_BYTES`) or
unsupported file is a :class:`~plait.errors.ConfigurationError`, raised before any model call.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

from plait.errors import ConfigurationError, ContentError
from plait.messages import FilePart, ImagePart, Part, TextPart, UserMessage
from plait.parts import MAX_PART_BYTES, MEDIA_SUFFIXES, Blob, sniff_media_type

__all__ = [
    "MAX_STDIN_BYTES",
    "MAX_TEXT_ATTACHMENT_BYTES",
    "attachment_part",
    "stdin_is_piped",
    "task_text",
    "user_message",
]

MAX_STDIN_BYTES: Final = 1024 * 1024
"""The most standard input ``plait run`` reads (1 MiB)."""

MAX_TEXT_ATTACHMENT_BYTES: Final = 1024 * 1024
"""The largest text file ``--attach`` inlines (1 MiB, about 250,000 tokens)."""


def stdin_is_piped(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: standard input) is a pipe or a file worth reading: not a
    terminal, not a character device (``/dev/null``), not closed. A stream with no file
    descriptor (a test runner's) counts as piped."""
    stream = sys.stdin if stream is None else stream
    if stream is None or stream.closed:
        return False
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return not stream.isatty()
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _read_stdin(stream: IO[str]) -> str:
    buffer = getattr(stream, "buffer", None)
    data = buffer.read(MAX_STDIN_BYTES + 1) if buffer is not None else None
    if data is None:
        text = stream.read(MAX_STDIN_BYTES + 1)
        data = text.encode("utf-8", "surrogateescape")
    if len(data) > MAX_STDIN_BYTES:
        raise ConfigurationError(
            f"Standard input is over {MAX_STDIN_BYTES:,} bytes (1 MiB), the most plait run "
            "reads; pass a smaller text, or save it and give it with --attach FILE."
        )
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(
            "Standard input is not UTF-8 text; give a binary file with --attach FILE."
        ) from None


def task_text(task: str | None, stream: IO[str] | None = None) -> str:
    """The task from the argument ``task`` and standard input (see the module table)."""
    stream = sys.stdin if stream is None else stream
    if task == "-":
        return _read_stdin(stream)
    piped = stdin_is_piped(stream)
    if task is None:
        return _read_stdin(stream) if piped else ""
    if piped:
        extra = _read_stdin(stream)
        if extra.strip():
            return f"{task}\n\n{extra}"
    return task


def attachment_part(path: Path) -> Part:
    """``path`` as the part the model is sent (see the module docstring)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigurationError(f"--attach: no such file: {path}") from None
    except OSError as exc:
        raise ConfigurationError(f"--attach: cannot read {path} ({exc.strerror or exc}).") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigurationError(f"--attach: {path} is not a file.")
    with path.open("rb") as handle:
        head = handle.read(16)
    media_type = sniff_media_type(head) or MEDIA_SUFFIXES.get(path.suffix.lower())
    if media_type is not None:
        if info.st_size > MAX_PART_BYTES:
            raise ConfigurationError(
                f"--attach: {path} is {info.st_size:,} bytes, over the {MAX_PART_BYTES:,} an "
                "image or PDF may have."
            )
        try:
            blob = Blob(path.read_bytes())
            if media_type.startswith("image/"):
                return ImagePart(blob, media_type)
            return FilePart(blob, media_type, path.name)
        except (ContentError, OSError) as exc:
            raise ConfigurationError(f"--attach: cannot attach {path}: {exc}") from None
    return _text_attachment(path, info.st_size)


def _text_attachment(path: Path, size: int) -> TextPart:
    if size > MAX_TEXT_ATTACHMENT_BYTES:
        raise ConfigurationError(
            f"--attach: {path} is {size:,} bytes, over the {MAX_TEXT_ATTACHMENT_BYTES:,} a text "
            "file may have; attach a part of it."
        )
    data = path.read_bytes()[: MAX_TEXT_ATTACHMENT_BYTES + 1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise ConfigurationError(
            f"--attach: cannot attach {path}: not an image (PNG, JPEG, GIF, WebP), a PDF or "
            "UTF-8 text."
        )
    return TextPart(f"--- {path.name} ({path}) ---\n{text}")


def user_message(task: str, attachments: Sequence[Part]) -> str | UserMessage:
    """The turn's input: ``task`` alone, or a user message of ``task`` then the attachments."""
    if not attachments:
        return task
    return UserMessage([TextPart(task), *attachments])
