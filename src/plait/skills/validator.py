"""Validating SKILL.md in two modes.

``strict`` gives the diagnostics ``skills-ref`` 0.1.1 gives, message for message (its
``validate()`` returns them as strings; here each is a :class:`Diagnostic` with a code and a
line). Deliberate differences, each pinned by a test in ``tests/skills``:

* the frontmatter ends at a line that is exactly ``---``, not at the first ``---`` anywhere
  (``skills-ref`` reads ``description: a---b`` as ``a`` and the rest as body);
* a UTF-8 byte-order mark is ignored (``skills-ref`` reports a missing frontmatter);
* bytes that are not UTF-8 give a ``not-utf8`` error (``skills-ref`` raises
  ``UnicodeDecodeError`` out of ``validate()``);
* a path without a final component (``.``) is checked against its resolved folder name;
* YAML past a :class:`~plait.skills.yaml_bounds.YamlLimits` bound (deep nesting, recursive or
  expanding aliases) gives ``yaml-too-large`` before any parsing that could recurse or expand.

``lenient`` (the default for loading) keeps every skill a name and a description can honestly be
recovered for, with warnings; see :mod:`plait.skills.lenient`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from plait.paths import PathEscapeError
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.frontmatter import FrontmatterProblem, PlainData, read_lenient, read_strict
from plait.skills.lenient import build_lenient
from plait.skills.model import SPEC_FIELDS, SkillMeta
from plait.skills.parser import SkillMarkdown, split_skill_md
from plait.skills.rules import (
    MAX_COMPATIBILITY_LENGTH,
    MAX_DESCRIPTION_LENGTH,
    MAX_NAME_LENGTH,
    compatibility_problems,
    description_problems,
    name_problems,
)
from plait.skills.skill_file import (
    DEFAULT_MAX_SKILL_MD_BYTES,
    pick_skill_file,
    resolve_text_link,
    skill_file_name_warning,
    text_link_followed,
    text_link_refused,
    text_link_target,
)

__all__ = [
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "SkillCheck",
    "ValidationMode",
    "check_skill_md",
    "find_skill_md",
    "name_problems",
    "strict_diagnostics",
    "validate_skill_dir",
]


class ValidationMode(StrEnum):
    STRICT = "strict"
    LENIENT = "lenient"


@dataclass(frozen=True, slots=True)
class SkillCheck:
    """The outcome of checking one SKILL.md: ``meta`` is ``None`` when the skill is unusable."""

    meta: SkillMeta | None
    body: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        """True when no diagnostic is an error."""
        return not any(d.is_error for d in self.diagnostics)


def check_skill_md(
    data: bytes | str,
    *,
    folder_name: str | None,
    file: str | None = None,
    mode: ValidationMode = ValidationMode.LENIENT,
) -> SkillCheck:
    """Parse and validate one SKILL.md. ``folder_name`` is the skill folder's name (``None``
    when there is none, e.g. a bare file); ``file`` is what diagnostics name. Never raises.

    In strict mode ``meta`` is filled only when there is no error.
    """
    markdown = split_skill_md(data)
    if mode is ValidationMode.STRICT:
        diagnostics = strict_diagnostics(markdown, folder_name, file)
        meta = None
        if not any(d.is_error for d in diagnostics):
            meta, _ = build_lenient(markdown, folder_name, file)
        return SkillCheck(meta, markdown.body, tuple(diagnostics))
    meta, lenient = build_lenient(markdown, folder_name, file)
    return SkillCheck(meta, markdown.body, tuple(lenient))


def find_skill_md(folder: Path) -> Path | None:
    """``SKILL.md`` in ``folder``, else ``skill.md`` (as ``skills-ref`` accepts), else any
    other spelling (``SKILL.MD``), else None."""
    try:
        names = [n for n in os.listdir(folder) if (folder / n).is_file()]
    except OSError:
        return None
    name = pick_skill_file(names)
    return None if name is None else folder / name


def validate_skill_dir(
    path: str | Path,
    mode: ValidationMode = ValidationMode.STRICT,
    *,
    root: str | Path | None = None,
    max_bytes: int = DEFAULT_MAX_SKILL_MD_BYTES,
) -> list[Diagnostic]:
    """Validate one skill folder, like ``skills_ref.validate(path)`` (strict by default).

    A SKILL.md over ``max_bytes`` is a ``file-too-large`` error (it is not read). In lenient
    mode, a SKILL.md that holds only a relative path (a git symlink checked out as text) is
    validated through its target when that lies inside ``root`` (default: the skill folder's
    parent), with a ``skill-md-text-link`` warning; otherwise it is that error. Strict mode
    reads the file as ``skills-ref`` does.
    """
    folder = Path(path)
    if not folder.exists():
        return [_error(Code.PATH_NOT_FOUND, f"Path does not exist: {folder}", str(folder))]
    if not folder.is_dir():
        return [_error(Code.NOT_A_DIRECTORY, f"Not a directory: {folder}", str(folder))]
    skill_md = find_skill_md(folder)
    if skill_md is None:
        return [_error(Code.MISSING_SKILL_MD, "Missing required file: SKILL.md", str(folder))]
    data = _read_capped(skill_md, max_bytes)
    if isinstance(data, Diagnostic):
        return [data]
    notes: list[Diagnostic] = []
    link = text_link_target(data) if mode is ValidationMode.LENIENT else None
    if link is not None:
        try:
            target = resolve_text_link(skill_md, link, Path(root or folder.resolve().parent))
        except PathEscapeError:
            return [text_link_refused(str(skill_md), link, "lies outside the folder validated")]
        except OSError as err:
            reason = f"cannot be read ({err.strerror})"
            return [text_link_refused(str(skill_md), link, reason)]
        data = _read_capped(target, max_bytes)
        if isinstance(data, Diagnostic):
            return [data]
        notes.append(text_link_followed(str(skill_md), link, target))
    folder_name = folder.name or folder.resolve().name
    check = check_skill_md(data, folder_name=folder_name, file=str(skill_md), mode=mode)
    diagnostics = list(check.diagnostics) + notes
    if mode is ValidationMode.LENIENT and skill_md.name != "SKILL.md":
        diagnostics.append(skill_file_name_warning(str(skill_md)))
    return diagnostics


def _read_capped(file: Path, max_bytes: int) -> bytes | Diagnostic:
    try:
        size = file.stat().st_size
        if size > max_bytes:
            message = f"SKILL.md is {size} bytes, over the {max_bytes}-byte limit; not read."
            return _error(Code.FILE_TOO_LARGE, message, str(file))
        with file.open("rb") as handle:
            return handle.read(max_bytes + 1)
    except OSError as err:
        return _error(Code.UNREADABLE, f"Cannot read {file}: {err.strerror}", str(file))


def strict_diagnostics(
    markdown: SkillMarkdown, folder_name: str | None, file: str | None
) -> list[Diagnostic]:
    """``skills-ref``'s errors for a split SKILL.md (see the module docstring for differences)."""
    if markdown.invalid_utf8_line is not None:
        return [
            _error(
                Code.NOT_UTF8,
                "SKILL.md is not valid UTF-8; save it as UTF-8",
                file,
                markdown.invalid_utf8_line,
            )
        ]
    if markdown.frontmatter is None or markdown.leading_blank_lines:
        message = "SKILL.md must start with YAML frontmatter (---)"
        return [_error(Code.NO_FRONTMATTER, message, file, 1)]
    if not markdown.closed:
        message = "SKILL.md frontmatter not properly closed with ---"
        return [_error(Code.FRONTMATTER_NOT_CLOSED, message, file, markdown.opening_line)]
    data = read_strict(markdown.frontmatter)
    if isinstance(data, FrontmatterProblem):
        line = None if data.line is None else markdown.opening_line + data.line
        if data.kind == "not-mapping":
            message = "SKILL.md frontmatter must be a YAML mapping"
            return [_error(Code.FRONTMATTER_NOT_MAPPING, message, file, line)]
        if data.kind == "too-large":
            message = f"Frontmatter not read: {data.message}"
            return [_error(Code.YAML_TOO_LARGE, message, file, line)]
        message = f"Invalid YAML in frontmatter: {data.message}"
        return [_error(Code.INVALID_YAML, message, file, line)]
    return _strict_field_diagnostics(data, markdown, folder_name, file)


