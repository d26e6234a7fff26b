"""Skill sources: filesystem layout rules, bounds, escapes, and the memory and backend sources."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plait.paths import PathEscapeError
from plait.skills import (
    BackendSource,
    Code,
    DiscoveryItem,
    DiscoveryProblem,
    FilesystemSource,
    MemorySource,
    SkillEntry,
    SkillFileNotFound,
    SkillNotFound,
    SkillSource,
    SkillSourceError,
)
from plait.skills.model import content_version

Writer = Callable[..., Path]


async def discover(source: SkillSource) -> list[DiscoveryItem]:
    return [item async for item in source.discover()]


def entries(items: list[DiscoveryItem]) -> list[SkillEntry]:
    return [i for i in items if isinstance(i, SkillEntry)]


def problems(items: list[DiscoveryItem]) -> list[DiscoveryProblem]:
    return [i for i in items if isinstance(i, DiscoveryProblem)]


# --- filesystem: layout -------------------------------------------------------------------------


async def test_folder_of_skills_gives_relative_ids_versions_and_locations(
    tmp_path: Path, write_skill: Writer
) -> None:
    write_skill("pdf")
    write_skill("team/review")
    source = FilesystemSource(tmp_path / "skills")
    found = entries(await discover(source))
    assert [(e.id, e.name) for e in found] == [("pdf", "pdf"), ("team/review", "review")]
    pdf = found[0]
    location = (tmp_path / "skills" / "pdf" / "SKILL.md").resolve()
    assert pdf.location == str(location)
    assert pdf.version == content_version(location.read_bytes())
    assert pdf.source_id == str(tmp_path / "skills")
    assert isinstance(source, SkillSource)


async def test_a_single_skill_folder_or_its_skill_md_is_a_source(write_skill: Writer) -> None:
    folder = write_skill("solo")
    for root in (folder, folder / "SKILL.md"):
        found = entries(await discover(FilesystemSource(root, source_id="s")))
        assert [(e.id, e.name) for e in found] == [("solo", "solo")]


async def test_skips_git_node_modules_and_does_not_descend_into_skills(
    write_skill: Writer,
) -> None:
    write_skill("pdf", files={"scripts/inner/SKILL.md": "---\nname: inner\n---\n"})
    write_skill(".git/hooked")
    write_skill("node_modules/pkg")
    write_skill("vendor/node_modules/deep")
    found = await discover(FilesystemSource(write_skill("keep").parent))
    assert [e.id for e in entries(found)] == ["keep", "pdf"]
    [nested] = problems(found)  # a SKILL.md inside a skill's folder is not a skill, but said
    assert nested.diagnostics[0].code is Code.NESTED_SKILL
    assert nested.location is not None and nested.location.endswith("pdf/scripts/inner/SKILL.md")


async def test_depth_is_bounded_with_a_warning(write_skill: Writer) -> None:
    write_skill("a/b/c/deep")
    write_skill("shallow")
    found = await discover(FilesystemSource(write_skill("a/top").parents[1], max_depth=2))
    assert [e.id for e in entries(found)] == ["a/top", "shallow"]  # path order
    [notice] = problems(found)
    assert notice.id is None
    assert notice.diagnostics[0].code is Code.DEPTH_LIMIT


async def test_folder_count_is_bounded_with_a_warning(write_skill: Writer) -> None:
    for index in range(5):
        write_skill(f"s{index}")
    found = await discover(FilesystemSource(write_skill("s0").parent, max_dirs=3))
    assert [e.id for e in entries(found)] == ["s0", "s1", "s2"]
    [notice] = problems(found)
    assert notice.diagnostics[0].code is Code.SCAN_LIMIT


async def test_missing_root_raises_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SkillSourceError, match="does not exist"):
        await discover(FilesystemSource(tmp_path / "nope"))


async def test_broken_skills_become_problems_and_hide_nothing(write_skill: Writer) -> None:
    write_skill("a-good")
    write_skill("b-broken", "---\nname: [unclosed\n---\n")
    write_skill("c-empty", b"")
    write_skill("d-good")
    found = await discover(FilesystemSource(write_skill("a-good").parent))
    assert [e.id for e in entries(found)] == ["a-good", "d-good"]
    assert [(p.id, p.diagnostics[0].code) for p in problems(found)] == [
        ("b-broken", Code.INVALID_YAML),
        ("c-empty", Code.NO_FRONTMATTER),
    ]


async def test_a_folder_that_cannot_be_listed_is_reported_and_skipped(
    write_skill: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_skill("ok")
    locked = write_skill("group/inner").parent
    real_scandir = os.scandir

    def scandir(path: str) -> Iterator[os.DirEntry[str]]:
        if path == str(locked):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    found = await discover(FilesystemSource(locked.parent))
    assert [e.id for e in entries(found)] == ["ok"]
    [notice] = problems(found)
    assert notice.diagnostics[0].code is Code.UNREADABLE
    assert notice.diagnostics[0].file == str(locked)


async def test_too_large_skill_md_is_skipped(write_skill: Writer) -> None:
    folder = write_skill("big", "---\nname: big\ndescription: d\n---\n" + "x" * 5000)
    [problem] = await discover(FilesystemSource(folder.parent, max_file_bytes=1000))
    assert isinstance(problem, DiscoveryProblem)
    assert problem.diagnostics[0].code is Code.FILE_TOO_LARGE


async def test_lowercase_skill_md_loads_with_a_warning(write_skill: Writer) -> None:
    folder = write_skill("lower", filename="skill.md")
    [entry] = entries(await discover(FilesystemSource(folder.parent)))
    assert entry.location.endswith("lower/skill.md")
    assert [d.code for d in entry.diagnostics] == [Code.LOWERCASE_SKILL_MD]


async def test_rescan_parses_only_changed_files(write_skill: Writer) -> None:
    write_skill("one")
    folder = write_skill("two")
    source = FilesystemSource(folder.parent)
    first = await discover(source)
    assert source.last_scan.parsed == 2
    again = await discover(source)
    assert source.last_scan.parsed == 0
    assert [a is b for a, b in zip(first, again, strict=True)] == [True, True]
    (folder / "SKILL.md").write_text("---\nname: two\ndescription: Changed text.\n---\n")
    changed = entries(await discover(source))
    assert source.last_scan.parsed == 1
    assert changed[1].description == "Changed text."


# --- filesystem: escapes ------------------------------------------------------------------------


async def test_symlinked_skill_folder_escaping_the_root_is_refused(
    tmp_path: Path, write_skill: Writer
) -> None:
    outside = write_skill("outside", root=tmp_path / "elsewhere")
    root = write_skill("inside").parent
    (root / "sneaky").symlink_to(outside, target_is_directory=True)
    found = await discover(FilesystemSource(root))
    assert [e.id for e in entries(found)] == ["inside"]
    [problem] = problems(found)
    assert (problem.id, problem.diagnostics[0].code) == ("sneaky", Code.PATH_ESCAPE)


async def test_symlinked_skill_md_escaping_the_root_is_refused(
    tmp_path: Path, write_skill: Writer
) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: linked\ndescription: secret\n---\n")
    root = write_skill("inside").parent
    (root / "linked").mkdir()
    (root / "linked" / "SKILL.md").symlink_to(secret)
    found = await discover(FilesystemSource(root))
    assert [e.id for e in entries(found)] == ["inside"]
    assert [p.diagnostics[0].code for p in problems(found)] == [Code.PATH_ESCAPE]


async def test_symlinks_inside_the_root_are_followed_and_loops_end(write_skill: Writer) -> None:
    target = write_skill("group/real")
    root = target.parents[1]
    (root / "alias").symlink_to(target, target_is_directory=True)
    (root / "group" / "loop").symlink_to(root, target_is_directory=True)
    found = await discover(FilesystemSource(root))
    assert [e.id for e in entries(found)] == ["alias", "group/real"]


async def test_read_refuses_dotdot_and_reinterprets_absolute_paths(
    tmp_path: Path, write_skill: Writer
) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    folder = write_skill("pdf", files={"references/REF.md": "ref"})
    source = FilesystemSource(folder.parent)
    assert await source.read("pdf", "references/REF.md") == b"ref"
    for path in ("../../secret.txt", "references/../../../secret.txt"):
        with pytest.raises(PathEscapeError):
            await source.read("pdf", path)
    with pytest.raises(SkillFileNotFound):
        await source.read("pdf", str(tmp_path / "secret.txt"))
    with pytest.raises(PathEscapeError):
        await source.read("../skills/pdf")


async def test_read_refuses_a_resource_symlink_escaping_the_root(
    tmp_path: Path, write_skill: Writer
) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    folder = write_skill("pdf")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    source = FilesystemSource(folder.parent)
    with pytest.raises(PathEscapeError):
        await source.read("pdf", "leak.txt")
    assert await source.list("pdf") == []


# --- filesystem: reading ------------------------------------------------------------------------


async def test_read_body_list_and_stat(write_skill: Writer) -> None:
    text = "---\nname: pdf\ndescription: d\n---\n\n# PDF\nSteps.\n"
    folder = write_skill(
        "pdf", text, files={"scripts/run.py": "print()", "references/A.md": "a", "x.txt": "x"}
    )
    source = FilesystemSource(folder.parent)
    assert await source.read("pdf") == b"# PDF\nSteps."
    assert await source.list("pdf") == ["references/A.md", "scripts/run.py", "x.txt"]
    stat = await source.stat("pdf")
    assert (stat.size, stat.version) == (len(b"# PDF\nSteps."), content_version(text.encode()))
    assert (await source.stat("pdf", "x.txt")).size == 1


async def test_read_serves_only_discovered_skills(write_skill: Writer) -> None:
    folder = write_skill("pdf", files={"scripts/inner/SKILL.md": "---\nname: inner\n---\n"})
    write_skill(".git/hidden")
    source = FilesystemSource(folder.parent)
    assert await source.read("pdf") == b"# pdf\n\nInstructions."
    for ref in ("pdf/scripts/inner", ".git/hidden"):
        with pytest.raises(SkillNotFound):
            await source.read(ref)


async def test_unknown_skill_and_file_errors_name_what_exists(write_skill: Writer) -> None:
    folder = write_skill("pdf", files={"a.md": "a"})
    source = FilesystemSource(folder.parent)
    await discover(source)
    with pytest.raises(SkillNotFound, match="Known skills: pdf"):
        await source.read("nope")
    with pytest.raises(SkillFileNotFound, match=r"Its files: a\.md"):
        await source.read("pdf", "b.md")


# --- memory -------------------------------------------------------------------------------------


async def test_memory_source_discovers_reads_and_tracks_changes(
    make_md: Callable[..., str],
) -> None:
    source = MemorySource({"pdf": {"SKILL.md": make_md("pdf"), "scripts/x.py": b"x"}})
    [entry] = entries(await discover(source))
    assert (entry.id, entry.location, entry.source_id) == ("pdf", "/skills/pdf/SKILL.md", "memory")
    assert await source.read("pdf") == b"# pdf\n\nInstructions."
    assert await source.read("pdf", "/scripts/x.py") == b"x"
    assert await source.list("pdf") == ["scripts/x.py"]
    with pytest.raises(PathEscapeError):
        await source.read("pdf", "../other/SKILL.md")
    again = entries(await discover(source))
    assert again[0] is entry
    source.put("pdf", {"SKILL.md": make_md("pdf", "New.")})
    source.put("broken", {"README.md": "no skill file"})
    items = await discover(source)
    assert [e.description for e in entries(items)] == ["New."]
    assert [p.diagnostics[0].code for p in problems(items)] == [Code.MISSING_SKILL_MD]
    assert source.remove("broken") and not source.remove("broken")
    with pytest.raises(PathEscapeError):
        source.put("../x", {"SKILL.md": "x"})


# --- backend ------------------------------------------------------------------------------------


class FakeBackend:
    """The smallest BackendReadSurface: a dict of paths to text."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        self.reads.append(path)
        if path not in self.files:
            raise FileNotFoundError(path)
        text = self.files[path][offset:]
        return text if limit is None else text[:limit]

    async def exists(self, path: str) -> bool:
        return path in self.files

    async def ls(self, prefix: str = "") -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix))


