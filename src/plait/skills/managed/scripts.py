"""Skill scripts as tools: ``scripts/<name>.<ext>`` → ``run_<skill>_<name>``, run argv-only.

Enabled by giving the manager a :class:`ScriptConfig`. At load, the config's sandbox is checked
(the first-use probe: a skill with scripts fails to load with
:class:`~plait.skills.managed.errors.SkillSandboxUnavailable` when bubblewrap does not work
here, never falling back to running unsandboxed), then every file of the skill is copied into a
private temporary folder (the *workspace*, which lives as long as the loaded skill, not the
turn; scripts run in a copy of it per conversation thread, made on the thread's first run, at
most ``ScriptConfig.thread_workspaces`` kept, see :class:`Workspace`); each script whose suffix
has an interpreter becomes a tool taking ``args`` (a list of strings) and an optional
``timeout_seconds``.

One run is ``<interpreter…> <workspace>/scripts/x.py <args…>`` handed to
``ScriptConfig.sandbox`` (:class:`~plait.sandbox.BubblewrapSandbox` by default, see
:mod:`plait.sandbox`):

* never a shell; an argument that starts with ``-`` or contains NUL is refused
  (:class:`~plait.skills.managed.errors.SkillScriptRejected`); the interpreter is resolved to an
  absolute path on the host first (a missing one is a "could not start" failure);
* ``cwd`` is the workspace (the only place the default policy lets it write), stdin is
  ``/dev/null``, the environment is exactly ``ScriptConfig.env`` (empty by default: nothing of
  the host process's environment leaks, no API key);
* stdout and stderr share one pipe and ``max_output_bytes``; past it the output is cut and ends
  with ``\\n[output truncated]`` (the rest is drained, not kept);
* on timeout, cancellation or ``dispose()`` the whole process
  tree is killed (in bubblewrap: every process of the run's PID namespace, double-forked
  daemons included) and waited for;
* a non-zero exit raises :class:`~plait.skills.managed.errors.SkillScriptFailed` (unless
  ``fail_on_nonzero_exit=False``), naming the resource limit it probably hit; a timeout
  :class:`~plait.skills.managed.errors.SkillScriptTimeout`. Every result names the sandbox.

With ``sandbox=UnsandboxedRunner()`` (explicit only) a script runs as the agent's user with no
isolation: it can read and write what that user can, open connections, and a child that leaves
the process group survives the kill. POSIX only; the bubblewrap sandbox needs Linux.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import shutil
import sys
import tempfile
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from plait.errors import quoted
from plait.paths import confine, normalize_virtual_path
from plait.sandbox import (
    GIB,
    TRUNCATION_MARKER,
    BubblewrapSandbox,
    RunningProcess,
    Sandbox,
    SandboxCommand,
    SandboxError,
)
from plait.sandbox.quota import FolderUsage, folder_usage
from plait.skills.errors import SkillFileTooLarge
from plait.skills.managed.errors import (
    InvalidSkillsConfig,
    SkillScriptFailed,
    SkillScriptRejected,
    SkillScriptTimeout,
)
from plait.skills.sources.base import SkillSource

__all__ = [
    "DEFAULT_THREAD_WORKSPACES",
    "DEFAULT_THREAD_WORKSPACE_BYTES",
    "DEFAULT_WORKSPACE_BYTES",
    "TRUNCATION_MARKER",
    "ScriptConfig",
    "ScriptRun",
    "Workspace",
    "materialize",
    "run_script",
    "script_paths",
    "script_tool_name",
]

DEFAULT_THREAD_WORKSPACES = 32
"""How many threads' copies of one loaded skill's workspace are kept (``ScriptConfig(
thread_workspaces=...)``); past it the least recently used idle copy is removed (a thread that
comes back gets a fresh copy)."""

DEFAULT_THREAD_WORKSPACE_BYTES = 2 * GIB
"""The most bytes one loaded skill's thread copies may hold together (``ScriptConfig(
thread_workspace_bytes=...)``), measured when a run in a copy ends; past it the least recently
used idle copies are removed, the one just used too if it alone holds more. With the default
sandbox each copy is also capped by ``SandboxLimits.workspace_bytes`` (512 MiB) while a run
goes."""


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _default_interpreters() -> dict[str, list[str]]:
    return {".py": [sys.executable], ".sh": ["/bin/sh"]}


@dataclass(frozen=True, slots=True)
class ScriptConfig:
    """How skill scripts run. ``interpreters`` maps a file suffix to the argv prefix that runs
    it (default ``{".py": [sys.executable], ".sh": ["/bin/sh"]}``); scripts with other suffixes
    get no tool. ``timeout`` is the default per call (the model may ask for less, or more up to
    ``max_timeout``), in seconds. ``env`` is the whole environment a script gets.
    ``workspace_dir`` is where workspaces are created (default: the system temp folder); each
    thread gets its own copy of a skill's workspace, at most ``thread_workspaces`` per loaded
    skill holding at most ``thread_workspace_bytes`` together (see :class:`Workspace`).
    ``sandbox`` runs every script: :class:`~plait.sandbox.BubblewrapSandbox` with the default
    :class:`~plait.sandbox.SandboxPolicy` unless you pass another (``UnsandboxedRunner()`` only
    if you trust the skills)."""

    interpreters: Mapping[str, Sequence[str]] = field(default_factory=_default_interpreters)
    timeout: float = 30.0
    max_timeout: float = 300.0
    max_output_bytes: int = 64 * 1024
    env: Mapping[str, str] = field(default_factory=dict)
    fail_on_nonzero_exit: bool = True
    workspace_dir: str | None = None
    sandbox: Sandbox = field(default_factory=BubblewrapSandbox)
    thread_workspaces: int = DEFAULT_THREAD_WORKSPACES
    thread_workspace_bytes: int = DEFAULT_THREAD_WORKSPACE_BYTES

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
        count = self.thread_workspaces
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidSkillsConfig(
                f"ScriptConfig.thread_workspaces must be an integer >= 1, not {count!r}."
            )
        size = self.thread_workspace_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidSkillsConfig(
                f"ScriptConfig.thread_workspace_bytes must be an integer >= 1, not {size!r}."
            )
        if not isinstance(self.sandbox, Sandbox):
            raise InvalidSkillsConfig(
                "ScriptConfig.sandbox must be a plait.sandbox.Sandbox (BubblewrapSandbox() or, "
                f"explicitly, UnsandboxedRunner()), not {self.sandbox!r}."
            )

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
    """A private copy of a skill's files; :meth:`dispose` removes it (idempotent).

    The workspace :func:`materialize` builds at load is the skill's *template*: scripts never
    run in it. Each conversation thread gets its own copy (:meth:`thread_copy`, made on the
    thread's first run), so files one thread's script leaves are never read by another's. At
    most ``limit`` copies holding ``max_bytes`` together are kept (sizes measured off the loop
    when a run in a copy ends), least recently used idle ones removed first (a copy a script
    is running in is never removed; while every copy is busy a new one is added anyway, so the
    count and the bytes can pass the bounds by the runs in flight). Disposing the template disposes
    every copy. Other threads' copies stay hidden from a sandboxed script only while they are
    outside what its sandbox shows: true for the default (workspaces in the system temp folder,
    which the default policy's private ``/tmp`` hides); not with ``private_tmp=False``, a
    ``workspace_dir`` elsewhere, or :class:`~plait.sandbox.UnsandboxedRunner`."""

    __slots__ = ("_copies", "_users", "disposed", "is_copy", "root", "size")

    def __init__(self, root: Path, size: int = 0, *, is_copy: bool = False) -> None:
        self.root = root
        self.disposed = False
        self.is_copy = is_copy  # a thread's copy (removed when a run leaves it over quota)
        self.size = size  # bytes, as last measured (a copy: when made, then after each run)
        self._copies: OrderedDict[str, Workspace] = OrderedDict()
        self._users = 0

    @property
    def threads(self) -> dict[str, Workspace]:
        """The live per-thread copies, least recently used first (a snapshot)."""
        return dict(self._copies)

    @contextlib.asynccontextmanager
    async def thread_copy(
        self,
        thread_id: str,
        limit: int = DEFAULT_THREAD_WORKSPACES,
        max_bytes: int = DEFAULT_THREAD_WORKSPACE_BYTES,
    ) -> AsyncIterator[Workspace]:
        """The copy of thread ``thread_id``, made now (off the event loop) if it has none,
        held (never evicted) until the ``async with`` block ends; then it is measured and the
        copies past ``limit`` or ``max_bytes`` are removed. Raises ``OSError`` if the copy
        fails, :class:`RuntimeError` once the template is disposed."""
        if self.disposed:
            raise RuntimeError(f"the workspace {str(self.root)!r} was removed")
        copy = self._copies.get(thread_id)
        if copy is None or copy.disposed:
            made = await self._copy_off_loop()
            copy = self._copies.get(thread_id)  # another run of the thread may have won
            if self.disposed or (copy is not None and not copy.disposed):
                made.dispose()
            else:
                copy = self._copies[thread_id] = made
            if self.disposed or copy is None:
                raise RuntimeError(f"the workspace {str(self.root)!r} was removed")
        self._copies.move_to_end(thread_id)
        copy._users += 1
        try:
            self._evict(limit, max_bytes)
            yield copy
        finally:
            copy._users -= 1
            await self._measure(thread_id, copy, limit, max_bytes)

    async def _measure(self, thread_id: str, copy: Workspace, limit: int, max_bytes: int) -> None:
        """Measure ``copy`` off the loop, then evict; a caller cancelled meanwhile does not
        stop either (the callback runs when the measure is done)."""
        task = asyncio.ensure_future(asyncio.to_thread(folder_usage, copy.root))

        def account(done: asyncio.Future[FolderUsage]) -> None:
            if not done.cancelled() and done.exception() is None:
                copy.size = done.result().size
            if copy.disposed and self._copies.get(thread_id) is copy:
                del self._copies[thread_id]  # reset by run_script (over its quota)
            if not self.disposed:
                self._evict(limit, max_bytes)

        task.add_done_callback(account)
        await asyncio.shield(task)

    async def _copy_off_loop(self) -> Workspace:
        """A new copy, made in a worker thread; a caller cancelled meanwhile leaves no copy
        behind (it is removed once made)."""
        task = asyncio.ensure_future(asyncio.to_thread(self._copy))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_dispose_result)
            raise

    def _copy(self) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix=f"{self.root.name}-thread-", dir=self.root.parent))
        try:
            shutil.copytree(self.root, root, symlinks=True, dirs_exist_ok=True)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return Workspace(root, folder_usage(root).size, is_copy=True)

    def _evict(self, limit: int, max_bytes: int = DEFAULT_THREAD_WORKSPACE_BYTES) -> None:
        """Remove idle copies, least recently used first, until at most ``limit`` are left
        holding at most ``max_bytes`` (or none idle is left)."""
        count = len(self._copies)
        total = sum(copy.size for copy in self._copies.values())
        for key in [key for key, copy in self._copies.items() if copy._users <= 0]:
            if count <= limit and total <= max_bytes:
                break
            gone = self._copies.pop(key)
            count, total = count - 1, total - gone.size
            gone.dispose()

    def dispose(self) -> None:
        if not self.disposed:
            self.disposed = True
            shutil.rmtree(self.root, ignore_errors=True)
        copies, self._copies = list(self._copies.values()), OrderedDict()
        for copy in copies:
            copy.dispose()

    def __repr__(self) -> str:
        return f"<Workspace {str(self.root)!r}{' disposed' if self.disposed else ''}>"


def _dispose_result(task: asyncio.Future[Workspace]) -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().dispose()


DEFAULT_WORKSPACE_BYTES = 64 * 1024 * 1024
"""The most bytes :func:`materialize` copies for one skill (each file is also capped by its
source's ``max_file_bytes``, 5 MiB by default for folders on disk)."""


async def materialize(
    source: SkillSource,
    ref: str,
    files: Sequence[str],
    skill: str,
    parent: str | None,
    *,
    max_bytes: int = DEFAULT_WORKSPACE_BYTES,
) -> Workspace:
    """Copy ``files`` of skill ``ref`` into a new temporary folder; on failure remove it.
    More than ``max_bytes`` in all raises :class:`~plait.skills.errors.SkillFileTooLarge`.

    ``skill`` (the frontmatter name, chosen by the skill's author) only labels the folder: it is
    reduced to ``[A-Za-z0-9_-]`` and 32 characters, so a ``/`` or ``..`` in it cannot place the
    workspace outside ``parent``. Files are copied by content (a symlink becomes a file)."""
    label = _UNSAFE_NAME_CHARS.sub("_", skill)[:32]
    root = Path(tempfile.mkdtemp(prefix=f"plait-skill-{label}-", dir=parent))
    workspace = Workspace(root)
    copied = 0
    try:
        for rel in files:
            data = await source.read(ref, rel)
            copied += len(data)
            if copied > max_bytes:
                raise SkillFileTooLarge(
                    f"the files of skill {skill!r}", copied, max_bytes, "materialize max_bytes"
                )
            target = root / normalize_virtual_path(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except BaseException:
        workspace.dispose()
        raise
    return workspace


@dataclass(frozen=True, slots=True)
class ScriptRun:
    """One finished run: exit code, output (capped, with the marker if cut), bytes captured,
    the sandbox that ran it (``"bubblewrap"``, ``"unsandboxed"``) and the limit it probably hit."""

    script: str
    exit_code: int
    output: str
    captured: int
    truncated: bool
    sandbox: str = "bubblewrap"
    limit: str | None = None

    def describe(self) -> str:
        head = (
            f"Script {self.script} exited {self.exit_code}; captured {self.captured} bytes; "
            f"truncated={self.truncated}; sandbox={self.sandbox}"
        )
        if self.limit is not None:
            head += f"\nResource limit hit: {self.limit}. The script was stopped."
        return f"{head}\n{self.output}"


def _check_args(args: Sequence[str]) -> None:
    for arg in args:
        if arg.startswith("-") or "\x00" in arg:
            shown = arg.replace("\x00", "\\x00")
            raise SkillScriptRejected(
                f"Script argument {quoted(shown)} refused: arguments may not start with '-' or "
                "contain NUL bytes (they could be read as options). Pass plain values."
            )


def _resolve_interpreter(script: str, interpreter: Sequence[str], env: Mapping[str, str]) -> str:
    """``interpreter[0]`` as an absolute path on the host (the sandbox sees the same files)."""
    program = interpreter[0]
    if os.sep in program:
        found = program if os.access(program, os.X_OK) and os.path.isfile(program) else None
    else:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
    if found is None:
        raise SkillScriptFailed(
            f"Script {script} could not start: interpreter {program!r} was not found or is not "
            "executable. Check the interpreter map."
        )
    return os.path.abspath(found)


async def run_script(
    workspace: Workspace,
    script: str,
    args: Sequence[str],
    config: ScriptConfig,
    *,
    timeout_seconds: float | None = None,
    on_start: Callable[[RunningProcess], None] | None = None,
    on_end: Callable[[RunningProcess], None] | None = None,
) -> ScriptRun:
    """Run ``script`` (a path inside the workspace) with ``args`` in ``config.sandbox``; see
    the module docstring. ``on_start``/``on_end`` get the running process (``kill()`` kills
    its tree)."""
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
    program = _resolve_interpreter(script, interpreter, config.env)
    command = SandboxCommand(
        argv=(program, *interpreter[1:], str(target), *args),
        workspace=workspace.root,
        timeout=limit,
        max_output_bytes=config.max_output_bytes,
        env=dict(config.env),
    )
    sandbox = config.sandbox
    try:
        done = await sandbox.run(command, on_start=on_start, on_end=on_end)
    except (OSError, SandboxError) as err:
        raise SkillScriptFailed(
            f"Script {script} could not start in the {sandbox.name} sandbox: {err}"
        ) from err
    if workspace.is_copy and (done.limit or "").startswith("workspace_"):
        # Left over its quota, the copy would get every later run killed at once: reset it.
        workspace.dispose()
        done = dataclasses.replace(
            done,
            limit=f"{done.limit}; the thread's workspace was reset: the next run starts from "
            "a fresh copy of the skill's files",
        )
    if done.timed_out:
        cut = f"its {limit:g}s timeout" if done.limit is None else f"the limit {done.limit}"
        raise SkillScriptTimeout(
            f"Script {script} ran past {cut} and was killed with every process "
            f"it started (sandbox={done.sandbox}). Output so far:\n{done.output}"
        )
    run = ScriptRun(
        script, done.exit_code, done.output, done.captured, done.truncated, done.sandbox, done.limit
    )
    if done.exit_code != 0 and config.fail_on_nonzero_exit:
        raise SkillScriptFailed(run.describe())
    return run
