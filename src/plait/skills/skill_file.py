"""Which file in a folder is its SKILL.md, and SKILL.md files that are only a path.

The spec names the file ``SKILL.md``. Real collections also hold ``skill.md`` (``skills-ref``
accepts it) and other spellings (``SKILL.MD``, ``Skill.md``): every spelling counts, the exact
one is preferred, and any other gets a ``skill-md-name`` warning.

A repository that stores a SKILL.md as a git symlink is checked out, where symlinks are off
(``core.symlinks=false``, the Windows default), as a text file holding only the target path
(``../../shared/pdf/SKILL.md``). :func:`text_link_target` recognises such a file, so a source can
follow it (inside its root) or say why it cannot.
"""

from __future__ import annotations

import errno
import os
import posixpath
from pathlib import Path, PurePath

from plait.paths import confine
from plait.skills.diagnostics import Code, Diagnostic, Severity

__all__ = [
    "DEFAULT_MAX_SKILL_MD_BYTES",
    "MAX_TEXT_LINK_BYTES",
    "is_skill_file_name",
    "pick_skill_file",
    "resolve_text_link",
    "skill_file_name_warning",
    "text_link_followed",
    "text_link_refused",
    "text_link_target",
]

DEFAULT_MAX_SKILL_MD_BYTES = 5 * 1024 * 1024
"""A SKILL.md larger than this is not read (``file-too-large``); sources use it as the default
cap for every skill file they serve (``max_file_bytes``)."""

MAX_TEXT_LINK_BYTES = 1024
"""A SKILL.md longer than this is never read as a path (git symlink targets are short)."""


def is_skill_file_name(name: str) -> bool:
    """True for ``SKILL.md`` in any letter case."""
    return name.lower() == "skill.md"


def pick_skill_file(names: list[str] | tuple[str, ...]) -> str | None:
    """The skill file among ``names``: ``SKILL.md``, else ``skill.md``, else the first other
    spelling in sorted order; ``None`` when there is none."""
    if "SKILL.md" in names:  # the usual case, without looking at every name
        return "SKILL.md"
    found = sorted(n for n in names if is_skill_file_name(n))
    for preferred in ("SKILL.md", "skill.md"):
        if preferred in found:
            return preferred
    return found[0] if found else None


def skill_file_name_warning(file: str) -> Diagnostic:
    """The warning for a skill file not spelled ``SKILL.md``."""
    name = posixpath.basename(file.replace(os.sep, "/"))
    return Diagnostic(
        Severity.WARNING,
        Code.LOWERCASE_SKILL_MD,
        f"The file is named {name!r}; rename it 'SKILL.md', the name the spec requires "
        "(case-sensitive file systems and other clients miss other spellings).",
        file,
    )


def text_link_target(data: bytes) -> str | None:
    """The relative path a SKILL.md holds when that is its whole content, else ``None``.

    It must be one line (a trailing newline allowed), at most :data:`MAX_TEXT_LINK_BYTES`,
    valid UTF-8, without spaces or a ``:``, and name a ``SKILL.md`` (any case) or a folder path
    (it contains ``/``). Absolute paths are returned too; the caller refuses them.
    """
    if len(data) > MAX_TEXT_LINK_BYTES or b"\n" in data.rstrip(b"\r\n"):
        return None
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None
    if not text or any(c.isspace() for c in text) or ":" in text or text.startswith("---"):
        return None
    if is_skill_file_name(posixpath.basename(text)) or "/" in text:
        return text
    return None


def resolve_text_link(skill_md: Path, link: str, root: Path) -> Path:
    """The file a text ``link`` in ``skill_md`` names (a folder: its skill file), resolved and
    confined to ``root``: :class:`~plait.paths.PathEscapeError` when it leaves ``root``,
    :class:`OSError` when it is missing."""
    target = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(skill_md)), link))
    rel = os.path.relpath(target, os.path.abspath(root)).replace(os.sep, "/")
    resolved = confine(root, rel)
    if resolved.is_dir():
        resolved = resolved / (pick_skill_file(os.listdir(resolved)) or "SKILL.md")
    if not resolved.is_file():
        raise FileNotFoundError(errno.ENOENT, "no such file", str(resolved))
    return resolved


def _what(file: str, link: str) -> str:
    return (
        f"{file} holds only the path {link!r}: a git symlink checked out as text "
        "(core.symlinks=false)"
    )


def text_link_followed(file: str, link: str, target: PurePath) -> Diagnostic:
    """The warning for a text link that was followed to ``target``."""
    return Diagnostic(
        Severity.WARNING,
        Code.TEXT_LINK,
        f"{_what(file, link)}; followed it to {target}. Clone with symlinks enabled "
        "(git config core.symlinks true) or replace the file with a copy.",
        file,
    )


def text_link_refused(file: str, link: str, reason: str) -> Diagnostic:
    """The error for a text link that cannot be followed: its target ``reason``."""
    message = f"{_what(file, link)}, whose target {reason}; skipped."
    return Diagnostic(Severity.ERROR, Code.TEXT_LINK, message, file)
