"""Skill scripts as tools: ``scripts/<name>.<ext>`` → ``run_<skill>_<name>``, run argv-only.

Enabled by giving the manager a :class:`ScriptConfig`. At load, every file of the skill is copied
into a private temporary folder (the *workspace*, which lives as long as the loaded skill, not
the turn); each script whose suffix has an interpreter becomes a tool taking ``args`` (a list of
strings) and an optional ``timeout_seconds``.

One run is ``asyncio.create_subprocess_exec(*interpreter, <workspace>/scripts/x.py, *args)``:

* never a shell; an argument that starts with ``-`` or contains NUL is refused
  (:class:`~plait.skills.managed.errors.SkillScriptRejected`);
* ``cwd`` is the workspace, stdin is ``/dev/null``, the environment is exactly
  ``ScriptConfig.env`` (empty by default: nothing of the host process's environment leaks);
* stdout and stderr share one pipe and ``max_output_bytes``; past it the output is cut and ends
  with ``\\n[output truncated]`` (the rest is drained, not kept);
* the process starts its own session; on timeout or cancellation the whole process group is
  killed (SIGKILL), and so are stragglers left in the group after a normal exit;
* a non-zero exit raises :class:`~plait.skills.managed.errors.SkillScriptFailed` (unless
  ``fail_on_nonzero_exit=False``), a timeout
  :class:`~plait.skills.managed.errors.SkillScriptTimeout`.

What this does **not** isolate: it is not a sandbox. A script runs as the same user as the
agent, can read and write any file that user can (the workspace is only its working folder), can
open network connections, and has no CPU or memory limit; a child that leaves the process group
(``setsid``, a double fork) survives the kill (and, while it holds the inherited output pipe
open, keeps the call waiting until the timeout). Pure Python cannot do better portably. For skills
you do not trust, point the interpreter map at a sandboxing wrapper (bubblewrap, nsjail,
firejail, a container runtime), e.g. ``{".py": ["bwrap", "--ro-bind", "/", "/", …, "python3"]}``,
or run the whole agent inside one. POSIX only.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from plait.errors import quoted
from plait.paths import confine, normalize_virtual_path
from plait.skills.managed.errors import (
    InvalidSkillsConfig,
    SkillScriptFailed,
    SkillScriptRejected,
    SkillScriptTimeout,
)
from plait.skills.sources.base import SkillSource

__all__ = [
    "TRUNCATION_MARKER",
    "ScriptConfig",
    "ScriptRun",
    "Workspace",
    "materialize",
    "run_script",
    "script_paths",
    "script_tool_name",
]

TRUNCATION_MARKER = "\n[output truncated]"
_READ_CHUNK = 65_536
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _default_interpreters() -> dict[str, list[str]]:
    return {".py": [sys.executable], ".sh": ["/bin/sh"]}


@dataclass(frozen=True, slots=True)
class ScriptConfig:
    """How skill scripts run. ``interpreters`` maps a file suffix to the argv prefix that runs
    it (default ``{".py": [sys.executable], ".sh": ["/bin/sh"]}``); scripts with other suffixes
    get no tool. ``timeout`` is the default per call (the model may ask for less, or more up to
    ``max_timeout``), in seconds. ``env`` is the whole environment a script gets.
    ``workspace_dir`` is where workspaces are created (default: the system temp folder)."""

    interpreters: Mapping[str, Sequence[str]] = field(default_factory=_default_interpreters)
    timeout: float = 30.0
    max_timeout: float = 300.0
    max_output_bytes: int = 64 * 1024
    env: Mapping[str, str] = field(default_factory=dict)
    fail_on_nonzero_exit: bool = True
    workspace_dir: str | None = None

    def check(self) -> None:
        """Raise :class:`InvalidSkillsConfig` naming the first problem."""
        if os.name != "posix":
            raise InvalidSkillsConfig(
                "Skill scripts need a POSIX system (process groups); drop scripts= here."
            )
        if not self.interpreters:
            raise InvalidSkillsConfig(
                'ScriptConfig.interpreters is empty; map suffixes to argv, e.g. {".py": '
                "[sys.executable]}."
            )
        for suffix, argv in self.interpreters.items():
            if not suffix.startswith(".") or isinstance(argv, str) or not argv:
                raise InvalidSkillsConfig(
                    f"ScriptConfig.interpreters[{suffix!r}] must map a suffix starting with '.' "
                    "to a non-empty list of argv strings (not a shell command line)."
                )
        if not 0 < self.timeout <= self.max_timeout:
            raise InvalidSkillsConfig(
                f"ScriptConfig.timeout must be > 0 and <= max_timeout ({self.max_timeout})."
            )
        if self.max_output_bytes < 1:
            raise InvalidSkillsConfig("ScriptConfig.max_output_bytes must be at least 1.")

    def interpreter_for(self, path: str) -> Sequence[str] | None:
        return self.interpreters.get(PurePosixPath(path).suffix)


def script_paths(files: Sequence[str], config: ScriptConfig) -> list[str]:
    """The files of a skill that become script tools: under ``scripts/``, with an interpreter."""
    return [f for f in files if f.startswith("scripts/") and config.interpreter_for(f) is not None]


def script_tool_name(skill: str, path: str) -> str:
    """``run_<skill>_<script>``: ``scripts/sub/x.py`` of ``pdf`` → ``run_pdf_sub_x``."""
    stem = str(PurePosixPath(path).relative_to("scripts").with_suffix(""))
    return _UNSAFE_NAME_CHARS.sub("_", f"run_{skill}_{stem.replace('/', '_')}")


class Workspace:
    """A private copy of a skill's files; :meth:`dispose` removes it (idempotent)."""

    __slots__ = ("disposed", "root")

    def __init__(self, root: Path) -> None:
        self.root = root
        self.disposed = False

    def dispose(self) -> None:
        if not self.disposed:
            self.disposed = True
            shutil.rmtree(self.root, ignore_errors=True)

    def __repr__(self) -> str:
        return f"<Workspace {str(self.root)!r}{' disposed' if self.disposed else ''}>"


