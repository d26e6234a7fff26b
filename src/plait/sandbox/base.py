"""The sandbox seam: :class:`Sandbox` (a protocol), what a run takes and what it gives back.

============================= ===============================================================
name                          what it is
============================= ===============================================================
``Sandbox``                   ``check()``, ``run(command)``, ``aclose()``; ``name`` labels
                              every result and event (``"bubblewrap"``, ``"unsandboxed"``)
``SandboxCommand``            argv (``argv[0]`` an executable path), workspace (the working
                              folder, always writable), environment (the whole of it), timeout,
                              output cap
``SandboxRun``                exit code (``-N`` = killed by signal N), capped output, whether it
                              timed out, which limit it probably hit
``RunningProcess``            handed to ``on_start`` / ``on_end``: ``kill()`` kills the tree
============================= ===============================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = [
    "KILL_GRACE_SECONDS",
    "TRUNCATION_MARKER",
    "ProcessCallback",
    "RunningProcess",
    "Sandbox",
    "SandboxCommand",
    "SandboxRun",
]

TRUNCATION_MARKER = "\n[output truncated]"
KILL_GRACE_SECONDS = 5.0
"""How long a run waits for a killed process tree to be gone before it closes its pipes."""


@dataclass(frozen=True, slots=True)
class SandboxCommand:
    """One process to run. ``argv[0]`` must be an absolute path (resolve it on the host first:
    the sandbox sees the same read-only file system). ``env`` is the whole environment."""

    argv: tuple[str, ...]
    workspace: Path
    timeout: float
    max_output_bytes: int
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SandboxRun:
    """A finished run. ``output`` is stdout and stderr together, at most ``max_output_bytes``
    (then ending with :data:`TRUNCATION_MARKER`); ``captured`` counts the bytes kept.
    ``limit`` names the resource limit the run most likely hit, if any; for a timed-out run,
    the sandbox's wall time limit when it was shorter than the command's timeout."""

    exit_code: int
    output: str
    captured: int
    truncated: bool
    timed_out: bool
    sandbox: str
    limit: str | None = None


class RunningProcess:
    """A started run: ``pid`` of the process plait spawned; ``kill()`` SIGKILLs the whole
    process tree (idempotent, safe after exit). ``returncode`` is ``None`` while it runs."""

    __slots__ = ("_kill", "_returncode", "pid")

    def __init__(self, pid: int, kill: Callable[[], None], returncode: Callable[[], int | None]):
        self.pid = pid
        self._kill = kill
        self._returncode = returncode

    @property
    def returncode(self) -> int | None:
        return self._returncode()

    def kill(self) -> None:
        self._kill()


ProcessCallback = Callable[[RunningProcess], None]


@runtime_checkable
class Sandbox(Protocol):
    """Runs one command at a time per call, any number concurrently.

    ``check()`` proves the sandbox works here (cached after the first success) or raises
    :class:`~plait.sandbox.errors.SandboxUnavailable`. ``run`` raises
    :class:`~plait.sandbox.errors.SandboxClosed` after ``aclose()``; a timeout is not an
    exception but ``SandboxRun.timed_out`` (the tree was killed); cancelling ``run`` kills the
    tree before the cancellation propagates. ``aclose()`` kills every running tree, waits (at
    most :data:`KILL_GRACE_SECONDS`) until they are gone, and is idempotent."""

    name: str

    async def check(self) -> None: ...

    async def run(
        self,
        command: SandboxCommand,
        *,
        on_start: ProcessCallback | None = None,
        on_end: ProcessCallback | None = None,
    ) -> SandboxRun: ...

    async def aclose(self) -> None: ...