def _strict_field_diagnostics(
    data: dict[str, PlainData], markdown: SkillMarkdown, folder_name: str | None, file: str | None
) -> list[Diagnostic]:
    assert markdown.frontmatter is not None
    located = read_lenient(markdown.frontmatter)
    yaml_lines = {} if isinstance(located, FrontmatterProblem) else located.lines

    def line_of(key: str) -> int | None:
        yaml_line = yaml_lines.get(key)
        return None if yaml_line is None else markdown.opening_line + yaml_line

    found: list[Diagnostic] = []
    extras = sorted(set(data) - set(SPEC_FIELDS))
    if extras:
        message = (
            f"Unexpected fields in frontmatter: {', '.join(extras)}. "
            f"Only {sorted(SPEC_FIELDS)} are allowed."
        )
        found.append(_error(Code.UNEXPECTED_FIELDS, message, file, line_of(extras[0])))
    if "name" not in data:
        found.append(_error(Code.MISSING_NAME, "Missing required field in frontmatter: name", file))
    else:
        for code, message in _strict_name(data["name"], folder_name):
            found.append(_error(code, message, file, line_of("name")))
    if "description" not in data:
        message = "Missing required field in frontmatter: description"
        found.append(_error(Code.MISSING_DESCRIPTION, message, file))
    else:
        for code, message in description_problems(data["description"]):
            found.append(_error(code, message, file, line_of("description")))
    if "compatibility" in data:
        for code, message in compatibility_problems(data["compatibility"]):
            found.append(_error(code, message, file, line_of("compatibility")))
    return found


def _strict_name(value: PlainData, folder_name: str | None) -> list[tuple[Code, str]]:
    if not value or not isinstance(value, str) or not value.strip():
        return [(Code.NAME_EMPTY, "Field 'name' must be a non-empty string")]
    return name_problems(value, folder_name)


def _error(code: Code, message: str, file: str | None, line: int | None = None) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, message, file, line)
