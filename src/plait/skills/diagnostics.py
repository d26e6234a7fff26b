"""Diagnostics: what loading or validating a skill found wrong, as data.

A :class:`Diagnostic` never raises; loaders collect them and keep going, so one broken skill
never hides another. ``code`` is stable (tests, filters and JSON output rely on it); ``message``
is for people and says what to do.

=============================  =======  ======================================================
code                           strict   lenient
=============================  =======  ======================================================
``path-not-found``             error    error (the path given to validate/list does not exist)
``not-a-directory``            error    error
``missing-skill-md``           error    error
``not-utf8``                   error    warning, decoded with U+FFFD replacements
``byte-order-mark``            (none)   info, the BOM is dropped
``leading-blank-lines``        error    warning, the blank lines are ignored
``no-frontmatter``             error    warning + name from folder, description from body
``frontmatter-not-closed``     error    error, skipped
``invalid-yaml``               error    error, skipped (after the unquoted-colon retry)
``yaml-unquoted-colon``        (error)  warning, the value is read as a quoted string
``yaml-too-large``             error    error, skipped (nesting, recursive or expanding aliases)
``frontmatter-not-mapping``    error    error, skipped
``duplicate-field``            (error)  warning, the last value wins
``unexpected-fields``          error    (split into ``unknown-field`` / ``client-field``)
``unknown-field``              --       warning, kept in ``SkillMeta.extra``
``client-field``               --       info (a known client extension, e.g. Claude Code's)
``missing-name``               error    warning + folder name; error if there is no folder
``name-empty``                 error    warning + folder name
``name-too-long`` …            error    warning (all ``name-*`` format checks)
``name-folder-mismatch``       error    warning
``missing-description``        error    warning + first body paragraph; error if none
``description-empty``          error    warning + first body paragraph; error if none
``description-too-long``       error    warning
``compatibility-not-string``   error    warning, ignored
``compatibility-too-long``     error    warning
``license-not-string``         --       warning, ignored
``metadata-not-mapping``       --       warning, ignored
``metadata-value-not-string``  --       warning, that entry ignored
``allowed-tools-invalid``      --       warning, ignored
``lowercase-skill-md``         --       warning (``skill.md``, ``SKILL.MD``... not ``SKILL.md``)
``file-too-large``             --       error, skipped
``unreadable``                 --       error for a SKILL.md, warning for a folder; skipped
``path-escape``                --       error (a symlink leaving the source root), skipped
``scan-limit``                 --       warning naming unscanned folders (``max_dirs``, time)
``depth-limit``                --       warning naming folders deeper than ``max_depth``
``nested-skill``               --       warning: a SKILL.md inside another skill's folder
``skill-md-text-link``         --       warning (followed) or error: SKILL.md holds only a path
``source-unavailable``         --       error (a whole source failed; its last entries kept)
``name-shadowed``              --       info across sources, warning within one source
=============================  =======  ======================================================

"(error)": strict mode reports it as ``invalid-yaml``, as strictyaml does. "--": strict mode
has no such check (``skills-ref`` does not make it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Code", "Diagnostic", "Severity"]


class Severity(StrEnum):
    """How bad a diagnostic is. ``ERROR`` (and a ``scan-limit``/``depth-limit`` warning: skills
    may be missing) makes ``plait skills validate`` exit 1."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Code(StrEnum):
    """Stable diagnostic codes (see the module docstring for what each means per mode)."""

    PATH_NOT_FOUND = "path-not-found"
    NOT_A_DIRECTORY = "not-a-directory"
    MISSING_SKILL_MD = "missing-skill-md"
    NOT_UTF8 = "not-utf8"
    BYTE_ORDER_MARK = "byte-order-mark"
    LEADING_BLANK_LINES = "leading-blank-lines"
    NO_FRONTMATTER = "no-frontmatter"
    FRONTMATTER_NOT_CLOSED = "frontmatter-not-closed"
    INVALID_YAML = "invalid-yaml"
    YAML_UNQUOTED_COLON = "yaml-unquoted-colon"
    YAML_TOO_LARGE = "yaml-too-large"
    FRONTMATTER_NOT_MAPPING = "frontmatter-not-mapping"
    DUPLICATE_FIELD = "duplicate-field"
    UNEXPECTED_FIELDS = "unexpected-fields"
    UNKNOWN_FIELD = "unknown-field"
    CLIENT_FIELD = "client-field"
    MISSING_NAME = "missing-name"
    NAME_EMPTY = "name-empty"
    NAME_TOO_LONG = "name-too-long"
    NAME_NOT_LOWERCASE = "name-not-lowercase"
    NAME_HYPHEN_EDGE = "name-hyphen-edge"
    NAME_CONSECUTIVE_HYPHENS = "name-consecutive-hyphens"
    NAME_INVALID_CHARACTERS = "name-invalid-characters"
    NAME_FOLDER_MISMATCH = "name-folder-mismatch"
    MISSING_DESCRIPTION = "missing-description"
    DESCRIPTION_EMPTY = "description-empty"
    DESCRIPTION_TOO_LONG = "description-too-long"
    COMPATIBILITY_NOT_STRING = "compatibility-not-string"
    COMPATIBILITY_TOO_LONG = "compatibility-too-long"
    LICENSE_NOT_STRING = "license-not-string"
    METADATA_NOT_MAPPING = "metadata-not-mapping"
    METADATA_VALUE_NOT_STRING = "metadata-value-not-string"
    ALLOWED_TOOLS_INVALID = "allowed-tools-invalid"
    LOWERCASE_SKILL_MD = "lowercase-skill-md"
    FILE_TOO_LARGE = "file-too-large"
    UNREADABLE = "unreadable"
    PATH_ESCAPE = "path-escape"
    SCAN_LIMIT = "scan-limit"
    DEPTH_LIMIT = "depth-limit"
    NESTED_SKILL = "nested-skill"
    TEXT_LINK = "skill-md-text-link"
    SOURCE_UNAVAILABLE = "source-unavailable"
    NAME_SHADOWED = "name-shadowed"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding about one file: ``file`` is a path or a virtual location, ``line`` 1-based."""

    severity: Severity
    code: Code
    message: str
    file: str | None = None
    line: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def to_dict(self) -> dict[str, str | int | None]:
        """A JSON-ready dict with the keys ``severity, code, message, file, line``."""
        return {
            "severity": self.severity.value,
            "code": self.code.value,
            "message": self.message,
            "file": self.file,
            "line": self.line,
        }

    def __str__(self) -> str:
        where = self.file or "<skill>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: {self.severity.value} [{self.code.value}] {self.message}"