async def test_backend_source_discovers_nested_skills_under_a_prefix(
    make_md: Callable[..., str],
) -> None:
    backend = FakeBackend(
        {
            "skills/pdf/SKILL.md": make_md("pdf"),
            "skills/pdf/scripts/run.py": "print()",
            "skills/pdf/scripts/nested/SKILL.md": make_md("nested"),
            "skills/team/review/SKILL.md": make_md("review"),
            "skills/node_modules/x/SKILL.md": make_md("x"),
            "skillsextra/other/SKILL.md": make_md("other"),
            "skills/bad/SKILL.md": "---\nname: [\n---\n",
        }
    )
    source = BackendSource(backend, prefix="/skills/", source_id="store")
    items = await discover(source)
    assert [(e.id, e.location) for e in entries(items)] == [
        ("pdf", "/skills/pdf/SKILL.md"),
        ("team/review", "/skills/team/review/SKILL.md"),
    ]
    assert [p.id for p in problems(items)] == ["bad", None]
    nested = problems(items)[1].diagnostics[0]  # not a skill, but not silently dropped
    assert nested.code is Code.NESTED_SKILL and "/skills/pdf/scripts/nested" in nested.message
    assert await source.read("pdf") == b"# pdf\n\nInstructions."
    assert await source.list("pdf") == ["scripts/nested/SKILL.md", "scripts/run.py"]
    assert await source.read("pdf", "scripts/run.py") == b"print()"
    assert (await source.stat("pdf", "scripts/run.py")).size == 7
    with pytest.raises(PathEscapeError):
        await source.read("pdf", "../team/review/SKILL.md")
    with pytest.raises(SkillFileNotFound):
        await source.read("pdf", "missing.md")
    with pytest.raises(SkillNotFound):
        await source.read("ghost")


