"""Paths from skills and models stay inside their root; scripts run confined (workspace, argv,
environment, output cap, interpreter choice).

Each test is an attack; its comment, where there is one, says what it would reach if the check
were gone.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from plait.paths import PathEscapeError
from plait.paths import confine as real_confine
from plait.skills import FilesystemSource, MemorySource, SkillCatalog
from plait.skills.disclosure.read_file import read_skill_file
from plait.skills.disclosure.snapshot import SkillSnapshot, take_snapshot
from plait.skills.managed import ScriptConfig, allow_all, create_skill_manager
from plait.skills.managed.scripts import materialize, run_script
from plait.skills.render import PromptFormat

SkillWriter = Callable[..., Path]

posix_only = pytest.mark.skipif(os.name != "posix", reason="scripts and symlinks need POSIX")


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def md(name: str) -> str:
    return f"---\nname: '{name}'\ndescription: Does things. Use when asked.\n---\nBody.\n"


# --- workspaces -----------------------------------------------------------------------------


@posix_only
@pytest.mark.parametrize("name", ["a/../../escaped", "a/b", "../x", "a" * 40])
async def test_workspace_stays_in_workspace_dir_whatever_the_skill_name(
    tmp_path: Path, name: str
) -> None:
    # Attack: were the frontmatter name put verbatim into mkdtemp's prefix, a name with '/' and
    # '..' would place the workspace outside workspace_dir (here: next to it) once the first
    # segment existed.
    parent = tmp_path / "workspaces"
    (parent / "plait-skill-a").mkdir(parents=True)
    src = MemorySource({"tool": {"SKILL.md": md(name), "scripts/e.py": "print('ran')\n"}})
    manager = await create_skill_manager(
        sources=[src], gate=allow_all, scripts=ScriptConfig(workspace_dir=str(parent))
    )
    try:
        await manager.load(name)
        workspace = manager.record(name).workspace
        assert workspace is not None
        assert workspace.root.resolve().parent == parent.resolve()
        assert names(tmp_path) == ["workspaces"]
    finally:
        await manager.aclose()


@posix_only
async def test_materialize_copies_content_never_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("SECRET")
    folder = tmp_path / "skills" / "tool"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(md("tool"))
    (folder / "scripts" / "x.py").write_text("print(1)\n")
    (folder / "data.txt").write_text("inside")
    (folder / "alias.txt").symlink_to(folder / "data.txt")  # inside: copied as a file
    (folder / "leak.txt").symlink_to(outside)  # outside: not listed, not copied
    (folder / "leakdir").symlink_to(tmp_path, target_is_directory=True)
    source = FilesystemSource(tmp_path / "skills")
    files = await source.list("tool")
    assert "leak.txt" not in files and not any(f.startswith("leakdir") for f in files)
    workspace = await materialize(source, "tool", files, "tool", str(tmp_path))
    try:
        copied = [p for p in workspace.root.rglob("*")]
        assert not any(p.is_symlink() for p in copied)
        assert (workspace.root / "alias.txt").read_text() == "inside"
        assert not (workspace.root / "leak.txt").exists()
    finally:
        workspace.dispose()


# --- scripts --------------------------------------------------------------------------------


@posix_only
@pytest.mark.parametrize("script", ["../x.py", "scripts/../../x.py", "a\x00.py"])
async def test_run_script_refuses_paths_outside_the_workspace(tmp_path: Path, script: str) -> None:
    from plait.skills.managed.scripts import Workspace

    with pytest.raises(PathEscapeError):
        await run_script(Workspace(tmp_path), script, [], ScriptConfig(timeout=5))


@posix_only
async def test_a_workspace_script_swapped_for_an_escaping_symlink_is_refused(
    tmp_path: Path,
) -> None:
    # A script may rewrite its workspace; turning a sibling into a link out of it must not
    # make the next run execute a file outside the workspace.
    from plait.skills.managed.scripts import Workspace

    root = tmp_path / "ws"
    (root / "scripts").mkdir(parents=True)
    (tmp_path / "evil.py").write_text("print('outside')\n")
    (root / "scripts" / "y.py").symlink_to(tmp_path / "evil.py")
    with pytest.raises(PathEscapeError):
        await run_script(Workspace(root), "scripts/y.py", [], ScriptConfig(timeout=5))


@posix_only
async def test_script_environment_is_exactly_the_configured_one(tmp_path: Path) -> None:
    from plait.skills.managed.scripts import Workspace

    os.environ["PLAIT_SECURITY_CANARY"] = "leaked"
    try:
        (tmp_path / "scripts").mkdir()
        (tmp_path / "scripts" / "env.py").write_text(
            "import json, os\nprint(json.dumps(sorted(os.environ)))\n"
        )
        run = await run_script(
            Workspace(tmp_path), "scripts/env.py", [], ScriptConfig(env={"ONLY": "1"})
        )
    finally:
        del os.environ["PLAIT_SECURITY_CANARY"]
    # CPython may add LC_CTYPE when it coerces the C locale, bwrap sets PWD to the working
    # folder; nothing of the host leaks.
    assert set(json.loads(run.output)) <= {"ONLY", "LC_CTYPE", "PWD"}


@posix_only
@pytest.mark.parametrize("arg", ["-c", "--flag=value", "-", "a\x00b"])
async def test_option_like_and_nul_arguments_are_refused(tmp_path: Path, arg: str) -> None:
    from plait.skills.managed import SkillScriptRejected
    from plait.skills.managed.scripts import Workspace

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x.py").write_text("print(1)\n")
    with pytest.raises(SkillScriptRejected):
        await run_script(Workspace(tmp_path), "scripts/x.py", [arg], ScriptConfig())


@posix_only
async def test_arguments_are_argv_never_a_shell(tmp_path: Path) -> None:
    from plait.skills.managed.scripts import Workspace

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x.sh").write_text('printf "%s|" "$@"\n')
    hostile = ["$(touch pwned)", "a; touch pwned", "line\nbreak", "`touch pwned`", "*"]
    run = await run_script(Workspace(tmp_path), "scripts/x.sh", hostile, ScriptConfig())
    assert run.output == "|".join(hostile) + "|"
    assert not (tmp_path / "pwned").exists()


@posix_only
async def test_output_cap_holds_for_stderr_and_many_small_writes(tmp_path: Path) -> None:
    from plait.skills.managed.scripts import Workspace

    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x.py").write_text(
        "import sys\n"
        "for _ in range(20000):\n"
        "    sys.stderr.write('e'); sys.stderr.flush(); sys.stdout.write('o'); sys.stdout.flush()\n"
    )
    config = ScriptConfig(max_output_bytes=100)
    run = await run_script(Workspace(tmp_path), "scripts/x.py", [], config)
    assert run.truncated and run.captured == 100


def test_interpreter_is_chosen_by_the_last_suffix_only() -> None:
    config = ScriptConfig()
    assert config.interpreter_for("scripts/x.py.sh") == ["/bin/sh"]
    assert config.interpreter_for("scripts/x.sh.py") == [sys.executable]
    assert config.interpreter_for("scripts/.py") is None
    assert config.interpreter_for("scripts/x.PY") is None


# --- read_file (disclosure) -----------------------------------------------------------------


async def _snapshot(root: Path) -> tuple[SkillCatalog, SkillSnapshot]:
    catalog = SkillCatalog([FilesystemSource(root)])
    await catalog.load()
    return catalog, take_snapshot(catalog, format=PromptFormat.XML, budget=None, instructions=None)


@posix_only
@pytest.mark.parametrize(
    "suffix", ["/../other/SKILL.md", "/..\t", "/.. ", "/x/..\n", "\\..\\other\\SKILL.md"]
)
async def test_read_file_refuses_dot_dot_even_padded_with_whitespace(
    write_skill: SkillWriter, suffix: str
) -> None:
    # Attack: were the '..' check run on the raw path and the location on the stripped one,
    # "<folder>/.. " would pass the check and then climb a level.
    folder = write_skill("pdf")
    write_skill("other")
    catalog, snapshot = await _snapshot(folder.parent)
    with pytest.raises(PathEscapeError):
        await read_skill_file(catalog, snapshot, str(folder) + suffix)


@posix_only
async def test_read_file_never_follows_a_link_out_of_the_skill_folder(
    tmp_path: Path, write_skill: SkillWriter
) -> None:
    (tmp_path / "secret.txt").write_text("SECRET")
    folder = write_skill("pdf")
    write_skill("other", files={"private.txt": "OTHER"})
    (folder / "up.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "sideways.txt").symlink_to(folder.parent / "other" / "private.txt")
    (folder / "dir").symlink_to(tmp_path, target_is_directory=True)
    catalog, snapshot = await _snapshot(folder.parent)
    for inner in ["up.txt", "sideways.txt", "dir/secret.txt"]:
        with pytest.raises(PathEscapeError):
            await read_skill_file(catalog, snapshot, f"{folder}/{inner}")
    listing = await read_skill_file(catalog, snapshot, str(folder))
    assert "up.txt" not in listing and "sideways.txt" not in listing


@posix_only
async def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    tmp_path: Path, write_skill: SkillWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Attack: confine() resolves the path, then the file is opened; a symlink planted between
    # the two must not be followed (the final component is opened with O_NOFOLLOW).
    # (A *parent folder* swapped in that window is not defended; see the module docstring.)
    import plait.skills.sources.filesystem as filesystem

    (tmp_path / "secret.txt").write_text("SECRET")
    folder = write_skill("pdf", files={"notes.txt": "notes"})
    source = FilesystemSource(folder.parent)

    def racing_confine(root: Path, path: str) -> Path:
        target = real_confine(root, path)
        if target.name == "notes.txt":
            target.unlink()
            target.symlink_to(tmp_path / "secret.txt")
        return target

    monkeypatch.setattr(filesystem, "confine", racing_confine)
    with pytest.raises(PathEscapeError, match="became a symlink"):
        await source.read("pdf", "notes.txt")


@posix_only
async def test_discovery_refuses_a_skill_folder_linked_from_outside(
    tmp_path: Path, write_skill: SkillWriter
) -> None:
    outside = write_skill("far", root=tmp_path / "elsewhere")
    root = tmp_path / "skills"
    root.mkdir()
    (root / "near").symlink_to(outside, target_is_directory=True)
    catalog = SkillCatalog([FilesystemSource(root)])
    await catalog.load()
    assert catalog.entries() == []
