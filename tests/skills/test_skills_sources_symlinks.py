"""SKILL.md symlinks: readable wherever discovery accepts them; one that leaves its folder, loops
or dangles is a reported problem for that skill alone (in the catalog, when pinned, in
``plait skills show``), never a dead entry or a failed source."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait import Agent, ScriptedModel
from plait.backends import MemoryBackend
from plait.cli.app import app
from plait.paths import PathEscapeError
from plait.skills import (
    BackendSource,
    Code,
    DiscoveryProblem,
    FilesystemSource,
    SkillCatalog,
    SkillsMiddleware,
)

Writer = Callable[..., Path]


def md(name: str) -> str:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\nBody of {name}.\n"


@pytest.fixture
def root_with_sideways_link(tmp_path: Path, write_skill: Writer) -> Path:
    """``pdf/SKILL.md`` is a symlink to a file inside the root but outside the pdf folder."""
    root = write_skill("good").parent
    (root / "shared").mkdir()
    (root / "shared" / "pdf.md").write_text(md("pdf"))
    (root / "pdf").mkdir()
    (root / "pdf" / "SKILL.md").symlink_to(root / "shared" / "pdf.md")
    return root


async def test_skill_md_symlink_leaving_its_folder_is_a_reported_problem_not_a_dead_entry(
    root_with_sideways_link: Path,
) -> None:
    # Reads are confined to the skill folder, so discovery must refuse what reads refuse:
    # before, "pdf" was listed but every read of it raised PathEscapeError.
    catalog = SkillCatalog([FilesystemSource(root_with_sideways_link)])
    await catalog.load()
    assert [e.name for e in catalog.entries()] == ["good"]
    [problem] = [p for p in catalog.problems() if p.id == "pdf"]
    assert isinstance(problem, DiscoveryProblem)
    assert problem.diagnostics[0].code is Code.PATH_ESCAPE
    assert "outside its skill folder" in problem.diagnostics[0].message
    for entry in catalog.entries():  # everything listed can be read
        assert await catalog.read(entry)


async def test_skill_md_symlink_inside_its_folder_still_loads(
    write_skill: Writer,
) -> None:
    root = write_skill("good").parent
    (root / "pdf" / "docs").mkdir(parents=True)
    (root / "pdf" / "docs" / "main.md").write_text(md("pdf"))
    (root / "pdf" / "SKILL.md").symlink_to(root / "pdf" / "docs" / "main.md")
    catalog = SkillCatalog([FilesystemSource(root)])
    await catalog.load()
    assert [e.name for e in catalog.entries()] == ["good", "pdf"]
    assert await catalog.read("pdf") == b"Body of pdf."


async def test_pinning_such_a_skill_is_a_not_found_error_naming_the_known_skills(
    root_with_sideways_link: Path,
) -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, middleware=[SkillsMiddleware(sources=[root_with_sideways_link])])
    with pytest.raises(LookupError, match="Known skills: good"):
        await agent.run("go", state={"pinned_skills": ["pdf"]})


def test_cli_show_reports_it_as_rejected_instead_of_a_traceback(
    root_with_sideways_link: Path,
) -> None:
    result = CliRunner().invoke(
        app, ["skills", "show", "pdf", "--from", str(root_with_sideways_link)]
    )
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "path-escape" in result.output


class _EscapingBackend(MemoryBackend):
    """A backend whose ``bad`` SKILL.md became an escaping symlink after it was listed (a
    local backend raises ``PathEscapeError`` for that)."""

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        if path.startswith("skills/bad/"):
            raise PathEscapeError(path, "it resolves outside its root (through a symlink)")
        return await super().read(path, offset, limit)


async def test_one_escaping_skill_md_in_a_backend_skips_that_skill_not_the_source() -> None:
    backend = _EscapingBackend()
    await backend.write("skills/good/SKILL.md", md("good"))
    await backend.write("skills/bad/SKILL.md", md("bad"))
    catalog = SkillCatalog([BackendSource(backend)])
    await catalog.load()
    assert [e.name for e in catalog.entries()] == ["good"]
    assert catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE) == []
    [problem] = catalog.problems()
    assert (problem.id, problem.diagnostics[0].code) == ("bad", Code.UNREADABLE)


async def test_a_looping_or_dangling_skill_md_symlink_skips_that_skill_loudly(
    write_skill: Writer,
) -> None:
    # A self-looping SKILL.md must not raise RuntimeError out of the scan and fail the whole
    # source (every skill missing); a dangling one must not make its skill vanish silently.
    root = write_skill("good").parent
    (root / "loop").mkdir()
    (root / "loop" / "SKILL.md").symlink_to("SKILL.md")
    (root / "dangling").mkdir()
    (root / "dangling" / "SKILL.md").symlink_to("gone.md")
    catalog = SkillCatalog([FilesystemSource(root)])
    await catalog.load()
    assert [e.name for e in catalog.entries()] == ["good"]
    assert catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE) == []
    skipped = {p.id: p.diagnostics[0].code for p in catalog.problems()}
    assert skipped == {"loop": Code.UNREADABLE, "dangling": Code.UNREADABLE}


async def _text_link_backend(link: str) -> MemoryBackend:
    backend = MemoryBackend()
    await backend.write("skills/shared/pdf/SKILL.md", md("pdf"))
    await backend.write("skills/shared/pdf/forms.md", "forms")
    await backend.write("skills/team/pdf/SKILL.md", link)
    return backend


@pytest.mark.parametrize("link", ["../../shared/pdf/SKILL.md\n", "../../shared/pdf"])
async def test_a_backend_text_link_inside_the_prefix_is_followed_with_a_warning(
    link: str,
) -> None:
    # Before: BackendSource parsed the link text itself as the SKILL.md (a frontmatter error),
    # where FilesystemSource follows it.
    catalog = SkillCatalog([BackendSource(await _text_link_backend(link))])
    await catalog.load()
    linked = next(e for e in catalog.entries() if e.id == "team/pdf")
    assert linked.name == "pdf"
    assert any(d.code is Code.TEXT_LINK and "git symlink" in d.message for d in linked.warnings)
    assert (await catalog.read(linked.ref)).startswith(b"Body of pdf.")
    assert await catalog.read(linked.ref, "forms.md") == b"forms"


@pytest.mark.parametrize(
    ("link", "reason"),
    [
        ("../../../outside/SKILL.md", "outside the source root"),
        ("../../nowhere/SKILL.md", "cannot be read"),
        ("../../loop/SKILL.md", "again only a path"),
    ],
)
async def test_a_backend_text_link_it_cannot_follow_is_an_error_naming_why(
    link: str, reason: str
) -> None:
    backend = await _text_link_backend(link)
    await backend.write("outside/SKILL.md", md("outside"))
    await backend.write("skills/loop/SKILL.md", "../team/pdf/SKILL.md")
    catalog = SkillCatalog([BackendSource(backend)])
    await catalog.load()
    assert "team/pdf" not in [e.id for e in catalog.entries()]
    problem = next(p for p in catalog.problems() if p.id == "team/pdf")
    assert problem.diagnostics[0].code is Code.TEXT_LINK
    assert reason in problem.diagnostics[0].message


@pytest.mark.parametrize("link", ["../../shared/pdf/skill.md", "../../shared/pdf"])
async def test_a_backend_text_link_to_a_lowercase_skill_md_reads_that_file(link: str) -> None:
    # MemoryBackend is case-sensitive: only skill.md exists, never SKILL.md.
    backend = MemoryBackend()
    await backend.write("skills/shared/pdf/skill.md", md("pdf"))
    await backend.write("skills/team/pdf/SKILL.md", link)
    catalog = SkillCatalog([BackendSource(backend)])
    await catalog.load()
    linked = next(e for e in catalog.entries() if e.id == "team/pdf")
    assert (await catalog.read(linked.ref)).startswith(b"Body of pdf.")
