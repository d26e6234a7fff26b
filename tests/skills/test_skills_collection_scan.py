"""Issue 11 §5: no skill vanishes without a word.

A generated collection laid out like large public skills repositories (categories nested up to
ten levels, skills inside other skills' folders, ``SKILL.MD`` spellings, git symlinks checked out
as text, SKILL.md files without frontmatter) is found whole with the default bounds, and what a
bound still stops is a warning naming the folders, on which ``plait skills validate`` fails.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli.app import app
from plait.skills import (
    BackendSource,
    Code,
    DiscoveryItem,
    DiscoveryProblem,
    FilesystemSource,
    Severity,
    SkillCatalog,
    SkillFileNotFound,
    ValidationMode,
    validate_skill_dir,
)
from plait.skills.description import first_paragraph

runner = CliRunner()


def skill_md(name: str) -> str:
    return f"---\nname: {name}\ndescription: Does {name}. Use when asked.\n---\n# {name}\n"


def _write(folder: Path, text: str, name: str = "SKILL.md") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def _collection(root: Path, per_level: int = 12) -> set[str]:
    """Skills at every depth from 1 to 10, each with scripts/ and an assets/ sample skill;
    returns the ids of the skills that must load."""
    expected: set[str] = set()
    for depth in range(1, 11):
        parents = "/".join(f"cat{d}" for d in range(1, depth))
        for index in range(per_level):
            rel = f"{parents}/s{depth}-{index}" if parents else f"s{depth}-{index}"
            folder = root / rel
            _write(folder, skill_md(f"s{depth}-{index}"))
            _write(folder / "scripts", "print('x')\n", "run.py")
            if index % 4 == 0:  # a template skill shipped inside this skill's folder
                _write(folder / "assets" / "sample-skill", skill_md("sample-skill"))
            expected.add(rel)
    return expected


async def _discover(source: FilesystemSource) -> list[DiscoveryItem]:
    return [item async for item in source.discover()]


def _load(source: FilesystemSource) -> SkillCatalog:
    catalog = SkillCatalog([source])
    asyncio.run(catalog.load())
    return catalog


def test_defaults_find_every_skill_of_a_ten_level_collection(tmp_path: Path) -> None:
    expected = _collection(tmp_path)
    catalog = _load(FilesystemSource(tmp_path))
    assert {e.id for e in catalog.entries()} == expected
    assert not catalog.diagnostics(code=Code.DEPTH_LIMIT)
    assert not catalog.diagnostics(code=Code.SCAN_LIMIT)
    nested = catalog.diagnostics(code=Code.NESTED_SKILL)
    assert len(nested) == 10 * 3  # one per sample skill, index 0, 4 and 8 at each depth
    assert all("assets/sample-skill" in (d.file or "") for d in nested)
    assert all(d.severity is Severity.WARNING for d in nested)


def test_a_depth_bound_is_a_warning_naming_the_unscanned_folders(tmp_path: Path) -> None:
    expected = _collection(tmp_path, per_level=1)
    catalog = _load(FilesystemSource(tmp_path, max_depth=4))
    assert {e.id for e in catalog.entries()} < expected
    (warning,) = catalog.diagnostics(code=Code.DEPTH_LIMIT)
    assert warning.severity is Severity.WARNING
    assert str(tmp_path / "cat1/cat2/cat3/cat4") in warning.message


def test_a_folder_bound_is_a_warning_naming_the_first_unscanned_folders(tmp_path: Path) -> None:
    for index in range(8):
        _write(tmp_path / f"s{index}", skill_md(f"s{index}"))
    catalog = _load(FilesystemSource(tmp_path, max_dirs=3))
    assert [e.id for e in catalog.entries()] == ["s0", "s1", "s2"]
    (warning,) = catalog.diagnostics(code=Code.SCAN_LIMIT)
    assert warning.severity is Severity.WARNING
    assert str(tmp_path / "s3") in warning.message and "max_dirs" in warning.message


def test_validate_exits_non_zero_when_a_bound_left_folders_unscanned(tmp_path: Path) -> None:
    _collection(tmp_path, per_level=1)
    assert runner.invoke(app, ["skills", "validate", str(tmp_path)]).exit_code == 0
    (tmp_path / "limited").mkdir()
    deep = tmp_path / "limited" / "/".join(f"d{i}" for i in range(40)) / "deep-skill"
    _write(deep, skill_md("deep-skill"))
    result = runner.invoke(app, ["skills", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "depth-limit" in result.output


@pytest.mark.parametrize("spelling", ["SKILL.MD", "Skill.md", "skill.MD"])
def test_any_case_of_skill_md_loads_with_a_warning(tmp_path: Path, spelling: str) -> None:
    _write(tmp_path / "odd", skill_md("odd"), spelling)
    catalog = _load(FilesystemSource(tmp_path))
    (entry,) = catalog.entries()
    assert [d.code for d in entry.warnings] == [Code.LOWERCASE_SKILL_MD]
    assert spelling in entry.warnings[0].message
    assert asyncio.run(catalog.read("odd")).startswith(b"# odd")
    diagnostics = validate_skill_dir(tmp_path / "odd", ValidationMode.LENIENT)
    assert [d.code for d in diagnostics] == [Code.LOWERCASE_SKILL_MD]


def test_a_text_link_inside_the_root_is_followed_with_a_warning(tmp_path: Path) -> None:
    _write(tmp_path / "shared" / "pdf", skill_md("pdf"))
    (tmp_path / "shared" / "pdf" / "forms.md").write_text("forms")
    _write(tmp_path / "team" / "pdf", "../../shared/pdf/SKILL.md")
    catalog = _load(FilesystemSource(tmp_path / "team"))
    assert catalog.entries() == []
    (problem,) = catalog.problems()  # the target lies outside this source's root
    assert problem.diagnostics[0].code is Code.TEXT_LINK
    assert "outside the source root" in problem.diagnostics[0].message
    catalog = _load(FilesystemSource(tmp_path))
    linked = next(e for e in catalog.entries() if e.id == "team/pdf")
    assert linked.name == "pdf"
    assert any(d.code is Code.TEXT_LINK and "git symlink" in d.message for d in linked.warnings)
    assert asyncio.run(catalog.read(linked.ref, "forms.md")) == b"forms"
    report = validate_skill_dir(tmp_path / "team" / "pdf", ValidationMode.LENIENT, root=tmp_path)
    assert [d.code for d in report] == [Code.TEXT_LINK]


def test_a_rescan_sees_a_text_link_target_change_appear_and_go(tmp_path: Path) -> None:
    # The cache was keyed on the link file's stat alone: editing the target left the old
    # description, and a target created after the first scan left the "cannot be read" problem.
    _write(tmp_path / "team" / "pdf", "../../shared/pdf/SKILL.md\n")
    source = FilesystemSource(tmp_path)
    catalog = _load(source)
    (problem,) = [p for p in catalog.problems() if p.id == "team/pdf"]
    assert "cannot be read" in problem.diagnostics[0].message
    _write(tmp_path / "shared" / "pdf", skill_md("pdf"))
    asyncio.run(catalog.load())
    assert {e.id: e.description for e in catalog.entries()}["team/pdf"].startswith("Does pdf.")
    _write(tmp_path / "shared" / "pdf", "---\nname: pdf\ndescription: Fills PDF forms.\n---\n")
    asyncio.run(catalog.load())
    assert {e.id: e.description for e in catalog.entries()}["team/pdf"] == "Fills PDF forms."
    before = asyncio.run(_discover(source))
    again = asyncio.run(_discover(source))  # read again, but the same items when nothing changed
    assert [a is b for a, b in zip(before, again, strict=True)] == [True, True]
    (tmp_path / "shared" / "pdf" / "SKILL.md").unlink()
    (tmp_path / "shared" / "pdf").rmdir()
    asyncio.run(catalog.load())
    assert [e.id for e in catalog.entries()] == []
    assert [p.id for p in catalog.problems()] == ["team/pdf"]


def test_a_text_link_to_a_missing_file_is_an_error_not_a_skill(tmp_path: Path) -> None:
    _write(tmp_path / "gone", "../nowhere/SKILL.md\n")
    _write(tmp_path / "good", skill_md("good"))
    catalog = _load(FilesystemSource(tmp_path))
    assert [e.id for e in catalog.entries()] == ["good"]
    (problem,) = [p for p in catalog.problems() if isinstance(p, DiscoveryProblem)]
    assert problem.diagnostics[0].code is Code.TEXT_LINK
    assert "cannot be read" in problem.diagnostics[0].message


INFERRED = {
    "horizontal rule first": ("---\n\nThe real description.\n", "The real description."),
    "starred rule": ("* * *\nProse after a rule.\n", "Prose after a rule."),
    "badges": (
        "[![CI](https://x/badge.svg)](https://x) ![v](https://v.svg)\n\nDoes things.\n",
        "Does things.",
    ),
    "link-only line": ("[Docs](https://docs)\n\nExplains docs.\n", "Explains docs."),
    "heading then html": ("# Title\n<div align=center>\n\nHello prose.\n", "Hello prose."),
    "prerequisites list first": (
        "## Prerequisites\n\n- Python 3\n- git\n\n## Usage\n\nRun the tool on a repo.\n",
        "Run the tool on a repo.",
    ),
    "a list before prose": ("- one\n- two\n\nProse wins.\n", "Prose wins."),
    "only a list": ("- only item\n- second\n", "- only item - second"),
    "table": ("| a | b |\n|---|---|\n\nAfter the table.\n", "After the table."),
}


@pytest.mark.parametrize(("body", "expected"), INFERRED.values(), ids=INFERRED.keys())
def test_inferred_descriptions_skip_non_prose(body: str, expected: str) -> None:
    assert first_paragraph(body) == expected


def test_a_skill_without_frontmatter_is_described_by_its_prose(tmp_path: Path) -> None:
    _write(tmp_path / "raw", "# Raw\n\n---\n\n[![b](x.svg)](y)\n\nConverts raw files.\n")
    (entry,) = _load(FilesystemSource(tmp_path)).entries()
    assert entry.description == "Converts raw files."


def test_skills_list_says_what_it_did_not_load(tmp_path: Path) -> None:
    _write(tmp_path / "pdf", skill_md("pdf"))
    _write(tmp_path / "pdf" / "assets" / "sample-skill", skill_md("sample-skill"))
    result = runner.invoke(app, ["skills", "list", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0
    assert "warning nested-skill" in result.stderr
    assert "assets/sample-skill/SKILL.md was not loaded as a skill" in result.stderr


def test_error_messages_echo_at_most_200_characters_of_a_given_path(tmp_path: Path) -> None:
    _write(tmp_path / "pdf", skill_md("pdf"))
    source = FilesystemSource(tmp_path)
    with pytest.raises(SkillFileNotFound) as caught:
        asyncio.run(source.read("pdf", "x" * 3000))
    assert len(str(caught.value)) < 600
    assert "(+2800 characters)" in str(caught.value)


def test_a_time_bound_is_a_warning_too(tmp_path: Path) -> None:
    for index in range(3):
        _write(tmp_path / f"s{index}", skill_md(f"s{index}"))
    catalog = _load(FilesystemSource(tmp_path, scan_seconds=0))
    assert catalog.entries() == []
    (warning,) = catalog.diagnostics(code=Code.SCAN_LIMIT)
    assert "scan_seconds" in warning.message
    assert f"First folders not scanned: {tmp_path}." in warning.message  # the root itself


class _Backend:
    def __init__(self, files: dict[str, str]) -> None:
        self.files = files

    async def read(self, path: str, offset: int = 0, limit: int | None = None) -> str:
        text = self.files[path][offset:]
        return text if limit is None else text[:limit]

    async def exists(self, path: str) -> bool:
        return path in self.files

    async def ls(self, prefix: str = "") -> list[str]:
        return sorted(p for p in self.files if p.startswith(prefix))


def test_backend_source_finds_deep_and_any_case_skills_and_names_what_it_skips() -> None:
    deep = "/".join(f"c{i}" for i in range(10))
    backend = _Backend(
        {
            f"skills/{deep}/deep/SKILL.md": skill_md("deep"),
            "skills/odd/SKILL.MD": skill_md("odd"),
            "skills/too/" + "/".join("d" * 40) + "/x/SKILL.md": skill_md("x"),
        }
    )
    catalog = SkillCatalog([BackendSource(backend)])
    asyncio.run(catalog.load())
    assert sorted(e.name for e in catalog.entries()) == ["deep", "odd"]
    assert asyncio.run(catalog.read("odd")).startswith(b"# odd")
    odd = next(e for e in catalog.entries() if e.name == "odd")
    assert [d.code for d in odd.warnings] == [Code.LOWERCASE_SKILL_MD]  # as FilesystemSource
    (warning,) = catalog.diagnostics(code=Code.DEPTH_LIMIT)
    assert "/skills/too/d/d" in warning.message
