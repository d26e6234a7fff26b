"""The Agent Skills field rules, as ``skills-ref`` 0.1.1 applies them.

Each check returns ``(code, message)`` pairs with ``skills-ref``'s exact message; the strict
validator reports them as errors, the lenient loader as warnings.
"""

from __future__ import annotations

import unicodedata

from plait.errors import quoted
from plait.skills.diagnostics import Code
from plait.skills.frontmatter import PlainData

__all__ = [
    "MAX_COMPATIBILITY_LENGTH",
    "MAX_DESCRIPTION_LENGTH",
    "MAX_NAME_LENGTH",
    "compatibility_problems",
    "description_problems",
    "name_problems",
]

MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
MAX_COMPATIBILITY_LENGTH = 500


def name_problems(name: str, folder_name: str | None) -> list[tuple[Code, str]]:
    """``skills-ref``'s name checks (NFKC-normalised, Unicode letters allowed) as codes and
    messages; ``folder_name`` ``None`` skips the folder-match check."""
    name = unicodedata.normalize("NFKC", name.strip())
    found: list[tuple[Code, str]] = []
    if len(name) > MAX_NAME_LENGTH:
        found.append(
            (
                Code.NAME_TOO_LONG,
                f"Skill name {quoted(name)} exceeds {MAX_NAME_LENGTH} character limit "
                f"({len(name)} chars)",
            )
        )
    if name != name.lower():
        found.append((Code.NAME_NOT_LOWERCASE, f"Skill name {quoted(name)} must be lowercase"))
    if name.startswith("-") or name.endswith("-"):
        found.append((Code.NAME_HYPHEN_EDGE, "Skill name cannot start or end with a hyphen"))
    if "--" in name:
        found.append(
            (Code.NAME_CONSECUTIVE_HYPHENS, "Skill name cannot contain consecutive hyphens")
        )
    if not all(c.isalnum() or c == "-" for c in name):
        found.append(
            (
                Code.NAME_INVALID_CHARACTERS,
                f"Skill name {quoted(name)} contains invalid characters. "
                "Only letters, digits, and hyphens are allowed.",
            )
        )
    if folder_name is not None and unicodedata.normalize("NFKC", folder_name) != name:
        found.append(
            (
                Code.NAME_FOLDER_MISMATCH,
                f"Directory name {quoted(folder_name)} must match skill name {quoted(name)}",
            )
        )
    return found


def description_problems(value: PlainData) -> list[tuple[Code, str]]:
    """``skills-ref``'s description checks (the length is of the raw, unstripped text)."""
    if not value or not isinstance(value, str) or not value.strip():
        return [(Code.DESCRIPTION_EMPTY, "Field 'description' must be a non-empty string")]
    if len(value) > MAX_DESCRIPTION_LENGTH:
        return [
            (
                Code.DESCRIPTION_TOO_LONG,
                f"Description exceeds {MAX_DESCRIPTION_LENGTH} character limit "
                f"({len(value)} chars)",
            )
        ]
    return []


def compatibility_problems(value: PlainData) -> list[tuple[Code, str]]:
    """``skills-ref``'s compatibility checks."""
    if not isinstance(value, str):
        return [(Code.COMPATIBILITY_NOT_STRING, "Field 'compatibility' must be a string")]
    if len(value) > MAX_COMPATIBILITY_LENGTH:
        return [
            (
                Code.COMPATIBILITY_TOO_LONG,
                f"Compatibility exceeds {MAX_COMPATIBILITY_LENGTH} character limit "
                f"({len(value)} chars)",
            )
        ]
    return []