async def materialize(
    source: SkillSource, ref: str, files: Sequence[str], skill: str, parent: str | None
) -> Workspace:
    """Copy ``files`` of skill ``ref`` into a new temporary folder; on failure remove it.

    ``skill`` (the frontmatter name, chosen by the skill's author) only labels the folder: it is
    reduced to ``[A-Za-z0-9_-]`` and 32 characters, so a ``/`` or ``..`` in it cannot place the
    workspace outside ``parent``. Files are copied by content (a symlink becomes a file)."""
    label = _UNSAFE_NAME_CHARS.sub("_", skill)[:32]
    root = Path(tempfile.mkdtemp(prefix=f"plait-skill-{label}-", dir=parent))
    workspace = Workspace(root)
    try:
        for rel in files:
            data = await source.read(ref, rel)
            target = root / normalize_virtual_path(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except BaseException:
        workspace.dispose()
        raise
    return workspace


@dataclass(frozen=True, slots=True)
class ScriptRun:
    """One finished run: exit code, output (capped, with the marker if cut), bytes captured."""

    script: str
    exit_code: int
    output: str
    captured: int
    truncated: bool

    def describe(self) -> str:
        return (
            f"Script {self.script} exited {self.exit_code}; captured {self.captured} bytes; "
            f"truncated={self.truncated}\n{self.output}"
        )


def _check_args(args: Sequence[str]) -> None:
    for arg in args:
        if arg.startswith("-") or "\x00" in arg:
            shown = arg.replace("\x00", "\\x00")
            raise SkillScriptRejected(
                f"Script argument {quoted(shown)} refused: arguments may not start with '-' or "
                "contain NUL bytes (they could be read as options). Pass plain values."
            )


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _drain(stream: asyncio.StreamReader, cap: int, into: bytearray) -> bool:
    """Read ``stream`` to EOF keeping at most ``cap`` bytes in ``into``; return if it was cut."""
    truncated = False
    while chunk := await stream.read(_READ_CHUNK):
        room = cap - len(into)
        if len(chunk) > room:
            truncated = True
        if room > 0:
            into += chunk[:room]
    return truncated


def _text(data: bytearray, truncated: bool) -> str:
    text = data.decode("utf-8", errors="replace")
    return text + TRUNCATION_MARKER if truncated else text


async def run_script(
    workspace: Workspace,
    script: str,
    args: Sequence[str],
    config: ScriptConfig,
    *,
    timeout_seconds: float | None = None,
    on_start: Callable[[asyncio.subprocess.Process], None] | None = None,
    on_end: Callable[[asyncio.subprocess.Process], None] | None = None,
) -> ScriptRun:
    """Run ``script`` (a path inside the workspace) with ``args``; see the module docstring."""
    _check_args(args)
    interpreter = config.interpreter_for(script)
    if interpreter is None:
        raise SkillScriptRejected(f"No interpreter is configured for {script!r}.")
    limit = config.timeout if timeout_seconds is None else timeout_seconds
    if not 0 < limit <= config.max_timeout:
        raise SkillScriptRejected(
            f"timeout_seconds must be > 0 and <= {config.max_timeout:g}; got {limit:g}."
        )
    target = confine(workspace.root, script)
    try:
        process = await asyncio.create_subprocess_exec(
            *interpreter,
            str(target),
            *args,
            cwd=workspace.root,
            env=dict(config.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        raise SkillScriptFailed(
            f"Script {script} could not start: {err}. Check the interpreter map."
        ) from err
    if on_start is not None:
        on_start(process)
    captured = bytearray()
    try:
        assert process.stdout is not None
        async with asyncio.timeout(limit):
            truncated = await _drain(process.stdout, config.max_output_bytes, captured)
            code = await process.wait()
    except TimeoutError:
        _kill_group(process)
        await process.wait()
        raise SkillScriptTimeout(
            f"Script {script} ran past its {limit:g}s timeout and was killed with its process "
            f"group. Output so far:\n{_text(captured, False)}"
        ) from None
    except BaseException:
        _kill_group(process)
        with contextlib.suppress(BaseException):
            await asyncio.shield(process.wait())
        raise
    finally:
        _kill_group(process)  # stragglers the script left in its group
        if on_end is not None:
            on_end(process)
    run = ScriptRun(script, code, _text(captured, truncated), len(captured), truncated)
    if code != 0 and config.fail_on_nonzero_exit:
        raise SkillScriptFailed(run.describe())
    return run
