"""Lenient loading of messy real-world skills: what is recovered, how, and what is skipped."""

from __future__ import annotations

import pytest

from plait.skills import Code, Severity, SkillCheck, check_skill_md
from plait.skills.lenient import first_paragraph


def lenient(text: str, folder: str | None = "pdf-tools") -> SkillCheck:
    return check_skill_md(text, folder_name=folder, file="x/SKILL.md")


def only(check: SkillCheck, code: Code) -> str:
    [diagnostic] = [d for d in check.diagnostics if d.code is code]
    return diagnostic.message


def test_no_frontmatter_recovers_folder_name_and_first_paragraph() -> None:
    check = lenient("# PDF tools\n\nFill PDF forms and\nmerge documents.\n\n## Steps\n1. x\n")
    assert check.meta is not None
    assert (check.meta.name, check.meta.description) == (
        "pdf-tools",
        "Fill PDF forms and merge documents.",
    )
    message = only(check, Code.NO_FRONTMATTER)
    assert "folder name 'pdf-tools'" in message and "first paragraph" in message


def test_no_frontmatter_and_no_prose_is_skipped_with_an_error() -> None:
    check = lenient("# Only a heading\n\n```\ncode\n```\n")
    assert check.meta is None
    assert [(d.code, d.severity) for d in check.diagnostics] == [
        (Code.NO_FRONTMATTER, Severity.ERROR)
    ]


def test_no_frontmatter_without_a_folder_is_skipped() -> None:
    check = lenient("Some prose.\n", folder=None)
    assert check.meta is None
    assert "no folder name" in only(check, Code.NO_FRONTMATTER)


@pytest.mark.parametrize(
    ("field", "code"),
    [
        ("", Code.MISSING_DESCRIPTION),
        ("description:\n", Code.DESCRIPTION_EMPTY),
        ("description: ''\n", Code.DESCRIPTION_EMPTY),
        ("description: ~\n", Code.DESCRIPTION_EMPTY),
        ("description:\n  - a\n", Code.DESCRIPTION_EMPTY),
    ],
)
def test_missing_or_empty_description_uses_the_first_paragraph(field: str, code: Code) -> None:
    check = lenient(f"---\nname: pdf-tools\n{field}---\n# Title\n\nMerges PDFs.\n")
    assert check.meta is not None
    assert check.meta.description == "Merges PDFs."
    assert "first paragraph" in only(check, code)


def test_empty_description_and_empty_body_is_skipped() -> None:
    check = lenient("---\nname: pdf-tools\ndescription: ''\n---\n")
    assert check.meta is None
    [error] = check.diagnostics
    assert (error.code, error.severity, error.line) == (Code.DESCRIPTION_EMPTY, Severity.ERROR, 3)


@pytest.mark.parametrize(
    ("field", "code"),
    [("", Code.MISSING_NAME), ("name:\n", Code.NAME_EMPTY), ("name:\n  - a\n", Code.NAME_EMPTY)],
)
def test_missing_or_empty_name_uses_the_folder_name(field: str, code: Code) -> None:
    check = lenient(f"---\n{field}description: Merges PDFs.\n---\n")
    assert check.meta is not None
    assert check.meta.name == "pdf-tools"
    assert "folder name 'pdf-tools'" in only(check, code)


def test_missing_name_without_folder_is_skipped() -> None:
    check = lenient("---\ndescription: Merges PDFs.\n---\n", folder=None)
    assert check.meta is None
    assert [(d.code, d.severity) for d in check.diagnostics] == [
        (Code.MISSING_NAME, Severity.ERROR)
    ]


def test_missing_name_and_description_reports_both_errors() -> None:
    check = lenient("---\nlicense: MIT\n---\n", folder=None)
    assert check.meta is None
    assert {d.code for d in check.diagnostics if d.is_error} == {
        Code.MISSING_NAME,
        Code.MISSING_DESCRIPTION,
    }


