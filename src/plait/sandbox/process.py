"""The process plumbing both sandboxes share: spawn, capped output, deadline, kill, settle.

:class:`ProcessSandbox` runs a :class:`~plait.sandbox.base.SandboxCommand` through
``loop.subprocess_exec`` with a protocol that keeps at most ``max_output_bytes`` (the rest is
read and dropped, so a flood never blocks the writer). A run ends when the process has exited
*and* its output pipe is closed, or at the deadline; a background child still holding the pipe
:data:`_EOF_GRACE_SECONDS` after the exit is killed (``Launch.after_exit``) rather than waited for.
Whatever ends it (deadline, cancellation,
``aclose()``), the tree is killed and the run waits - uncancellably, at most twice
:data:`~plait.sandbox.base.KILL_GRACE_SECONDS` - until the process is reaped, then closes the
transport itself, so no transport is left for the garbage collector after the loop is gone
(the "Exception ignored … Event loop is closed" at interpreter exit).

Subclasses say how to build the argv and how to kill the tree (:class:`Launch`). A launch may
carry a ``watch`` (the workspace quota, :mod:`plait.sandbox.quota`): it runs in a worker thread
every ``watch_seconds`` while the process runs and once after it exits; the first limit it names
kills the tree and becomes the run's ``limit``. A look that takes longer than a quarter of
``watch_seconds`` waits four times its own length before the next one, so the watch costs at
most a fifth of a core (a workspace near its 20,000-file quota took 136 ms a look here: 40% of
a core at a fixed 0.2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from plait.sandbox.base import (
    KILL_GRACE_SECONDS,
    TRUNCATION_MARKER,
    ProcessCallback,
    RunningProcess,
    SandboxCommand,
    SandboxRun,
)
from plait.sandbox.errors import SandboxClosed, SandboxPolicyInvalid

__all__ = ["Launch", "ProcessSandbox", "kill_group"]

_EOF_GRACE_SECONDS = 0.5
_WATCH_SPACING = 4.0


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (ignored when it is gone or not ours)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _noop(pid: int) -> None:
    return None


@dataclass(slots=True)
class Launch:
    """How one command is started: ``argv``, fds to pass, ``kill_tree(pid)`` (the tree is
    still running), ``after_exit(pid)`` (the process exited on its own: kill stragglers),
    ``cleanup()`` (always called once, last), ``watch()`` (polled every ``watch_seconds``
    in a worker thread: the limit the run is over, which kills it, or None)."""

    argv: Sequence[str]
    kill_tree: Callable[[int], None] = kill_group
    after_exit: Callable[[int], None] = _noop
    pass_fds: tuple[int, ...] = ()
    cleanup: Callable[[], None] = field(default=lambda: None)
    watch: Callable[[], str | None] | None = None
    watch_seconds: float = 0.2


class _Collector(asyncio.SubprocessProtocol):
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.truncated = False
        self.eof = asyncio.Event()
        self.exited = asyncio.Event()
        self.over: str | None = None  # the limit the launch's watch named

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        room = self.cap - len(self.data)
        if len(data) > room:
            self.truncated = True
        if room > 0:
            self.data += data[:room]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.eof.set()

    def process_exited(self) -> None:
        self.exited.set()


async def _wait(event: asyncio.Event, seconds: float) -> bool:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()


async def _uncancellable(work: Awaitable[None]) -> None:
    """Await ``work`` to the end even if the caller is cancelled meanwhile (then re-raise)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    task.result()
    if cancelled:
        raise asyncio.CancelledError


async def _watch(launch: Launch, collector: _Collector, kill: Callable[[], None]) -> None:
    """Poll ``launch.watch`` until it names a limit (then kill the tree) or is cancelled."""
    assert launch.watch is not None
    loop = asyncio.get_running_loop()
    pause = launch.watch_seconds
    while not collector.exited.is_set():
        await asyncio.sleep(pause)
        started = loop.time()
        found = await asyncio.to_thread(launch.watch)
        # A slow look (a workspace of many files) spaces the next one out: watching takes
        # at most a fifth of the time, not a core.
        pause = max(launch.watch_seconds, _WATCH_SPACING * (loop.time() - started))
        if found is not None and collector.over is None:
            collector.over = found
            kill()
            return


async def _last_look(watch: Callable[[], str | None], collector: _Collector) -> None:
    """The measure after the tree is gone (what it wrote since the last poll counts too)."""
    found = await asyncio.to_thread(watch)
    if collector.over is None:
        collector.over = found


def _check_command(command: SandboxCommand) -> None:
    timeout = command.timeout
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (math.isfinite(timeout) and timeout > 0)
    ):
        raise SandboxPolicyInvalid(
            f"SandboxCommand.timeout must be a finite number of seconds > 0, not {timeout!r} "
            "(every run needs a deadline)."
        )
    if isinstance(command.max_output_bytes, bool) or not (
        isinstance(command.max_output_bytes, int) and command.max_output_bytes >= 1
    ):
        raise SandboxPolicyInvalid("SandboxCommand.max_output_bytes must be an integer >= 1.")
    if not command.argv or not all(isinstance(a, str) for a in command.argv):
        raise SandboxPolicyInvalid("SandboxCommand.argv must be a non-empty tuple of strings.")


