"""The two workspace tools that run a program: ``grep`` (GNU grep, read-only, with a deadline and
an output cap) and ``shell`` (``bash -c`` inside the sandbox).

``shell`` runs in :class:`~plait.sandbox.BubblewrapSandbox` by default: the workspace is the
run's working folder and the one place it may write, the rest of the file system is read-only
(the sandbox policy's secrets hidden), the network is off unless the toolset allows it, and the
environment is exactly :data:`SHELL_ENV` plus what the toolset adds. A command that runs past its
deadline is killed with its whole process tree (children that fork and outlive the shell
included); output is capped. A sandbox that does not work here is an error naming the fix, never
a silent run without one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Final

from plait.sandbox.base import KILL_GRACE_SECONDS, Sandbox, SandboxCommand
from plait.workspace.files import WorkspaceError
from plait.workspace.paths import WorkspaceRoot

__all__ = [
    "GREP_MEMORY_BYTES",
    "GREP_TIMEOUT",
    "MAX_GREP_BYTES",
    "MAX_SHELL_OUTPUT",
    "SHELL_ENV",
    "SHELL_TIMEOUT",
    "grep",
    "run_shell",
]

GREP_TIMEOUT: Final = 20.0
"""Seconds a ``grep`` may run before it is killed."""
GREP_MEMORY_BYTES: Final = 512 * 1024 * 1024
"""The address space ``grep`` may use (``prlimit``, where installed): a short pattern of nested
counts makes GNU grep's matcher take gigabytes; it then fails with "Memory exhausted"."""
MAX_GREP_BYTES: Final = 64 * 1024
"""The most bytes of matches one ``grep`` returns."""
SHELL_TIMEOUT: Final = 120.0
"""Seconds a ``shell`` command may run when the model gives no ``timeout``."""
MAX_SHELL_OUTPUT: Final = 64 * 1024
"""The most bytes of output (stdout and stderr together) one ``shell`` call returns."""
SHELL_ENV: Final[Mapping[str, str]] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
"""The environment of a ``shell`` command (``HOME`` is the workspace): nothing of the agent's."""


async def grep(
    root: WorkspaceRoot,
    pattern: str,
    path: str = ".",
    *,
    include: str | None = None,
    ignore_case: bool = False,
) -> str:
    """Lines matching the extended regex ``pattern`` under ``path``, as ``file:line: text``."""
    if not pattern or len(pattern) > 1000:
        raise WorkspaceError("give a pattern of 1 to 1,000 characters.")
    base = root.resolve(path)
    program = shutil.which("grep")
    if program is None:
        raise WorkspaceError("grep is not installed on this machine (apt-get install grep).")
    argv = [program, "-rnIE", "--color=never", "--max-count=50", "--exclude-dir=.git"]
    argv.append("--devices=skip")  # a FIFO named on the command line would block grep
    if ignore_case:
        argv.append("-i")
    if include:
        argv.append(f"--include={include}")
    argv += ["-e", pattern, "--", str(base)]
    limiter = shutil.which("prlimit")
    if limiter is not None:  # '(a{1,1000}){1,1000}' took grep to 2.5 GB in seconds
        argv = [limiter, f"--as={GREP_MEMORY_BYTES}", f"--cpu={int(GREP_TIMEOUT)}", "--", *argv]
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=root.path,
        env={"LC_ALL": "C.UTF-8"},
    )
    assert process.stdout is not None and process.stderr is not None
    timed_out = False
    try:
        async with asyncio.timeout(GREP_TIMEOUT):
            # Both pipes are read to their end: a pipe left unread fills, grep blocks writing
            # it, and asyncio's wait() (which waits for the pipes too) never returns.
            data, errors = await asyncio.gather(
                _drain(process.stdout, MAX_GREP_BYTES, lambda: _kill(process)),
                _drain(process.stderr, 2000, None),
            )
            await process.wait()
    except TimeoutError:
        data, errors, timed_out = b"", b"", True
    finally:
        if process.returncode is None:
            # Popen.kill() reaps an exited child first (the asyncio watcher then logs an
            # "unknown child"), so only a process past its deadline is killed here.
            process.kill()
            # Killed, it writes no more: what is left in its pipes is read (bounded) so that
            # wait() can return.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(KILL_GRACE_SECONDS):
                    await asyncio.gather(
                        _drain(process.stdout, 0, None), _drain(process.stderr, 0, None)
                    )
                    await process.wait()
    if timed_out:
        raise WorkspaceError(f"grep ran over {GREP_TIMEOUT:g} s; use a simpler pattern or path.")
    if process.returncode == 2 and not data:
        raise WorkspaceError(f"grep failed: {errors.decode('utf-8', 'replace').strip()}")
    cut = len(data) > MAX_GREP_BYTES
    text = data[:MAX_GREP_BYTES].decode("utf-8", "replace")
    prefix = str(base if base.is_dir() else base.parent) + os.sep
    lines = [line.removeprefix(prefix) for line in text.splitlines()]
    if cut:
        lines = lines[:-1]
    if not lines:
        return f"[no line matches {pattern!r} in {root.relative(base)}]"
    note = "; more matches were cut: narrow the pattern or path" if cut else ""
    return f"[{len(lines)} matching lines in {root.relative(base)}{note}]\n" + "\n".join(lines)


def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill ``process`` while it still runs (it is writing: it has not been reaped)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


async def _drain(
    stream: asyncio.StreamReader, keep: int, on_full: Callable[[], None] | None
) -> bytes:
    """Read ``stream`` to its end, keeping its first ``keep + 1`` bytes; ``on_full`` is called
    once when more than ``keep`` arrived (it kills the writer; the rest is read and dropped)."""
    kept = bytearray()
    while chunk := await stream.read(1 << 16):
        if len(kept) <= keep:
            kept += chunk[: keep + 1 - len(kept)]
            if len(kept) > keep and on_full is not None:
                on_full()
    return bytes(kept)


async def run_shell(
    root: WorkspaceRoot,
    sandbox: Sandbox,
    command: str,
    *,
    deadline: float,
    max_output_bytes: int = MAX_SHELL_OUTPUT,
    env: Mapping[str, str] | None = None,
) -> tuple[str, bool]:
    """Run ``command`` with ``bash -c`` in ``sandbox``, in the workspace; ``(what the model is
    told, whether it failed)``."""
    if not command.strip():
        raise WorkspaceError("command is empty.")
    if "\x00" in command:
        raise WorkspaceError("command contains a NUL byte.")
    bash = shutil.which("bash") or "/bin/bash"
    await sandbox.check()
    run = await sandbox.run(
        SandboxCommand(
            argv=(bash, "-c", command),
            workspace=root.path,
            timeout=deadline,
            max_output_bytes=max_output_bytes,
            env={**SHELL_ENV, "HOME": str(root.path), **(env or {})},
        )
    )
    output = run.output.rstrip("\n")
    if run.timed_out:
        head = f"[killed after {deadline:g} s (the deadline), with every process it started]"
        return f"{head}\n{output}" if output else head, True
    status = f"exit code {run.exit_code}"
    if run.limit:
        status += f"; it probably hit the sandbox's {run.limit} limit"
    head = f"[{status}]"
    return (f"{head}\n{output}" if output else head), run.exit_code != 0
