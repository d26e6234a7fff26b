"""Prompt rendering: Markdown lines, XML identical to skills-ref to-prompt, character budgets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import skills_ref

from plait.skills import FilesystemSource, PromptFormat, SkillCatalog, SkillEntry, SkillMeta
from plait.skills.render import render_markdown, render_xml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "skills"


def entry(
    name: str,
    description: str = "Does things.",
    *,
    license: str | None = None,
    compatibility: str | None = None,
    allowed_tools: tuple[str, ...] | None = None,
) -> SkillEntry:
    meta = SkillMeta(name, description, license, compatibility, allowed_tools=allowed_tools)
    return SkillEntry("src", name, "v1", f"/skills/{name}/SKILL.md", meta)


def test_markdown_is_one_line_per_skill_with_every_field() -> None:
    full = entry(
        "pdf",
        "Reads\n  PDFs.",
        license="MIT",
        compatibility="Python 3.11+",
        allowed_tools=("Read", "Bash(git:*)"),
    )
    assert render_markdown([full, entry("csv")]).split("\n") == [
        "- **pdf**: Reads PDFs. (license: MIT; compatibility: Python 3.11+; "
        "allowed tools: Read Bash(git:*)) — path: /skills/pdf/SKILL.md",
        "- **csv**: Does things. — path: /skills/csv/SKILL.md",
    ]
    assert render_markdown([]) == ""


def test_xml_escapes_name_and_description_but_not_location() -> None:
    text = render_xml([entry("a&b", 'Use <when> "x"')])
    assert text == (
        "<available_skills>\n<skill>\n<name>\na&amp;b\n</name>\n<description>\n"
        "Use &lt;when&gt; &quot;x&quot;\n</description>\n<location>\n/skills/a&b/SKILL.md\n"
        "</location>\n</skill>\n</available_skills>"
    )
    assert render_xml([]) == "<available_skills>\n</available_skills>"


async def test_xml_is_byte_identical_to_skills_ref_to_prompt(
    tmp_path: Path, write_skill: Callable[..., Path]
) -> None:
    write_skill("escapes", "---\nname: escapes\ndescription: 'Tom & Jerry <b> \"q\"'\n---\n")
    write_skill("folded", "---\nname: folded\ndescription: >\n  one\n  two\n---\nbody\n")
    write_skill("crlf", "---\r\nname: crlf\r\ndescription: Windows.\r\n---\r\n")
    write_skill("unicodé", "---\nname: unicodé\ndescription: Ünïcode ✓\n---\n")
    dirs = sorted(
        [*(tmp_path / "skills").iterdir(), *(p for p in EXAMPLES.iterdir() if p.is_dir())]
    )
    catalog = SkillCatalog([FilesystemSource(d, source_id=str(i)) for i, d in enumerate(dirs)])
    await catalog.load()

    assert catalog.render(PromptFormat.XML) == skills_ref.to_prompt(dirs)


def test_budget_keeps_a_deterministic_prefix_and_counts_the_rest() -> None:
    skills = [entry(f"skill-{i:02d}", "x" * 40) for i in range(30)]
    full = render_markdown(skills)
    text = render_markdown(skills, budget=len(full) // 3, overflow_hint="Use list_skills.")
    lines = text.split("\n")
    shown = len(lines) - 1
    assert len(text) <= len(full) // 3
    assert lines[:-1] == full.split("\n")[:shown]
    assert lines[-1] == f"- ({30 - shown} more skills not listed here. Use list_skills.)"
    assert render_markdown(skills, budget=len(full) // 3, overflow_hint="Use list_skills.") == text


@pytest.mark.parametrize("budget", [1, 50, 200, 777, 1500, 5000])
def test_budget_is_never_exceeded_once_the_minimal_form_fits(budget: int) -> None:
    skills = [entry(f"s{i}", "d" * (i * 7 % 90 + 1)) for i in range(40)]
    for render in (render_markdown, render_xml):
        text = render(skills, budget=budget)
        minimal = render(skills, budget=1)
        assert len(text) <= max(budget, len(minimal))
        assert text == render(skills, budget=budget)


def test_budget_larger_than_the_catalog_changes_nothing() -> None:
    skills = [entry("a"), entry("b")]
    assert render_xml(skills, budget=10_000) == render_xml(skills)
    assert render_markdown(skills, budget=10_000) == render_markdown(skills)


def test_xml_overflow_is_one_escaped_element_inside_the_block() -> None:
    skills = [entry(f"s{i}") for i in range(5)]
    text = render_xml(skills, budget=400, overflow_hint="Ask <me>.")
    assert text.startswith("<available_skills>\n") and text.endswith("\n</available_skills>")
    more = [line for line in text.split("\n") if line.startswith("<more_skills")]
    assert len(more) == 1 and "Ask &lt;me&gt;." in more[0]
    shown = text.count("<skill>")
    assert f'count="{5 - shown}"' in more[0]