class ProcessSandbox:
    """Shared implementation of :class:`~plait.sandbox.base.Sandbox` (see the module)."""

    name = "process"

    def __init__(self) -> None:
        self._running: set[RunningProcess] = set()
        self._settled: set[asyncio.Event] = set()
        self._closed = False

    async def check(self) -> None:
        return None

    def launch(self, command: SandboxCommand) -> Launch:
        raise NotImplementedError

    def wall_seconds(self) -> float | None:
        """The longest a run may take whatever its command asks (None: no cap)."""
        return None

    def limit_hit(self, exit_code: int, output: str) -> str | None:
        """Which resource limit ``exit_code``/``output`` suggest was hit (None: no limits)."""
        return None

    def _wall_hit(self, command: SandboxCommand) -> str | None:
        """The limit a timed-out run hit when the sandbox's wall time, not the command's
        (longer) timeout, cut it; None when the command's own timeout did."""
        cap = self.wall_seconds()
        if cap is None or cap >= command.timeout:
            return None
        return (
            f"wall_seconds={cap:g} (the sandbox's wall time limit, below the "
            f"{command.timeout:g}s timeout)"
        )

    async def run(
        self,
        command: SandboxCommand,
        *,
        on_start: ProcessCallback | None = None,
        on_end: ProcessCallback | None = None,
    ) -> SandboxRun:
        """Run ``command``; see :class:`~plait.sandbox.base.Sandbox`. Raises ``OSError`` when
        the process cannot be started at all, :class:`~plait.sandbox.errors.SandboxPolicyInvalid`
        for a command that cannot run (no argv, a timeout that is not a finite number > 0, an
        output cap below 1), before it starts."""
        if self._closed:
            raise SandboxClosed(f"The {self.name} sandbox was closed; create a new one.")
        await self.check()
        _check_command(command)
        launch = self.launch(command)
        settled = asyncio.Event()
        self._settled.add(settled)
        try:
            collector, code, timed_out = await self._execute(launch, command, on_start, on_end)
        finally:
            launch.cleanup()
            settled.set()
            self._settled.discard(settled)
        text = collector.data.decode("utf-8", errors="replace")
        if collector.truncated:
            text += TRUNCATION_MARKER
        if collector.over is not None:
            limit: str | None = collector.over
        else:
            limit = self.limit_hit(code, text) if not timed_out else self._wall_hit(command)
        return SandboxRun(
            exit_code=code,
            output=text,
            captured=len(collector.data),
            truncated=collector.truncated,
            timed_out=timed_out,
            sandbox=self.name,
            limit=limit,
        )

    async def _execute(
        self,
        launch: Launch,
        command: SandboxCommand,
        on_start: ProcessCallback | None,
        on_end: ProcessCallback | None,
    ) -> tuple[_Collector, int, bool]:
        loop = asyncio.get_running_loop()
        collector = _Collector(command.max_output_bytes)
        transport, _ = await loop.subprocess_exec(
            lambda: collector,
            *launch.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=command.workspace,
            env=dict(command.env),
            start_new_session=True,
            pass_fds=launch.pass_fds,
        )
        pid = transport.get_pid()

        def kill() -> None:
            if transport.get_returncode() is None:
                launch.kill_tree(pid)

        handle = RunningProcess(pid, kill, transport.get_returncode)
        self._running.add(handle)
        timed_out = False
        clean = False
        watcher = None
        if launch.watch is not None:
            watcher = asyncio.ensure_future(_watch(launch, collector, kill))
        try:
            if self._closed:  # aclose() ran while this one was starting
                kill()
            if on_start is not None:
                on_start(handle)
            cap = self.wall_seconds()
            async with asyncio.timeout(
                command.timeout if cap is None else min(cap, command.timeout)
            ):
                await collector.exited.wait()
                if not await _wait(collector.eof, _EOF_GRACE_SECONDS):
                    # A child left running in the background holds the pipe open: the run is
                    # over, so kill the stragglers now instead of waiting out the deadline.
                    launch.after_exit(pid)
                    await collector.eof.wait()
            clean = True
        except TimeoutError:
            timed_out = True
        finally:
            if watcher is not None:
                watcher.cancel()
            try:
                await _uncancellable(self._settle(transport, collector, launch, pid, clean))
                if launch.watch is not None and collector.over is None:
                    await _uncancellable(_last_look(launch.watch, collector))
            finally:
                self._running.discard(handle)
                if on_end is not None:
                    on_end(handle)
        code = transport.get_returncode()
        return collector, code if code is not None else -signal.SIGKILL, timed_out

    async def _settle(
        self,
        transport: asyncio.SubprocessTransport,
        collector: _Collector,
        launch: Launch,
        pid: int,
        clean: bool,
    ) -> None:
        try:
            if clean:
                launch.after_exit(pid)
                return
            if transport.get_returncode() is None:
                launch.kill_tree(pid)
            if not await _wait(collector.exited, KILL_GRACE_SECONDS):
                kill_group(pid)
                await _wait(collector.exited, KILL_GRACE_SECONDS)
            await _wait(collector.eof, _EOF_GRACE_SECONDS)
        finally:
            transport.close()

    async def aclose(self) -> None:
        """Kill every running tree and wait (bounded) until each run has settled. Later
        ``run`` calls raise :class:`~plait.sandbox.errors.SandboxClosed`. Idempotent."""
        self._closed = True
        for handle in list(self._running):
            handle.kill()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2 * KILL_GRACE_SECONDS + _EOF_GRACE_SECONDS):
                for settled in list(self._settled):
                    await settled.wait()