def test_display_name_and_folder_mismatch_load_with_warnings() -> None:
    check = lenient("---\nname: PDF Processing\ndescription: d\n---\n")
    assert check.meta is not None and check.meta.name == "PDF Processing"
    assert check.ok
    assert {d.code for d in check.diagnostics} == {
        Code.NAME_NOT_LOWERCASE,
        Code.NAME_INVALID_CHARACTERS,
        Code.NAME_FOLDER_MISMATCH,
    }
    assert all(d.severity is Severity.WARNING and d.line == 2 for d in check.diagnostics)
    assert only(check, Code.NAME_FOLDER_MISMATCH).endswith("; loaded anyway.")


def test_over_long_fields_load_with_warnings() -> None:
    text = f"---\nname: {'n' * 70}\ndescription: {'d' * 1100}\ncompatibility: {'c' * 600}\n---\n"
    check = lenient(text, folder="n" * 70)
    assert check.meta is not None
    assert len(check.meta.description) == 1100
    assert {d.code for d in check.diagnostics} == {
        Code.NAME_TOO_LONG,
        Code.DESCRIPTION_TOO_LONG,
        Code.COMPATIBILITY_TOO_LONG,
    }


def test_compatibility_that_is_not_a_string_is_ignored() -> None:
    check = lenient("---\nname: pdf-tools\ndescription: d\ncompatibility:\n  - linux\n---\n")
    assert check.meta is not None and check.meta.compatibility is None
    assert [d.code for d in check.diagnostics] == [Code.COMPATIBILITY_NOT_STRING]


def test_typical_real_world_extras_are_kept() -> None:
    text = (
        "---\nname: pdf-tools\ndescription: d\nauthor: Jane\nversion: 1.2.0\n"
        "tags:\n  - pdf\n  - docs\n---\n"
    )
    check = lenient(text)
    assert check.meta is not None
    assert dict(check.meta.extra) == {"author": "Jane", "version": "1.2.0", "tags": ["pdf", "docs"]}
    assert [d.code for d in check.diagnostics] == [Code.UNKNOWN_FIELD] * 3


def test_extra_value_that_cannot_be_constructed_falls_back_to_its_text() -> None:
    check = lenient("---\nname: pdf-tools\ndescription: d\nreleased: 2024-13-45\n---\n")
    assert check.meta is not None
    assert check.meta.extra == {"released": "2024-13-45"}


def test_first_paragraph_skips_headings_fences_and_comments() -> None:
    body = "<!-- note -->\n# Title\n```\ncode\n```\n\nReal  prose\nhere.\n\nNext.\n"
    assert first_paragraph(body) == "Real prose here."
    assert first_paragraph("# Only\n## Headings\n") == ""


def test_first_paragraph_is_cut_at_a_word_to_the_limit() -> None:
    text = first_paragraph("word " * 400, limit=100)
    assert len(text) <= 100 and text.endswith("...")


@pytest.mark.parametrize(
    "fields",
    [
        "**Name**: sample-text-processor **Tier**: BASIC **Version**: 1.0",
        "**Name**: sample-text-processor\n**Tier**: BASIC",
        "__Version:__ 1.0",
        "**Name:** sample-text-processor **Tier:** BASIC",
    ],
)
def test_first_paragraph_skips_a_field_list_of_bold_labels(fields: str) -> None:
    # Before: the field list itself became the inferred description.
    body = f"# Sample\n\n{fields}\n\nProcesses sample text files.\n"
    assert first_paragraph(body) == "Processes sample text files."
    check = lenient(body, folder="sample-text-processor")
    assert check.meta is not None and check.meta.description == "Processes sample text files."
    assert first_paragraph(fields) == " ".join(fields.split())  # nothing else: better than ""


def test_one_bold_label_before_a_sentence_is_prose() -> None:
    assert first_paragraph("**Note**: merges PDFs.\n\nMore.\n") == "**Note**: merges PDFs."
