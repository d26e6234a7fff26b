"""SKILL.md splitting and lenient parsing: every robustness case the issue lists, one test each."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from plait.skills import Code, Severity, SkillCheck, SkillMeta, check_skill_md
from plait.skills.frontmatter import Frontmatter, FrontmatterProblem, read_lenient
from plait.skills.lenient import split_allowed_tools
from plait.skills.parser import split_skill_md

BASIC = "---\nname: pdf\ndescription: Reads PDFs.\n---\n# PDF\n\nBody.\n"


def lenient(data: str | bytes, folder: str | None = "pdf") -> SkillCheck:
    return check_skill_md(data, folder_name=folder, file="pdf/SKILL.md")


def codes(check: SkillCheck) -> list[Code]:
    return [d.code for d in check.diagnostics]


# --- splitting ----------------------------------------------------------------------------------


def test_split_gives_frontmatter_as_skills_ref_sees_it_and_the_body() -> None:
    parts = split_skill_md(BASIC)
    assert parts.frontmatter == "\nname: pdf\ndescription: Reads PDFs.\n"
    assert parts.body == "# PDF\n\nBody."
    assert (parts.opening_line, parts.body_line, parts.closed) == (1, 5, True)


def test_byte_order_mark_parses() -> None:
    check = lenient(b"\xef\xbb\xbf" + BASIC.encode())
    assert check.meta == SkillMeta(name="pdf", description="Reads PDFs.")
    assert codes(check) == [Code.BYTE_ORDER_MARK]
    assert check.diagnostics[0].severity is Severity.INFO


def test_crlf_line_ends_parse() -> None:
    check = lenient(BASIC.replace("\n", "\r\n").encode())
    assert check.meta == SkillMeta(name="pdf", description="Reads PDFs.")
    assert check.body == "# PDF\n\nBody."
    assert check.diagnostics == ()


def test_blank_lines_before_the_opening_delimiter_parse_with_a_warning() -> None:
    check = lenient("\n  \n" + BASIC)
    assert check.meta == SkillMeta(name="pdf", description="Reads PDFs.")
    [warning] = check.diagnostics
    assert (warning.code, warning.severity) == (Code.LEADING_BLANK_LINES, Severity.WARNING)
    assert split_skill_md("\n  \n" + BASIC).opening_line == 3


def test_closing_delimiter_at_end_of_file_parses() -> None:
    check = lenient("---\nname: pdf\ndescription: Reads PDFs.\n---")
    assert check.meta == SkillMeta(name="pdf", description="Reads PDFs.")
    assert check.body == ""
    assert check.diagnostics == ()


def test_dashes_inside_a_value_are_content() -> None:
    check = lenient("---\nname: pdf\ndescription: a---b --- c\n---\nbody\n")
    assert check.meta is not None
    assert check.meta.description == "a---b --- c"


def test_indented_dashes_inside_a_block_scalar_are_content() -> None:
    check = lenient("---\nname: pdf\ndescription: |\n  first\n  ---\n  last\n---\nbody\n")
    assert check.meta is not None
    assert check.meta.description == "first\n---\nlast"
    assert check.body == "body"


def test_unquoted_colon_in_a_value_is_retried_as_a_quoted_scalar() -> None:
    check = lenient("---\nname: pdf\ndescription: Use when: the user mentions PDFs\n---\n")
    assert check.meta is not None
    assert check.meta.description == "Use when: the user mentions PDFs"
    [warning] = check.diagnostics
    assert (warning.code, warning.line) == (Code.YAML_UNQUOTED_COLON, 3)


def test_unquoted_colon_retry_escapes_quotes_and_backslashes() -> None:
    text = '---\nname: pdf\ndescription: Note: say "hi" \\o/\n---\n'
    check = lenient(text)
    assert check.meta is not None
    assert check.meta.description == 'Note: say "hi" \\o/'


def test_unquoted_colon_in_a_metadata_value_is_retried_too() -> None:
    check = lenient("---\nname: pdf\ndescription: d\nmetadata:\n  usage: run: now\n---\n")
    assert check.meta is not None
    assert dict(check.meta.metadata) == {"usage": "run: now"}
    assert [d.line for d in check.diagnostics] == [5]


def test_value_starting_with_a_reserved_indicator_is_retried() -> None:
    check = lenient("---\nname: pdf\ndescription: @pdf helps with PDFs\n---\n")
    assert check.meta is not None
    assert check.meta.description == "@pdf helps with PDFs"


def test_yaml_that_stays_broken_is_an_error() -> None:
    check = lenient("---\nname: pdf\ndescription: 'unclosed\n---\nbody\n")
    assert check.meta is None
    [error] = check.diagnostics
    assert error.code is Code.INVALID_YAML
    assert error.severity is Severity.ERROR
    assert "not valid YAML" in error.message


def test_unclosed_frontmatter_is_an_error_with_its_line() -> None:
    check = lenient("\n---\nname: pdf\ndescription: d\n")
    assert check.meta is None
    assert [(d.code, d.line) for d in check.diagnostics] == [
        (Code.LEADING_BLANK_LINES, 1),
        (Code.FRONTMATTER_NOT_CLOSED, 2),
    ]


def test_invalid_utf8_is_decoded_with_replacement_and_a_warning() -> None:
    check = lenient(b"---\nname: pdf\ndescription: caf\xe9\n---\n")
    assert check.meta is not None
    assert check.meta.description == "caf\ufffd"
    assert [(d.code, d.line) for d in check.diagnostics] == [(Code.NOT_UTF8, 3)]


# --- fields -------------------------------------------------------------------------------------


def test_every_spec_field_and_extras_are_read() -> None:
    text = (
        "---\n"
        "name: pdf\n"
        "description: >\n  Reads PDFs.\n  Use for forms.\n"
        "license: Apache-2.0\n"
        "compatibility: Python 3.11+\n"
        "metadata:\n  author: me\n  version: 1.10\n"
        "allowed-tools: Bash(git add:*) Read\n"
        "disable-model-invocation: true\n"
        "argument-hint: '[file]'\n"
        "tags: [a, b]\n"
        "---\n"
    )
    check = lenient(text)
    assert check.meta == SkillMeta(
        name="pdf",
        description="Reads PDFs. Use for forms.",
        license="Apache-2.0",
        compatibility="Python 3.11+",
        metadata={"author": "me", "version": "1.10"},
        allowed_tools=("Bash(git add:*)", "Read"),
        extra={"disable-model-invocation": True, "argument-hint": "[file]", "tags": ["a", "b"]},
    )
    assert not check.meta.model_invocable
    by_code = {d.code: d for d in check.diagnostics}
    assert by_code[Code.CLIENT_FIELD].severity is Severity.INFO
    assert by_code[Code.UNKNOWN_FIELD].severity is Severity.WARNING
    assert by_code[Code.UNKNOWN_FIELD].line == 14


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Read Grep", ("Read", "Grep")),
        ("Read, Grep,Glob", ("Read", "Grep", "Glob")),
        ("Bash(git add:*) Bash(jq:*)", ("Bash(git add:*)", "Bash(jq:*)")),
        ("\n  - Read\n  - Bash(git:*)", ("Read", "Bash(git:*)")),
        ("[Read, Grep]", ("Read", "Grep")),
        ("''", ()),
    ],
)
def test_allowed_tools_string_or_list(value: str, expected: tuple[str, ...]) -> None:
    check = lenient(f"---\nname: pdf\ndescription: d\nallowed-tools: {value}\n---\n")
    assert check.meta is not None
    assert check.meta.allowed_tools == expected


def _split_char_by_char(text: str) -> tuple[str, ...]:
    """The allowed-tools rule spelled out one character at a time: whitespace and commas split,
    except inside parentheses; an unmatched ``)`` is text."""
    tools: list[str] = []
    current = ""
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        if depth == 0 and (char.isspace() or char == ","):
            if current:
                tools.append(current)
            current = ""
            continue
        current += char
    if current:
        tools.append(current)
    return tuple(tools)


@given(st.text(alphabet="Ba(),: *\t\n\u00a0\u2003\x1c\x85", max_size=30))
@example("Bash(git add:*), Read)  Grep((x y)")
@example(")) a (")
def test_allowed_tools_split_matches_the_rule_character_by_character(text: str) -> None:
    assert split_allowed_tools(text) == _split_char_by_char(text)


def test_allowed_tools_mapping_is_ignored_with_a_warning() -> None:
    check = lenient("---\nname: pdf\ndescription: d\nallowed-tools:\n  a: b\n---\n")
    assert check.meta is not None and check.meta.allowed_tools is None
    assert codes(check) == [Code.ALLOWED_TOOLS_INVALID]


def test_metadata_that_is_not_a_mapping_is_ignored_with_a_warning() -> None:
    check = lenient("---\nname: pdf\ndescription: d\nmetadata: just text\n---\n")
    assert check.meta is not None and dict(check.meta.metadata) == {}
    assert codes(check) == [Code.METADATA_NOT_MAPPING]


def test_license_that_is_not_a_string_is_ignored_with_a_warning() -> None:
    check = lenient("---\nname: pdf\ndescription: d\nlicense:\n  - MIT\n---\n")
    assert check.meta is not None and check.meta.license is None
    assert codes(check) == [Code.LICENSE_NOT_STRING]


def test_duplicate_fields_keep_the_last_value_with_a_warning() -> None:
    check = lenient("---\nname: pdf\ndescription: one\ndescription: two\n---\n")
    assert check.meta is not None and check.meta.description == "two"
    assert [(d.code, d.line) for d in check.diagnostics] == [(Code.DUPLICATE_FIELD, 4)]


def test_frontmatter_that_is_a_list_is_an_error() -> None:
    check = lenient("---\n- a\n- b\n---\nbody\n")
    assert check.meta is None
    assert codes(check) == [Code.FRONTMATTER_NOT_MAPPING]


def test_read_lenient_reports_key_lines() -> None:
    result = read_lenient("\n# comment\nname: x\n\ndescription: y\n")
    assert isinstance(result, Frontmatter)
    assert result.lines == {"name": 2, "description": 4}
    assert isinstance(read_lenient("\n[unclosed\n"), FrontmatterProblem)
