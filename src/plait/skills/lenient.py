"""Lenient loading: keep every skill a name and a description can honestly be recovered for.

Recovery rules (each leaves a warning that says what was recovered and how):

* no frontmatter at all → the folder name and the first paragraph of the body (Claude Code);
* no ``name`` (or an empty one) → the folder name;
* no ``description`` (or an empty one) → the first paragraph of the body;
* YAML broken by an unquoted ``: `` in a value → that value read as a quoted string.

A skill is skipped, with an error, only when no name or no description can be recovered, when
the frontmatter is never closed, or when its YAML stays unreadable. Format problems (a name with
capitals, a name that differs from the folder, over-long fields, unknown keys) are warnings.
"""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from plait.errors import quoted
from plait.skills.description import first_paragraph
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.frontmatter import (
    Frontmatter,
    FrontmatterProblem,
    node_python,
    node_text,
    read_lenient,
)
from plait.skills.model import SPEC_FIELDS, SkillMeta
from plait.skills.parser import SkillMarkdown
from plait.skills.rules import (
    compatibility_problems,
    description_problems,
    name_problems,
)

__all__ = ["CLIENT_FIELDS", "build_lenient", "first_paragraph", "split_allowed_tools"]

CLIENT_FIELDS = frozenset(
    {
        "argument-hint",
        "disable-model-invocation",
        "user-invocable",
        "model",
        "effort",
        "context",
        "agent",
        "hooks",
    }
)
"""Claude Code's frontmatter extensions: kept in ``extra`` with an info, not a warning."""

_TOOL_SEPARATOR_RUNS = re.compile(r"[\s,]+")
_TOOL_MARKS = re.compile(r"[()\s,]")


class _Findings:
    """Diagnostics for one file; YAML lines are turned into file lines."""

    def __init__(self, file: str | None, opening_line: int) -> None:
        self.file = file
        self.opening_line = opening_line
        self.items: list[Diagnostic] = []

    def add(
        self,
        severity: Severity,
        code: Code,
        message: str,
        yaml_line: int | None = None,
        *,
        line: int | None = None,
    ) -> None:
        if line is None and yaml_line is not None:
            line = self.opening_line + yaml_line
        self.items.append(Diagnostic(severity, code, message, self.file, line))


def build_lenient(
    markdown: SkillMarkdown, folder_name: str | None, file: str | None
) -> tuple[SkillMeta | None, list[Diagnostic]]:
    """The skill's metadata (``None`` if unusable) and every diagnostic found. Never raises."""
    found = _Findings(file, markdown.opening_line)
    _file_quirks(markdown, found)
    if markdown.frontmatter is None:
        return _without_frontmatter(markdown, folder_name, found), found.items
    if not markdown.closed:
        found.add(
            Severity.ERROR,
            Code.FRONTMATTER_NOT_CLOSED,
            f"The frontmatter opened on line {markdown.opening_line} is never closed; skipped "
            "the skill. Add a line '---' after the last frontmatter field.",
            line=markdown.opening_line,
        )
        return None, found.items
    frontmatter = read_lenient(markdown.frontmatter)
    if isinstance(frontmatter, FrontmatterProblem):
        _report_problem(frontmatter, found)
        return None, found.items
    return _from_frontmatter(frontmatter, markdown, folder_name, found), found.items


def _file_quirks(markdown: SkillMarkdown, found: _Findings) -> None:
    if markdown.invalid_utf8_line is not None:
        found.add(
            Severity.WARNING,
            Code.NOT_UTF8,
            "SKILL.md is not valid UTF-8; undecodable bytes were replaced with U+FFFD. "
            "Save the file as UTF-8.",
            line=markdown.invalid_utf8_line,
        )
    if markdown.has_bom:
        found.add(
            Severity.INFO,
            Code.BYTE_ORDER_MARK,
            "SKILL.md starts with a UTF-8 byte-order mark; ignored it.",
            line=1,
        )
    if markdown.leading_blank_lines and markdown.frontmatter is not None:
        found.add(
            Severity.WARNING,
            Code.LEADING_BLANK_LINES,
            f"{markdown.leading_blank_lines} blank line(s) before the opening '---'; ignored "
            "them. Remove them: stricter tools (skills-ref) reject the file.",
            line=1,
        )


def _report_problem(problem: FrontmatterProblem, found: _Findings) -> None:
    if problem.kind == "not-mapping":
        found.add(
            Severity.ERROR,
            Code.FRONTMATTER_NOT_MAPPING,
            f"Skipped the skill: {problem.message}. Write the frontmatter as "
            "'name: ...' and 'description: ...' lines.",
            problem.line,
        )
        return
    if problem.kind == "too-large":
        found.add(
            Severity.ERROR,
            Code.YAML_TOO_LARGE,
            f"Skipped the skill: its frontmatter was not read because {problem.message}. "
            "Write plain 'key: value' fields without anchors (&) and aliases (*).",
            problem.line,
        )
        return
    found.add(
        Severity.ERROR,
        Code.INVALID_YAML,
        f"Skipped the skill: its frontmatter is not valid YAML ({problem.message}). "
        "Fix the YAML; quote values that contain ': '.",
        problem.line,
    )