async def test_backend_source_reparses_only_changed_content(make_md: Callable[..., str]) -> None:
    backend = FakeBackend({"skills/a/SKILL.md": make_md("a"), "skills/b/SKILL.md": make_md("b")})
    source = BackendSource(backend)
    first = await discover(source)
    backend.files["skills/b/SKILL.md"] = make_md("b", "Changed.")
    second = await discover(source)
    assert second[0] is first[0]
    assert second[1] is not first[1]
    assert entries(second)[1].description == "Changed."


async def test_backend_listing_that_escapes_the_prefix_is_ignored(
    make_md: Callable[..., str],
) -> None:
    backend = FakeBackend(
        {
            "skills/../secret/SKILL.md": make_md("secret"),
            "skills/a/../../etc/SKILL.md": make_md("etc"),
            "skills/ok/SKILL.md": make_md("ok"),
        }
    )
    source = BackendSource(backend)
    assert [e.id for e in entries(await discover(source))] == ["ok"]
    with pytest.raises(PathEscapeError):
        await source.read("../secret")
    with pytest.raises(SkillNotFound):
        await source.read("secret")


async def test_backend_prefix_that_is_itself_a_skill(make_md: Callable[..., str]) -> None:
    backend = FakeBackend({"tools/pdf/SKILL.md": make_md("pdf"), "tools/pdf/a.md": "a"})
    source = BackendSource(backend, prefix="tools/pdf")
    [entry] = entries(await discover(source))
    assert entry.id == "pdf"
    assert await source.list("pdf") == ["a.md"]


def test_the_fake_backend_satisfies_the_protocol() -> None:
    from plait.backends.base import BackendReadSurface

    assert isinstance(FakeBackend({}), BackendReadSurface)
