"""``Workspace``: the file and shell tools an agent acts with, confined to one folder.

===================  ================================================================  ========
tool                 what it does                                                      gated
===================  ================================================================  ========
``ls``               a folder's entries (at most 1,000)                                no
``read_file``        numbered lines, 2,000 at a time (``offset``/``limit``); an image  no
                     or PDF as a part for a model that takes it; a path outside the
                     workspace goes to ``read_fallback`` (the skills' ``read_file``)
``write_file``       create or replace a file (at most 10 MiB)                          write
``edit_file``        exact string replace; the text must occur once, or                 write
                     ``replace_all``
``glob``             files whose path matches (``**/*.py``), newest first               no
``grep``             lines matching an extended regex (GNU grep, 20 s, 64 KiB)          no
``shell``            ``bash -c`` in the bubblewrap sandbox: workspace writable, the     shell
                     rest read-only, no network unless ``network=True``, a deadline,
                     an output cap, a clean environment
===================  ================================================================  ========

A gated call runs when its action (``"write"``, ``"shell"``) is in ``allow``; otherwise
``approve(tool_name, args)`` (sync or async) is asked, and without an approver the call is
refused with a message saying how to allow it. ``approve="pause"`` routes the decision
through the turn's pause/resume instead (:mod:`plait.runtime.pause`): a gated call is held, the
turn ends paused, and ``agent.resume`` with ``Approve()`` runs it; for a person who answers later
or in another process (``plait threads resume``). Pass the tools as the agent's own
(``Agent(tools=workspace.tools())``): an agent tool wins over a middleware's of the same name, so
this ``read_file`` replaces the skills middleware's, and ``read_fallback=skills.read_tool``
keeps skill paths readable through the one name.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, Literal, TypeVar

from plait.errors import ConfigurationError, ToolError
from plait.messages import FilePart, ImagePart
from plait.paths import PathEscapeError
from plait.sandbox.base import Sandbox
from plait.sandbox.errors import SandboxError
from plait.tools import FunctionTool, Tool, ToolContext
from plait.workspace import commands, files
from plait.workspace.paths import WorkspaceRoot

__all__ = ["ACTIONS", "Approver", "Workspace", "WorkspaceDenied"]

ACTIONS: Final = frozenset({"write", "shell"})
"""What ``allow`` may name: ``"write"`` (``write_file``, ``edit_file``) and ``"shell"``."""

Approver = Callable[[str, dict[str, Any]], bool | Awaitable[bool]]
"""Asked before a gated call that ``allow`` does not cover: ``(tool name, arguments) -> yes``."""

T = TypeVar("T")

_GATE = {"write_file": "write", "edit_file": "write", "shell": "shell"}


class WorkspaceDenied(ToolError):
    """A gated workspace call was not allowed (the message says how to allow it)."""


class Workspace:
    """The workspace toolset over ``root`` (default: the working folder).

    ``sandbox`` runs ``shell`` (default: a :class:`~plait.sandbox.BubblewrapSandbox` with the
    default policy, the network on only with ``network=True``); ``shell_timeout`` is the
    default and ``max_shell_timeout`` the largest deadline a model may ask for;
    ``shell_env`` adds variables to the clean :data:`~plait.workspace.commands.SHELL_ENV`.
    """

    def __init__(
        self,
        root: str = ".",
        *,
        allow: Iterable[str] = (),
        approve: Approver | Literal["pause"] | None = None,
        sandbox: Sandbox | None = None,
        network: bool = False,
        shell: bool = True,
        shell_timeout: float = commands.SHELL_TIMEOUT,
        max_shell_timeout: float = 600.0,
        max_shell_output: int = commands.MAX_SHELL_OUTPUT,
        shell_env: Mapping[str, str] | None = None,
        read_fallback: Tool | None = None,
    ) -> None:
        allowed = frozenset(allow)
        unknown = allowed - ACTIONS
        if unknown:
            raise ConfigurationError(
                f"Workspace(allow=...) takes {sorted(ACTIONS)}, not {sorted(unknown)}."
            )
        for name, value in (
            ("shell_timeout", shell_timeout),
            ("max_shell_timeout", max_shell_timeout),
        ):
            if not (value > 0) or math.isnan(value):
                raise ConfigurationError(f"Workspace({name}=...) must be > 0 seconds.")
        if max_shell_output < 1:
            raise ConfigurationError("Workspace(max_shell_output=...) must be >= 1 byte.")
        self.root = WorkspaceRoot(root)
        self.allow = allowed
        self.approve = approve
        self.network = network
        self.shell_enabled = shell
        self.shell_timeout = min(shell_timeout, max_shell_timeout)
        self.max_shell_timeout = max_shell_timeout
        self.max_shell_output = max_shell_output
        self.shell_env = dict(shell_env or {})
        self.read_fallback = read_fallback
        self._sandbox = sandbox
        self._owns_sandbox = sandbox is None

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox ``shell`` runs in (created on first use)."""
        if self._sandbox is None:
            from plait.sandbox.bubblewrap import BubblewrapSandbox
            from plait.sandbox.policy import SandboxLimits, SandboxPolicy

            # The workspace is the user's own folder: no quota on what it already holds (a
            # repository may hold more than a skill's scratch folder may), and the wall limit
            # is the longest deadline a call may ask for.
            limits = SandboxLimits(
                wall_seconds=self.max_shell_timeout, workspace_bytes=None, workspace_files=None
            )
            self._sandbox = BubblewrapSandbox(
                SandboxPolicy(network="on" if self.network else "off", limits=limits)
            )
        return self._sandbox

    async def aclose(self) -> None:
        """Close the sandbox this toolset created (one passed in is yours to close)."""
        if self._owns_sandbox and self._sandbox is not None:
            await self._sandbox.aclose()

    async def _gate(self, tool: str, args: dict[str, Any]) -> None:
        action = _GATE[tool]
        if action in self.allow or self.approve == "pause":
            return  # allowed, or held by the turn until a resume approved this very call
        if callable(self.approve):
            answer = self.approve(tool, args)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer:
                return
            raise WorkspaceDenied(f"The user declined this {tool} call; do not retry it as is.")
        raise WorkspaceDenied(
            f"{tool} is not allowed in this run ({action!r} needs approval and nobody can be "
            f"asked). The user can allow it with --yes, or with allow = [{action!r}] under "
            "[workspace] in plait.toml; tell them what you wanted to do."
        )

    def tools(self) -> list[Tool]:
        """``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep`` and (unless
        ``shell=False``) ``shell``."""
        root = self.root

        async def ls(path: str = ".") -> str:
            """List a folder of the workspace (default: its top). Folders end with '/'."""
            return await _guarded(files.list_folder(root, path))

        async def read_file(
            path: str, offset: int = 0, limit: int | None = None, *, ctx: ToolContext
        ) -> str | ImagePart | FilePart:
            """Read a file: numbered lines, 2000 at a time (offset = first line, 0-based;
            limit = how many). Images and PDFs are shown as themselves. Also reads skill files
            (the paths in the skills list)."""
            try:
                return await _guarded(
                    files.read_file(root, path, offset, limit, model=ctx.turn.model), escape=False
                )
            except PathEscapeError as exc:
                if self.read_fallback is None:
                    raise ToolError(str(exc)) from None
                escape = exc
            try:
                result: str | ImagePart | FilePart = await self.read_fallback.invoke(
                    {"path": path, "offset": offset, "limit": limit}, ctx
                )
            except (LookupError, ValueError):
                raise ToolError(
                    f"{escape} It is not in a skill folder either; read files of the workspace "
                    "or a SKILL.md path from the skills list."
                ) from None
            return result

        async def write_file(path: str, content: str) -> str:
            """Create or replace a file in the workspace with content (parent folders are
            made)."""
            await self._gate("write_file", {"path": path})
            return await _guarded(files.write_file(root, path, content))

        async def edit_file(
            path: str, old_string: str, new_string: str, replace_all: bool = False
        ) -> str:
            """Replace old_string with new_string in a file. old_string must match the file
            exactly (whitespace included) and occur once, unless replace_all is true."""
            await self._gate("edit_file", {"path": path})
            return await _guarded(files.edit_file(root, path, old_string, new_string, replace_all))

        async def glob(pattern: str, path: str = ".") -> str:
            """Find files by path pattern ('**/*.py', 'src/*.md'), newest first."""
            return await _guarded(files.glob_files(root, pattern, path))

        async def grep(
            pattern: str, path: str = ".", include: str | None = None, ignore_case: bool = False
        ) -> str:
            """Search file contents with an extended regular expression; include filters file
            names ('*.py'). Shows file:line: text."""
            return await _guarded(
                commands.grep(root, pattern, path, include=include, ignore_case=ignore_case)
            )

        async def shell(command: str, timeout: float | None = None) -> str:  # noqa: ASYNC109
            """Run a bash command in the workspace, in a sandbox: the workspace is writable,
            the rest of the system read-only, no network unless allowed. timeout in seconds."""
            await self._gate("shell", {"command": command})
            limit = self.shell_timeout if timeout is None else timeout
            if not (0 < limit <= self.max_shell_timeout):
                raise ToolError(f"timeout must be > 0 and <= {self.max_shell_timeout:g} seconds.")
            text, failed = await _guarded(
                commands.run_shell(
                    root,
                    self.sandbox,
                    command,
                    deadline=limit,
                    max_output_bytes=self.max_shell_output,
                    env=self.shell_env,
                )
            )
            if failed:
                raise ToolError(text)
            return text

        built: list[Callable[..., Any]] = [ls, read_file, write_file, edit_file, glob, grep]
        if self.shell_enabled:
            built.append(shell)
        paused = self.approve == "pause"
        return [
            FunctionTool(
                fn,
                name=fn.__name__,
                requires_approval=paused and _GATE.get(fn.__name__, "") not in ("", *self.allow),
            )
            for fn in built
        ]


async def _guarded(work: Awaitable[T], *, escape: bool = True) -> T:
    """``work``'s result, its workspace and path errors as tool errors the model reads
    (``escape=False``: a :class:`~plait.paths.PathEscapeError` is left to the caller)."""
    try:
        return await work
    except PathEscapeError as exc:
        if not escape:
            raise
        raise ToolError(str(exc)) from None
    except (files.WorkspaceError, SandboxError) as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc.strerror or exc}") from None