def _usable(folder_name: str | None) -> str | None:
    """The folder name if it can stand in for a missing skill name (not blank), else None."""
    return folder_name if folder_name and folder_name.strip() else None


def _without_frontmatter(
    markdown: SkillMarkdown, folder_name: str | None, found: _Findings
) -> SkillMeta | None:
    paragraph = first_paragraph(markdown.body)
    folder_name = _usable(folder_name)
    if not folder_name or not paragraph:
        missing = "no paragraph in the body" if folder_name else "no folder name"
        found.add(
            Severity.ERROR,
            Code.NO_FRONTMATTER,
            f"SKILL.md has no YAML frontmatter and {missing} to recover a name and a "
            "description from; skipped. Start the file with '---', 'name: ...', "
            "'description: ...', '---'.",
            line=1,
        )
        return None
    found.add(
        Severity.WARNING,
        Code.NO_FRONTMATTER,
        f"SKILL.md has no YAML frontmatter; using the folder name {folder_name!r} as the name "
        "and the first paragraph of the body as the description. Add a frontmatter block "
        "('---', 'name: ...', 'description: ...', '---').",
        line=1,
    )
    _name_warnings(folder_name, folder_name, None, found)
    return SkillMeta(name=folder_name, description=paragraph)


def _from_frontmatter(
    frontmatter: Frontmatter, markdown: SkillMarkdown, folder_name: str | None, found: _Findings
) -> SkillMeta | None:
    for yaml_line in frontmatter.quoted_lines:
        found.add(
            Severity.WARNING,
            Code.YAML_UNQUOTED_COLON,
            "This value contains ': ' (or starts with '@' or '`') without quotes, which is not "
            "valid YAML; read it as a quoted string. Put the value in double quotes.",
            yaml_line,
        )
    for key, yaml_line in frontmatter.duplicates:
        found.add(
            Severity.WARNING,
            Code.DUPLICATE_FIELD,
            f"Field {quoted(key)} appears more than once; used its last value. "
            "Remove the duplicates.",
            yaml_line,
        )
    name = _name(frontmatter, folder_name, found)
    description = _description(frontmatter, markdown.body, found)
    if name is None or description is None:
        return None
    return SkillMeta(
        name=name,
        description=description,
        license=_license(frontmatter, found),
        compatibility=_compatibility(frontmatter, found),
        metadata=_metadata(frontmatter, found),
        allowed_tools=_allowed_tools(frontmatter, found),
        extra=_extra(frontmatter, found),
    )


def _absence(frontmatter: Frontmatter, key: str) -> tuple[Code, str]:
    node = frontmatter.fields.get(key)
    if node is None:
        return Code.MISSING_NAME if key == "name" else Code.MISSING_DESCRIPTION, f"no '{key}'"
    code = Code.NAME_EMPTY if key == "name" else Code.DESCRIPTION_EMPTY
    if isinstance(node, ScalarNode):
        return code, f"an empty '{key}'"
    return code, f"a '{key}' that is not a string"


def _name(frontmatter: Frontmatter, folder_name: str | None, found: _Findings) -> str | None:
    yaml_line = frontmatter.lines.get("name")
    text = (node_text(frontmatter.fields.get("name")) or "").strip()
    if text:
        _name_warnings(text, folder_name, yaml_line, found)
        return text
    code, absence = _absence(frontmatter, "name")
    folder = _usable(folder_name)
    if folder is None:
        found.add(
            Severity.ERROR,
            code,
            f"SKILL.md has {absence} and no folder to take one from; skipped. Add 'name: ...'.",
            yaml_line,
        )
        return None
    found.add(
        Severity.WARNING,
        code,
        f"SKILL.md has {absence}; using the folder name {folder!r}. "
        f"Add 'name: {folder}' to the frontmatter.",
        yaml_line,
    )
    _name_warnings(folder, folder, yaml_line, found)
    return folder


def _name_warnings(
    name: str, folder_name: str | None, yaml_line: int | None, found: _Findings
) -> None:
    for code, message in name_problems(name, folder_name):
        found.add(Severity.WARNING, code, _loaded_anyway(message), yaml_line)


def _loaded_anyway(message: str) -> str:
    return f"{message.rstrip('.')}; loaded anyway."


def _description(frontmatter: Frontmatter, body: str, found: _Findings) -> str | None:
    yaml_line = frontmatter.lines.get("description")
    raw = node_text(frontmatter.fields.get("description"))
    if raw is not None and raw.strip():
        for code, message in description_problems(raw):
            found.add(Severity.WARNING, code, _loaded_anyway(message), yaml_line)
        return raw.strip()
    code, absence = _absence(frontmatter, "description")
    paragraph = first_paragraph(body)
    if not paragraph:
        found.add(
            Severity.ERROR,
            code,
            f"SKILL.md has {absence} and its body has no paragraph to use instead; skipped. "
            "Add 'description: <what the skill does and when to use it>'.",
            yaml_line,
        )
        return None
    preview = paragraph if len(paragraph) <= 60 else paragraph[:57] + "..."
    found.add(
        Severity.WARNING,
        code,
        f"SKILL.md has {absence}; using the first paragraph of the body ({preview!r}). "
        "Add a description that says what the skill does and when to use it.",
        yaml_line,
    )
    return paragraph


