"""Prompt rendering: Markdown lines, XML identical to skills-ref to-prompt, character budgets."""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import skills_ref
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.skills import FilesystemSource, PromptFormat, SkillCatalog, SkillEntry, SkillMeta
from plait.skills.render import (
    DEFAULT_NAMES_INTRO,
    FittedPrompt,
    fit_prompt,
    markdown_line,
    render_markdown,
    render_prompt,
    render_xml,
)

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


# --- the names tier ---------------------------------------------------------------------------

_names = st.one_of(
    st.from_regex(r"[a-z0-9][a-z0-9-]{0,29}", fullmatch=True),
    st.sampled_from(["a&b", "x, y", 'say "hi"', "unicodé", "tab\there", "<tag>"]),
)
_entries = st.lists(st.builds(entry, _names, st.text(min_size=1, max_size=300)), max_size=60).map(
    lambda items: list({e.name: e for e in items}.values())
)


def split_names(text: str) -> list[str]:
    """The names of a names-tier list: bare, or JSON strings (which may hold ``, ``)."""
    names: list[str] = []
    decoder, at = json.JSONDecoder(), 0
    while at < len(text):
        if text[at] == '"':
            name, at = decoder.raw_decode(text, at)
        else:
            end = text.find(", ", at)
            end = len(text) if end < 0 else end
            name, at = text[at:end], end
        names.append(name)
        at += 2
    return names


def _overflow(count: int) -> str:
    return f"- ({count} more skill{'s' if count != 1 else ''} not listed here. Go.)"


@settings(max_examples=300, deadline=None)
@given(
    entries=_entries,
    budget=st.integers(1, 6_000),
    share=st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9]),
    keep=st.integers(0, 5),
)
def test_the_names_tier_never_exceeds_the_budget_and_keeps_the_order(
    entries: list[SkillEntry], budget: int, share: float, keep: int
) -> None:
    fitted = fit_prompt(entries, budget=budget, overflow_hint="Go.", names_share=share, keep=keep)
    described, named, total = fitted.described, fitted.named, fitted.total
    lines = fitted.text.split("\n") if fitted.text else []
    assert total == len(entries) and described + named <= total
    assert fitted == fit_prompt(
        entries, budget=budget, overflow_hint="Go.", names_share=share, keep=keep
    )
    if described + named:
        assert len(fitted.text) <= budget
    assert lines[:described] == [markdown_line(e) for e in entries[:described]]
    rest = total - described - named
    assert (lines[-1] == _overflow(rest)) if rest else not fitted.text.endswith("Go.)")
    if named:
        intro = f"- {DEFAULT_NAMES_INTRO}: "
        assert lines[described].startswith(intro)
        shown = split_names(lines[described][len(intro) :])
        assert shown == [" ".join(e.name.split()) for e in entries[described : described + named]]
    if share == 0:
        assert named == 0 and fitted.text == render_markdown(
            entries, budget=budget, overflow_hint="Go."
        )
    if described < total and described >= keep:  # no room to describe one more skill
        limit = budget - int(budget * share)
        more = "\n".join([*lines[:described], markdown_line(entries[described])])
        assert len(more) + 1 + len(_overflow(total - described - 1)) > limit or (
            described + 1 == total
        )
    whole = render_markdown(entries)
    assert fitted.complete == (len(whole) <= budget)
    if fitted.complete:
        assert fitted.text == whole


@settings(max_examples=200, deadline=None)
@given(
    entries=_entries,
    budget=st.integers(1, 8_000),
    share=st.sampled_from([0.0, 0.25, 0.5]),
    keep=st.integers(0, 3),
)
def test_the_xml_names_tier_never_exceeds_the_budget_and_counts_the_rest(
    entries: list[SkillEntry], budget: int, share: float, keep: int
) -> None:
    fitted = fit_prompt(
        entries, PromptFormat.XML, budget=budget, overflow_hint="Go.", names_share=share, keep=keep
    )
    text, rest = fitted.text, fitted.total - fitted.described - fitted.named
    if fitted.described + fitted.named:
        assert len(text) <= budget
    assert text.startswith("<available_skills>") and text.endswith("</available_skills>")
    assert text.count("\n<skill>\n") == fitted.described
    tier = [line for line in text.split("\n") if line.startswith("<skill_names>")]
    assert len(tier) == (1 if fitted.named else 0)
    if tier:
        shown = split_names(html.unescape(tier[0].removesuffix("</skill_names>")).split(": ", 1)[1])
        assert shown == [
            " ".join(e.name.split()) for e in entries[fitted.described :][: fitted.named]
        ]
    assert (f'<more_skills count="{rest}">' in text) == (rest > 0)


def test_a_catalog_within_its_budget_has_no_names_tier() -> None:
    skills = [entry(f"s{i}") for i in range(5)]
    for format in PromptFormat:
        full = render_prompt(skills, format)
        assert render_prompt(skills, format, budget=len(full), names_share=0.5) == full


def test_named_skills_are_escaped_and_quoted_in_xml_and_the_rest_counted() -> None:
    skills = [entry("first", "d" * 200), entry("a&b"), entry("x, y"), entry("plain")]

    def fit(keep: int) -> FittedPrompt:
        return fit_prompt(
            skills,
            PromptFormat.XML,
            budget=620,
            names_share=0.5,
            names_intro="Also <these>",
            keep=keep,
        )

    assert (fit(0).described, fit(0).named) == (0, 4)  # the described part leaves half free
    fitted = fit(1)  # ...but a kept skill may use the whole budget
    assert (fitted.described, fitted.named, fitted.total) == (1, 3, 4)
    assert fitted.text.endswith(
        "\n<skill_names>Also &lt;these&gt;: &quot;a&amp;b&quot;, &quot;x, y&quot;, plain"
        "</skill_names>\n</available_skills>"
    )
    assert "<more_skills" not in fitted.text and len(fitted.text) <= 620
