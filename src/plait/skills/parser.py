"""SKILL.md → frontmatter text + Markdown body, tolerant of what real files contain.

This layer finds the ``---`` delimiters; it does not read YAML (see :mod:`.frontmatter`). It
accepts, and records for the validator to report:

* bytes that are not UTF-8 (decoded with U+FFFD replacement characters),
* a UTF-8 byte-order mark,
* CRLF or CR line ends (normalised to ``\\n``, as Python's text mode and ``skills-ref`` do),
* blank lines before the opening ``---``,
* a closing ``---`` on the last line with no newline after it.

Only a line that is exactly ``---`` (trailing spaces allowed) opens or closes the frontmatter,
so ``---`` inside a value (``description: a---b``) or an indented one inside a block scalar is
content, unlike ``skills-ref`` which splits on the first ``---`` anywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SkillMarkdown", "decode_skill_md", "split_skill_md"]

_BOM = "\ufeff"
_DELIMITER = re.compile(r"^---[ \t]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class SkillMarkdown:
    """A SKILL.md split into its parts.

    ``frontmatter`` is the YAML text exactly as ``skills-ref`` would see it: the rest of the
    opening ``---`` line, a newline, and the lines up to (not including) the closing ``---``.
    Its YAML line *k* (0-based) is file line ``opening_line + k``. It is ``None`` when the file
    has no opening delimiter; ``closed`` is False when the opening one is never closed.
    """

    text: str
    frontmatter: str | None
    opening_line: int
    closed: bool
    body: str
    body_line: int
    has_bom: bool
    leading_blank_lines: int
    invalid_utf8_line: int | None


def decode_skill_md(data: bytes | str) -> tuple[str, bool, int | None]:
    """Decode SKILL.md bytes: ``(text, had_bom, line of the first invalid UTF-8 byte)``.

    The text has the BOM removed and every line end normalised to ``\\n``.
    """
    invalid_line: int | None = None
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            invalid_line = data.count(b"\n", 0, err.start) + 1
            text = data.decode("utf-8", errors="replace")
    else:
        text = data
    has_bom = text.startswith(_BOM)
    if has_bom:
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, has_bom, invalid_line


def split_skill_md(data: bytes | str) -> SkillMarkdown:
    """Split SKILL.md into frontmatter and body. Never raises for any input."""
    text, has_bom, invalid_line = decode_skill_md(data)
    start, blank_lines = _skip_blank_lines(text)
    first_end = text.find("\n", start)
    first_line = text[start:] if first_end < 0 else text[start:first_end]
    opening_line = blank_lines + 1
    if not _DELIMITER.fullmatch(first_line):
        body, body_line = _trim_body(text[start:], opening_line)
        return SkillMarkdown(
            text, None, opening_line, False, body, body_line, has_bom, blank_lines, invalid_line
        )
    rest_of_opening = first_line[3:]
    if first_end < 0:
        return SkillMarkdown(
            text,
            rest_of_opening + "\n",
            opening_line,
            False,
            "",
            opening_line + 1,
            has_bom,
            blank_lines,
            invalid_line,
        )
    closing = _DELIMITER.search(text, first_end + 1)
    if closing is None:
        frontmatter = rest_of_opening + text[first_end:]
        return SkillMarkdown(
            text,
            frontmatter,
            opening_line,
            False,
            "",
            opening_line + 1,
            has_bom,
            blank_lines,
            invalid_line,
        )
    frontmatter = rest_of_opening + text[first_end : closing.start()]
    closing_line = opening_line + text.count("\n", first_end, closing.start())
    after = text.find("\n", closing.end())
    body_text = "" if after < 0 else text[after + 1 :]
    body, body_line = _trim_body(body_text, closing_line + 1)
    return SkillMarkdown(
        text, frontmatter, opening_line, True, body, body_line, has_bom, blank_lines, invalid_line
    )


def _skip_blank_lines(text: str) -> tuple[int, int]:
    """Offset of the first non-blank line and how many blank lines precede it."""
    pos = 0
    count = 0
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end < 0 else text[pos:end]
        if line.strip() or end < 0:
            return pos, count
        pos = end + 1
        count += 1


def _trim_body(body: str, first_line: int) -> tuple[str, int]:
    """Drop leading blank lines and trailing whitespace; return the body and its first line."""
    stripped = body.lstrip("\n")
    line = first_line + (len(body) - len(stripped))
    return stripped.rstrip(), line
