"""Arbitrary input as SKILL.md only ever yields diagnostics, never an untyped exception."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait.skills import (
    Diagnostic,
    DiscoveryProblem,
    SkillEntry,
    SkillMeta,
    ValidationMode,
    check_skill_md,
)
from plait.skills.render import render_markdown, render_xml
from plait.skills.sources import assess_skill_md

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_fragments = st.sampled_from(
    [
        "---",
        "--- ",
        "name: x",
        "name:",
        "description: Use when: y",
        "description: |",
        "  line",
        "\tname: t",
        "metadata:",
        "  a: b",
        "  - c",
        "allowed-tools: [a, b",
        "&a x",
        "*a",
        "!!python/object:os.system x",
        "? [a]",
        ": v",
        "'unclosed",
        '"\\q"',
        "\ufeff",
        "\r",
        "...",
        "%YAML 1.1",
        "key: 2024-13-45",
        "{",
        "[" * 40,
        "- " * 50,
        "\x00",
    ]
)
_skill_text = st.lists(st.one_of(_fragments, st.text(max_size=30)), max_size=20).map("\n".join)


def _assert_only_diagnostics(data: bytes | str, folder: str | None) -> None:
    for mode in ValidationMode:
        check = check_skill_md(data, folder_name=folder, file="f/SKILL.md", mode=mode)
        assert all(isinstance(d, Diagnostic) for d in check.diagnostics)
        assert isinstance(check.body, str)
        if check.meta is None:
            assert any(d.is_error for d in check.diagnostics)
        else:
            assert isinstance(check.meta, SkillMeta)
            assert check.meta.name.strip() and check.meta.description.strip()


@FUZZ
@given(data=st.binary(max_size=2000), folder=st.one_of(st.none(), st.text(max_size=20)))
def test_arbitrary_bytes_yield_only_diagnostics(data: bytes, folder: str | None) -> None:
    _assert_only_diagnostics(data, folder)


@FUZZ
@given(text=_skill_text, folder=st.sampled_from(["x", "my-skill", ""]))
def test_skill_shaped_text_yields_only_diagnostics(text: str, folder: str) -> None:
    _assert_only_diagnostics(text, folder)
    _assert_only_diagnostics("---\n" + text + "\n---\nbody", folder)


@FUZZ
@given(text=_skill_text)
def test_discovery_of_any_file_gives_an_entry_or_a_problem_and_renders(text: str) -> None:
    data = ("---\n" + text + "\n---\n").encode("utf-8", errors="replace")
    item = assess_skill_md(
        data, source_id="s", skill_id="x", folder_name="x", location="/skills/x/SKILL.md"
    )
    assert isinstance(item, (SkillEntry, DiscoveryProblem))
    if isinstance(item, SkillEntry):
        assert "\n" not in render_markdown([item])
        assert render_xml([item]).startswith("<available_skills>\n<skill>")
    else:
        assert any(d.is_error for d in item.diagnostics)
