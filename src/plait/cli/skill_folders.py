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
folder's wins and the other is listed by ``plait skills list`` as shadowed. A folder given
(``--skills``, ``skills = [...]``) that is a symlink loop is a :class:`SkillFolderError` naming
it and the links of the loop.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from plait.cli.config import config_home
from plait.errors import ConfigurationError

__all__ = [
    "SkillFolder",
    "SkillFolderError",
    "check_skill_path",
    "skill_folders",
    "standard_skill_folders",
]

MAX_LINKS_SHOWN = 8
"""A loop's message lists at most this many of its links."""


class SkillFolderError(ConfigurationError):
    """A skills folder that was asked for cannot be used (a symlink loop); the message names
    the path as given and the loop."""


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


def check_skill_path(path: Path, label: str | None = None) -> None:
    """Raise :class:`SkillFolderError` when ``path`` (shown as ``label``, default the path as
    given) cannot be resolved because of a symlink loop; any other path passes (a missing
    folder is reported where skills are loaded)."""
    try:
        os.stat(path.expanduser())
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return
    else:
        return
    shown = label if label is not None else str(path)
    chain = _loop(path.expanduser())
    where = " → ".join(chain) if chain else "a link on the way to it points back along the way"
    raise SkillFolderError(
        f"Skills folder {shown!r} is a symlink loop ({where}); point it at a real folder, or "
        "fix or remove the links."
    )


def _loop(path: Path) -> list[str]:
    """The links followed from ``path``, or from the first of its parent folders that is a
    loop, until one repeats (that one last); ``[]`` when no loop is found that way."""
    absolute = Path(os.path.abspath(path))
    for prefix in [*reversed(absolute.parents), absolute]:
        current = str(prefix)
        followed: list[str] = []
        while os.path.islink(current) and current not in followed:
            followed.append(current)
            try:
                target = os.readlink(current)
            except OSError:
                break
            current = os.path.normpath(os.path.join(os.path.dirname(current), target))
        if current in followed:
            shown = [*followed, current]
            if len(shown) > MAX_LINKS_SHOWN:
                shown = [*shown[: MAX_LINKS_SHOWN - 1], "…", current]
            return shown
    return []


def skill_folders(
    flags: Sequence[Path],
    configured: Sequence[str],
    *,
    use_standard: bool,
    cwd: Path | None = None,
    home: Path | None = None,
) -> list[SkillFolder]:
    """Every folder to load skills from, highest precedence first (module table); each folder
    once. Raises :class:`SkillFolderError` for a flag or configured folder that is a symlink
    loop."""
    folders = [SkillFolder(path, str(path)) for path in flags]
    folders += [SkillFolder(Path(path), path) for path in configured]
    for folder in folders:
        check_skill_path(folder.path, folder.label)
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
