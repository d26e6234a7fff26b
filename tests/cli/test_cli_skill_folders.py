"""The standard skill folders: precedence, shadowing, --no-default-skills, and a long list."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plait.cli.app import app
from plait.cli.skill_folders import (
    SkillFolderError,
    check_skill_path,
    skill_folders,
    standard_skill_folders,
)


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(project, home, plait home): the current folder, $HOME and $PLAIT_HOME, all empty."""
    project, home, plait_home = tmp_path / "project", tmp_path / "home", tmp_path / "plait-home"
    for folder in (project, home, plait_home):
        folder.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PLAIT_HOME", str(plait_home))
    monkeypatch.chdir(project)
    return project, home, plait_home


def skill(
    root: Path, name: str, description: str = "Does things. Use when needed.", folder: str = ""
) -> Path:
    folder_path = root / (folder or name)
    folder_path.mkdir(parents=True)
    (folder_path / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nBody.\n", encoding="utf-8"
    )
    return folder_path


def test_standard_folders_in_precedence_order_only_when_they_exist(
    dirs: tuple[Path, Path, Path],
) -> None:
    project, home, plait_home = dirs
    for folder in (
        plait_home / "skills",
        home / ".claude" / "skills",
        home / ".agents" / "skills",
        project / ".claude" / "skills",
        project / ".agents" / "skills",
    ):
        folder.mkdir(parents=True)
    labels = [f.label for f in standard_skill_folders(project, home)]
    assert labels == [
        "./.agents/skills",
        "./.claude/skills",
        "~/.agents/skills",
        "~/.claude/skills",
        str(plait_home / "skills"),
    ]
    (project / ".claude" / "skills").rmdir()
    assert "./.claude/skills" not in [f.label for f in standard_skill_folders(project, home)]


def test_flags_come_first_then_config_then_standard_each_folder_once(
    dirs: tuple[Path, Path, Path],
) -> None:
    project, home, _ = dirs
    (project / ".agents" / "skills").mkdir(parents=True)
    chosen = skill_folders(
        [Path("mine"), project / ".agents" / "skills"],
        [str(project / "conf")],
        use_standard=True,
        cwd=project,
        home=home,
    )
    assert [f.label for f in chosen] == [
        "mine",
        str(project / ".agents" / "skills"),
        str(project / "conf"),
    ]
    assert skill_folders([], [], use_standard=False, cwd=project, home=home) == []


def test_skills_list_shows_sources_and_the_shadowed_copy(dirs: tuple[Path, Path, Path]) -> None:
    project, home, _ = dirs
    skill(project / ".claude" / "skills", "pdf", "Project PDF skill. Use for PDFs.")
    skill(home / ".agents" / "skills", "pdf", "Home PDF skill. Use for PDFs.")
    skill(home / ".claude" / "skills", "csv")
    result = CliRunner().invoke(app, ["skills", "list", "--format", "tsv"])
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in result.output.splitlines()]
    assert rows == [
        ["pdf", "active", "./.claude/skills", "Project PDF skill. Use for PDFs."],
        ["pdf", "shadowed", "~/.agents/skills", "Home PDF skill. Use for PDFs."],
        ["csv", "active", "~/.claude/skills", "Does things. Use when needed."],
    ]


def test_no_default_skills_turns_the_standard_folders_off(dirs: tuple[Path, Path, Path]) -> None:
    project, _, _ = dirs
    skill(project / ".agents" / "skills", "pdf")
    result = CliRunner().invoke(app, ["skills", "list", "--no-default-skills"])
    assert result.exit_code == 1
    assert "No skills folder found" in result.output


def test_config_skills_come_before_the_standard_folders(dirs: tuple[Path, Path, Path]) -> None:
    project, _, _ = dirs
    skill(project / ".agents" / "skills", "pdf", "Standard. Use always.")
    skill(project / "team-skills", "pdf", "Team. Use always.")
    (project / "plait.toml").write_text('skills = ["team-skills"]\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["skills", "list", "--format", "tsv"])
    rows = [line.split("\t")[:3] for line in result.output.splitlines()]
    assert rows == [
        ["pdf", "active", str(project / "team-skills")],
        ["pdf", "shadowed", "./.agents/skills"],
    ]


@pytest.mark.slow
def test_skills_list_stays_readable_with_10000_skills_and_400_character_names(
    dirs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _, _ = dirs
    root = project / ".agents" / "skills"
    root.mkdir(parents=True)
    long_name = "-".join(["a" * 19] * 20)  # 399 characters, a valid name
    skill(root, long_name + "x", folder="long")  # the name differs from its folder: a warning
    for i in range(9_999):
        skill(root, f"skill-{i:05d}")
    monkeypatch.setenv("COLUMNS", "100")
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["skills", "list"], env={"COLUMNS": "100"})
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result.output[-2000:]
    lines = result.output.splitlines()
    assert lines[0].split() == ["Name", "Status", "Source", "Description"]
    rows = lines[1:-1]
    assert len(rows) == 10_000  # one line per skill: nothing wrapped onto a second line
    assert max(len(line) for line in lines) <= 140
    assert rows[0].startswith("a" * 19 + "-" + "a" * 19 + "…  active, 2 warnings")
    assert rows[-1].split()[:3] == ["skill-09998", "active", "./.agents/skills"]
    assert "10000 loaded (10000 active, 0 shadowed), 0 rejected." in " ".join(result.output.split())
    print(f"skills list of 10,000 skills: {elapsed:.1f} s")  # seen with -s; not asserted


def test_skills_show_finds_a_skill_in_the_standard_folders(dirs: tuple[Path, Path, Path]) -> None:
    _, home, _ = dirs
    skill(home / ".claude" / "skills", "csv", "Reads CSV files. Use for tables.")
    result = CliRunner().invoke(app, ["skills", "show", "csv"])
    assert result.exit_code == 0, result.output
    assert "description: Reads CSV files. Use for tables." in result.output
    assert "source: ~/.claude/skills" in result.output


def test_a_skills_folder_that_is_a_symlink_loop_is_named_with_its_loop(
    dirs: tuple[Path, Path, Path],
) -> None:
    # Before: a RuntimeError traceback ("Symlink loop from ...") from every command given it,
    # or "Skill folder 'None' does not exist".
    project = dirs[0]
    (project / "a").symlink_to("b")
    (project / "b").symlink_to("a")
    (project / "self").symlink_to("self")
    loop = f"{project / 'a'} → {project / 'b'} → {project / 'a'}"
    commands = [
        ["skills", "list", "a"],
        ["config", "show", "--skills", "a"],
        ["run", "hi", "--skills", "a", "--model", "openai-compatible:m@http://127.0.0.1:9/v1"],
    ]
    for command in commands:
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert f"Skills folder 'a' is a symlink loop ({loop})" in " ".join(result.output.split())
    (project / "plait.toml").write_text('skills = ["self"]\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "show"])
    assert result.exit_code == 2
    assert f"is a symlink loop ({project / 'self'} → {project / 'self'})" in result.output


def test_a_loop_in_a_parent_folder_is_the_loop_named() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "x").symlink_to("x")
        with pytest.raises(SkillFolderError, match=r"symlink loop \(.*/x → .*/x\)"):
            check_skill_path(root / "x" / "skills")
        check_skill_path(root / "missing")  # a missing folder is reported where it is loaded