def _license(frontmatter: Frontmatter, found: _Findings) -> str | None:
    key = "license"
    node = frontmatter.fields.get(key)
    if node is None or isinstance(node, ScalarNode):
        text = node_text(node)
        return text.strip() if text is not None else None
    found.add(
        Severity.WARNING,
        Code.LICENSE_NOT_STRING,
        f"Field {quoted(key)} must be a string; ignored it.",
        frontmatter.lines.get(key),
    )
    return None


def _compatibility(frontmatter: Frontmatter, found: _Findings) -> str | None:
    node = frontmatter.fields.get("compatibility")
    if node is None:
        return None
    yaml_line = frontmatter.lines.get("compatibility")
    text = node_text(node)
    if text is None:
        if isinstance(node, ScalarNode):
            return None
        found.add(
            Severity.WARNING,
            Code.COMPATIBILITY_NOT_STRING,
            "Field 'compatibility' must be a string; ignored it.",
            yaml_line,
        )
        return None
    for code, message in compatibility_problems(text):
        found.add(Severity.WARNING, code, _loaded_anyway(message), yaml_line)
    return text.strip()


def _metadata(frontmatter: Frontmatter, found: _Findings) -> dict[str, str]:
    node = frontmatter.fields.get("metadata")
    if node is None or (isinstance(node, ScalarNode) and node_text(node) is None):
        return {}
    yaml_line = frontmatter.lines.get("metadata")
    if not isinstance(node, MappingNode):
        found.add(
            Severity.WARNING,
            Code.METADATA_NOT_MAPPING,
            "Field 'metadata' must be a mapping of string keys to string values; ignored it.",
            yaml_line,
        )
        return {}
    out: dict[str, str] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value) if isinstance(key_node, ScalarNode) else None
        if key is not None and isinstance(value_node, ScalarNode):
            out[key] = str(value_node.value)
            continue
        found.add(
            Severity.WARNING,
            Code.METADATA_VALUE_NOT_STRING,
            f"metadata entry {key or '?'!r} is not a 'key: string' pair; ignored it. "
            "Quote the value or flatten it.",
            key_node.start_mark.line,
        )
    return out


def _allowed_tools(frontmatter: Frontmatter, found: _Findings) -> tuple[str, ...] | None:
    node = frontmatter.fields.get("allowed-tools")
    if node is None:
        return None
    if isinstance(node, ScalarNode):
        text = node_text(node)
        return None if text is None else split_allowed_tools(text)
    if isinstance(node, SequenceNode) and all(isinstance(n, ScalarNode) for n in node.value):
        return tuple(t for n in node.value if (t := str(n.value).strip()))
    found.add(
        Severity.WARNING,
        Code.ALLOWED_TOOLS_INVALID,
        "Field 'allowed-tools' must be a space-separated string or a list of strings; ignored it.",
        frontmatter.lines.get("allowed-tools"),
    )
    return None


def _extra(frontmatter: Frontmatter, found: _Findings) -> dict[str, object]:
    extra: dict[str, object] = {}
    for key, node in frontmatter.fields.items():
        if key in SPEC_FIELDS:
            continue
        extra[key] = node_python(node)
        yaml_line = frontmatter.lines.get(key)
        if key in CLIENT_FIELDS:
            found.add(
                Severity.INFO,
                Code.CLIENT_FIELD,
                f"Field {quoted(key)} is a client extension (Claude Code), not part of the Agent "
                "Skills spec; kept it in extra.",
                yaml_line,
            )
        else:
            found.add(
                Severity.WARNING,
                Code.UNKNOWN_FIELD,
                f"Unknown frontmatter field {quoted(key)}; kept it in extra. The spec allows only "
                "name, description, license, compatibility, metadata and allowed-tools: move "
                "it under 'metadata:'.",
                yaml_line,
            )
    return extra


def split_allowed_tools(text: str) -> tuple[str, ...]:
    """Split an ``allowed-tools`` string on spaces and commas outside parentheses:
    ``"Bash(git add:*) Read, Grep"`` → ``("Bash(git add:*)", "Read", "Grep")``. A ``)``
    without its ``(`` is kept as text."""
    if "(" not in text:  # no parentheses: every separator splits
        return tuple(tool for tool in _TOOL_SEPARATOR_RUNS.split(text) if tool)
    tools: list[str] = []
    depth = start = 0
    for mark in _TOOL_MARKS.finditer(text):
        char = mark.group()
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            if mark.start() > start:
                tools.append(text[start : mark.start()])
            start = mark.end()
    if start < len(text):
        tools.append(text[start:])
    return tuple(tools)
