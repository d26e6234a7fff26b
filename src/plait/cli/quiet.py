"""``-q/--quiet``: a skill warning is shown once, then no more.

Each ``plait run`` is a new process, so the skills battery reports a folder's problems (a
SKILL.md with a bad field, a skipped skill) on every run: useful the first time, noise after.
With ``-q`` (on ``run`` and ``chat``) a warning already shown once is left out of the terminal
and ``--json`` output; a new one, or one whose message changed, is shown, then remembered.
What was shown is kept in ``skill-warnings-shown.json`` in the CLI's data folder
(:func:`plait.cli.db.data_dir`): one key per (folder, skill, message), at most
:data:`MAX_REMEMBERED` (the oldest forgotten first). Without ``-q`` every warning shows, as
before. The trace still records them all (:class:`QuietSkillWarnings` sits before the trace
recorder, which observes what reaches the turn's sink whole).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.jsonfile import JsonFileError, read_json_object
from plait.middleware.base import Middleware

if TYPE_CHECKING:
    from plait.middleware.base import Next
    from plait.middleware.context import Event, TurnContext

__all__ = ["MAX_REMEMBERED", "QuietSkillWarnings", "shown_warnings_file"]

MAX_REMEMBERED = 2_000
"""Warnings remembered as shown; past this the oldest are forgotten (and would show again)."""

_MAX_FILE_BYTES = 262_144
_WARNING_TYPE = "skill_problem_found"  # matched by type: the skills battery loads only if used


def shown_warnings_file() -> Path:
    """Where ``-q`` remembers the skill warnings it has shown."""
    from plait.cli.db import data_dir

    return data_dir() / "skill-warnings-shown.json"


class QuietSkillWarnings(Middleware):
    """Drops a skill warning (``SkillProblemFound``) from the turn's events once it has been
    shown in an earlier turn or run (see the module docstring). ``path`` holds what was shown
    (default :func:`shown_warnings_file`); a file that cannot be read starts empty, one that
    cannot be written is left as it is (the warning then shows again next time)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or shown_warnings_file()
        self._shown: dict[str, None] = dict.fromkeys(_read(self.path))

    async def turn_input(self, ctx: TurnContext, next: Next) -> None:
        sink = ctx.emit

        def emit(event: Event) -> None:
            if getattr(event, "type", None) == _WARNING_TYPE and not self._first_showing(event):
                return
            sink(event)

        ctx.emit = emit
        await next()

    def _first_showing(self, event: Any) -> bool:
        diagnostic = getattr(event, "diagnostic", None)
        message = getattr(diagnostic, "message", str(diagnostic))
        text = f"{event.source_id}\0{event.skill or ''}\0{message}"
        key = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:24]
        if key in self._shown:
            return False
        self._shown[key] = None
        while len(self._shown) > MAX_REMEMBERED:
            del self._shown[next(iter(self._shown))]
        _write(self.path, list(self._shown))
        return True


def _read(path: Path) -> list[str]:
    """The keys in ``path``; none when it cannot be read, is over ``_MAX_FILE_BYTES``, is not a
    JSON object (a corrupt or hand-edited file: it is rewritten whole at the next warning)."""
    try:
        data = read_json_object(path, max_bytes=_MAX_FILE_BYTES)
    except JsonFileError:
        return []
    keys = data.get("shown")
    if not isinstance(keys, list):
        return []
    return [k for k in keys if isinstance(k, str)][-MAX_REMEMBERED:]


def _write(path: Path, keys: list[str]) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}")
        temporary.write_text(json.dumps({"shown": keys}), encoding="utf-8")
        os.replace(temporary, path)
