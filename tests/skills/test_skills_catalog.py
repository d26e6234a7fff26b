"""The catalog: precedence and shadowing, incremental refresh, diagnostics, rendering cache."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from plait.errors import ConfigurationError
from plait.skills import (
    Code,
    DiscoveryItem,
    FilesystemSource,
    MemorySource,
    Precedence,
    PromptFormat,
    Severity,
    SkillCatalog,
    SkillFileStat,
    SkillNotFound,
    SkillRef,
)

MakeMd = Callable[..., str]


def memory(source_id: str, make_md: MakeMd, **skills: str) -> MemorySource:
    """``memory("user", make_md, pdf="Desc")``: skills named like their ids."""
    return MemorySource(
        {sid: {"SKILL.md": make_md(sid, desc)} for sid, desc in skills.items()},
        source_id=source_id,
    )


# --- precedence ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precedence", "winner", "loser", "active"),
    [
        (
            Precedence.FIRST_WINS,
            "project",
            "user",
            [("project", "lint"), ("project", "pdf"), ("user", "notes")],
        ),
        (
            Precedence.LAST_WINS,
            "user",
            "project",
            [("project", "lint"), ("user", "notes"), ("user", "pdf")],
        ),
    ],
)
async def test_precedence_decides_the_winner_and_keeps_the_loser_listed(
    make_md: MakeMd,
    precedence: Precedence,
    winner: str,
    loser: str,
    active: list[tuple[str, str]],
) -> None:
    project = memory("project", make_md, pdf="Project PDF.", lint="Lint.")
    user = memory("user", make_md, pdf="User PDF.", notes="Notes.")
    catalog = SkillCatalog([project, user], precedence=precedence)
    await catalog.load()

    assert catalog.get("pdf").source_id == winner
    assert [(e.source_id, e.name) for e in catalog.active()] == active
    assert len(catalog.entries()) == 4
    [shadowed] = [e for e in catalog.entries() if e.shadowed]
    assert shadowed.ref == SkillRef(loser, "pdf")
    assert shadowed.shadowed_by == SkillRef(winner, "pdf")
    [note] = catalog.diagnostics(code=Code.NAME_SHADOWED)
    assert note.severity is Severity.INFO
    assert note.file == "/skills/pdf/SKILL.md"


async def test_same_name_within_one_source_is_shadowed_with_a_warning(
    make_md: MakeMd,
) -> None:
    source = MemorySource(
        {"a": {"SKILL.md": make_md("dup", "First.")}, "b": {"SKILL.md": make_md("dup", "Two.")}}
    )
    catalog = SkillCatalog([source])
    await catalog.load()
    assert catalog.get("dup").id == "a"
    [note] = catalog.diagnostics(code=Code.NAME_SHADOWED)
    assert note.severity is Severity.WARNING and "Rename one" in note.message


def test_source_ids_must_be_unique(make_md: MakeMd) -> None:
    with pytest.raises(ConfigurationError, match="'memory'"):
        SkillCatalog([memory("memory", make_md), memory("memory", make_md)])


async def test_get_unknown_names_the_known_skills(make_md: MakeMd) -> None:
    catalog = SkillCatalog([memory("m", make_md, pdf="x", csv="y")])
    await catalog.load()
    with pytest.raises(SkillNotFound, match=r"Known skills: csv, pdf\."):
        catalog.get("docx")


# --- refresh ------------------------------------------------------------------------------------


async def test_refresh_reports_added_changed_and_removed(tmp_path: Path, make_md: MakeMd) -> None:
    root = tmp_path / "skills"
    for name in ("keep", "edit", "gone"):
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(make_md(name))
    source = FilesystemSource(root, source_id="fs")
    catalog = SkillCatalog([source])

    first = await catalog.load()
    assert {r.id for r in first.added} == {"keep", "edit", "gone"}
    assert first.generation == catalog.generation == 1

    (root / "edit" / "SKILL.md").write_text(make_md("edit", "Edited."))
    (root / "new").mkdir()
    (root / "new" / "SKILL.md").write_text(make_md("new"))
    for path in (root / "gone").iterdir():
        path.unlink()
    (root / "gone").rmdir()
    result = await catalog.refresh()

    assert result.added == (SkillRef("fs", "new"),)
    assert result.changed == (SkillRef("fs", "edit"),)
    assert result.removed == (SkillRef("fs", "gone"),)
    assert result.generation == 2
    assert source.last_scan.parsed == 2
    assert catalog.get("edit").description == "Edited."
    assert [e.name for e in catalog.active()] == ["edit", "keep", "new"]


async def test_refresh_with_nothing_changed_reads_nothing_and_keeps_the_generation(
    tmp_path: Path, make_md: MakeMd
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "SKILL.md").write_text(make_md("a"))
    source = FilesystemSource(tmp_path)
    catalog = SkillCatalog([source])
    await catalog.load()
    rendered = catalog.render()

    result = await catalog.refresh()
    assert not result.any
    assert result.generation == 1
    assert source.last_scan.parsed == 0
    assert catalog.render() is rendered


async def test_render_is_cached_per_generation_and_changes_with_it(make_md: MakeMd) -> None:
    source = memory("m", make_md, pdf="PDF.")
    catalog = SkillCatalog([source])
    await catalog.load()
    before = catalog.render(PromptFormat.XML)
    assert catalog.render(PromptFormat.XML) is before
    source.put("csv", {"SKILL.md": make_md("csv", "CSV.")})
    await catalog.refresh()
    assert catalog.generation == 2
    assert "csv" in catalog.render(PromptFormat.XML) and "csv" not in before


async def test_skills_hidden_from_the_model_are_left_out_of_render(make_md: MakeMd) -> None:
    hidden = make_md("deploy", "Deploys.", **{"disable-model-invocation": "true"})
    catalog = SkillCatalog([MemorySource({"deploy": {"SKILL.md": hidden}})])
    await catalog.load()
    assert catalog.render() == ""
    assert "deploy" in catalog.render(include_hidden=True)
    assert catalog.get("deploy").name == "deploy"


# --- failures and diagnostics -------------------------------------------------------------------


class FlakySource:
    """A source whose discovery fails on demand."""

    def __init__(self, inner: MemorySource) -> None:
        self.inner = inner
        self.fail = False

    @property
    def id(self) -> str:
        return "flaky"

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        if self.fail:
            raise OSError("network down")
        async for item in self.inner.discover():
            yield item

    async def read(self, ref: str, path: str | None = None) -> bytes:
        return await self.inner.read(ref, path)

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat:
        return await self.inner.stat(ref, path)

    async def list(self, ref: str) -> list[str]:
        return await self.inner.list(ref)


async def test_a_failing_source_keeps_its_last_skills_and_records_an_error(
    make_md: MakeMd, tmp_path: Path
) -> None:
    flaky = FlakySource(memory("inner", make_md, pdf="PDF."))
    missing = FilesystemSource(tmp_path / "missing", source_id="missing")
    catalog = SkillCatalog([flaky, missing, memory("ok", make_md, csv="CSV.")])
    await catalog.load()
    assert [e.name for e in catalog.active()] == ["pdf", "csv"]
    [missing_error] = catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE)
    assert "does not exist" in missing_error.message

    flaky.fail = True
    result = await catalog.refresh()
    assert not result.removed
    assert [e.name for e in catalog.active()] == ["pdf", "csv"]
    errors = catalog.diagnostics(min_severity=Severity.ERROR)
    assert [d.code for d in errors] == [Code.SOURCE_UNAVAILABLE] * 2
    assert "network down" in errors[0].message
    assert result.generation == 2


async def test_broken_skills_are_kept_as_problems_with_queryable_diagnostics(
    make_md: MakeMd,
) -> None:
    source = MemorySource(
        {
            "good": {"SKILL.md": make_md("good")},
            "warned": {"SKILL.md": make_md("Warned Name")},
            "broken": {"SKILL.md": "---\nname: broken\n"},
        },
        source_id="m",
    )
    other = memory("other", make_md, fine="Fine.")
    catalog = SkillCatalog([source, other])
    await catalog.load()
    assert [e.name for e in catalog.active()] == ["good", "Warned Name", "fine"]
    [problem] = catalog.problems()
    assert problem.id == "broken"
    assert [d.code for d in catalog.diagnostics(min_severity=Severity.ERROR)] == [
        Code.FRONTMATTER_NOT_CLOSED
    ]
    warnings = catalog.diagnostics(min_severity=Severity.WARNING, source_id="m")
    assert {d.code for d in warnings} >= {Code.NAME_NOT_LOWERCASE, Code.NAME_FOLDER_MISMATCH}
    assert catalog.diagnostics(source_id="other") == []


async def test_load_skill_and_read_go_through_the_entry_source(make_md: MakeMd) -> None:
    source = MemorySource(
        {
            "pdf": {
                "SKILL.md": make_md("pdf"),
                "scripts/a.py": "a",
                "references/R.md": "r",
                "assets/t.txt": "t",
                "notes.txt": "n",
            }
        }
    )
    catalog = SkillCatalog([source])
    await catalog.load()
    skill = await catalog.load_skill("pdf")
    assert skill.body == "# pdf\n\nInstructions."
    assert skill.resources_by_kind() == {
        "scripts": ["scripts/a.py"],
        "references": ["references/R.md"],
        "assets": ["assets/t.txt"],
        "other": ["notes.txt"],
    }
    assert await catalog.read(SkillRef("memory", "pdf"), "scripts/a.py") == b"a"
    assert catalog.find(SkillRef("memory", "nope")) is None
