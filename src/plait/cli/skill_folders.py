"""Which skills folders ``plait run`` / ``chat`` / ``skills list`` use, in precedence order.

================  ====================================================================
order             folders
================  ====================================================================
1. ``--skills``   each flag, in the order given
2. config         ``skills = [...]`` of the project file, then of the user file
3. standard       ``./.agents/skills``, ``./.claude/skills``, ``~/.agents/skills``,
                  ``~/.claude/skills``, ``$PLAIT_HOME/skills`` (``~/.config/plait/skills``)
================  ====================================================================

The standard folders are used only when they exist, and not at all with
``--no-default-skills`` (or ``default_skills = false`` in a config file). A folder named twice
is used once, at its first place. When two folders hold a skill of the same name, the earlier
folder's wins and the other is listed by ``plait skills list`` as shadowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from plait.cli.config import config_home

__all__ = ["SkillFolder", "skill_folders", "standard_skill_folders"]


@dataclass(frozen=True, slots=True)
class SkillFolder:
    """A skills folder and the label it is listed under (its source id)."""

    path: Path
    label: str


def standard_skill_folders(cwd: Path | None = None, home: Path | None = None) -> list[SkillFolder]:
    """The standard folders (module table, row 3) that exist, highest precedence first."""
    cwd = cwd or Path.cwd()
    home = home or Path.home()
    candidates = [
        SkillFolder(cwd / ".agents" / "skills", "./.agents/skills"),
        SkillFolder(cwd / ".claude" / "skills", "./.claude/skills"),
        SkillFolder(home / ".agents" / "skills", "~/.agents/skills"),
        SkillFolder(home / ".claude" / "skills", "~/.claude/skills"),
        SkillFolder(config_home() / "skills", _label(config_home() / "skills", home)),
    ]
    return [folder for folder in candidates if folder.path.is_dir()]


def _label(path: Path, home: Path) -> str:
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def skill_folders(
    flags: Sequence[Path],
    configured: Sequence[str],
    *,
    use_standard: bool,
    cwd: Path | None = None,
    home: Path | None = None,
) -> list[SkillFolder]:
    """Every folder to load skills from, highest precedence first (module table); each folder
    once."""
    folders = [SkillFolder(path, str(path)) for path in flags]
    folders += [SkillFolder(Path(path), path) for path in configured]
    if use_standard:
        folders += standard_skill_folders(cwd, home)
    seen: set[Path] = set()
    unique = []
    for folder in folders:
        key = folder.path.expanduser().resolve()
        if key not in seen:
            seen.add(key)
            unique.append(folder)
    return unique
