"""``BubblewrapSandbox``: each command runs under Debian's ``bwrap``, behind ``prlimit``.

The argv is built here, in Python, and nothing else runs on the host::

    prlimit --cpu=… --as=… --nofile=… --fsize=… --core=0 [--nproc=…] --
    bwrap --new-session --die-with-parent --unshare-pid --unshare-ipc --unshare-uts
          --unshare-cgroup-try [--unshare-net] [--unshare-user --disable-userns] --cap-drop ALL
          --ro-bind / / --dev /dev --size S --tmpfs /dev/shm [--proc /proc] [--size T --tmpfs /tmp]
          [--tmpfs D (read_deny folders)] [--ro-bind P P (the program's prefix in them)]
          --bind P P (write_allow…)  --bind W W (the workspace)  --ro-bind P P (write_deny…)
          [--tmpfs D --remount-ro D (read_deny folders inside a writable path)]
          [--ro-bind <empty file> F (read_deny files)] [--remount-ro D (read_deny folders)]
          --remount-ro /dev --chdir W --info-fd N [--seccomp M] -- <argv>

* The host file system is read-only; ``/dev`` is a fresh minimal one (``/dev/null``,
  ``/dev/zero``, ``/dev/urandom``, ``/dev/tty`` … work), ``/proc`` a fresh one for the new PID
  namespace (unless ``mount_proc=False``, the weaker variant for nested containers).
* Root running the agent gets no capabilities inside (``--cap-drop ALL``).
* Unless ``unix_sockets="on"``, a seccomp filter refuses ``socket(AF_UNIX)``
  (:mod:`plait.sandbox.seccomp`): a read-only mount does not stop connecting to host sockets.
* The process tree lives in its own PID namespace whose init is bwrap's: when that init dies,
  the kernel kills every process left in the namespace (double-forked daemons included) before
  bwrap exits. At the deadline, on cancellation and on ``aclose()`` plait SIGKILLs that init
  (its host pid comes from ``--info-fd``) and waits for bwrap to exit; ``--die-with-parent``
  covers plait itself dying.
* rlimits are set by ``prlimit`` on bwrap and inherited by the whole tree. The memory-backed
  mounts are size-capped tmpfs (``/tmp``: ``tmp_bytes``, ``/dev/shm``: ``shm_bytes``) and
  ``/dev`` itself is made read-only, so no tmpfs takes memory past its cap; the workspace is
  measured while the run goes (:mod:`plait.sandbox.quota`) and the tree killed past
  ``workspace_bytes`` / ``workspace_files``.
* Unless ``user_namespaces="on"``, the run cannot make a user namespace (which would give it
  every capability inside): ``--unshare-user --disable-userns`` (bwrap >= 0.8), else the
  seccomp rule of :func:`plait.sandbox.seccomp.build_filter`;
  :attr:`BubblewrapSandbox.userns_guard` says which after ``check()``.

``check()`` runs the first-use probe (:mod:`plait.sandbox.probe`). Never falls back to running
unsandboxed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import tempfile
from collections.abc import Sequence
from pathlib import Path

from plait.sandbox.base import SandboxCommand
from plait.sandbox.errors import SandboxPolicyInvalid, SandboxUnavailable
from plait.sandbox.policy import WORKSPACE_POLL_SECONDS, SandboxPolicy
from plait.sandbox.probe import OPT_OUT, PROBE_TIMEOUT_SECONDS, probe, resolve_tools
from plait.sandbox.process import Launch, ProcessSandbox, kill_group
from plait.sandbox.quota import WorkspaceWatch
from plait.sandbox.seccomp import build_filter, write_filter

__all__ = ["BubblewrapSandbox"]

_BWRAP_GUARD = "bwrap --disable-userns"
_SECCOMP_GUARD = "seccomp"
_NO_GUARD = "none"
_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')
_MEMORY_SIGNS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")


_empty: list[str] = []


def _empty_file() -> str:
    """A read-only empty file (created once per process) bound over denied files: the host's
    ``/dev/null`` cannot be, as bwrap mounts binds ``nodev``."""
    if not _empty or not os.path.isfile(_empty[0]):
        fd, path = tempfile.mkstemp(prefix="plait-sandbox-empty-")
        os.close(fd)
        os.chmod(path, 0o444)
        _empty[:] = [path]
        atexit.register(_remove, path)
    return _empty[0]


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


_MAX_LINKS = 40


def _prefixes_under(program: str | None, hidden: list[str]) -> list[str]:
    """The folders to keep visible for ``program``: for it and each symlink it goes through
    (at most ``_MAX_LINKS``) that lives strictly inside one of the ``hidden`` folders (the
    private ``/tmp``, a ``read_deny`` folder such as ``~``), its prefix (the folder above
    ``bin/``, else its folder); for a virtualenv's prefix, also that of the Python its
    ``pyvenv.cfg`` names (``home =``: a venv made with ``--copies`` runs its base's stdlib)."""
    found: list[str] = []
    path = program
    for _ in range(_MAX_LINKS):
        if path is None or not os.path.isabs(path):
            break
        parts = Path(os.path.normpath(path))
        folder = parts.parent.parent if parts.parent.name == "bin" else parts.parent
        for prefix in (str(folder), _venv_base(folder)):
            if prefix and any(_inside(prefix, root) for root in hidden) and prefix not in found:
                found.append(prefix)
        if not os.path.islink(path):
            break
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    return found


def _venv_base(prefix: Path) -> str | None:
    """The prefix of the Python a virtualenv at ``prefix`` was made from, if it is one."""
    try:
        lines = (prefix / "pyvenv.cfg").read_text(errors="replace").splitlines()[:64]
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() == "home" and os.path.isabs(home := value.strip()):
            base = Path(os.path.normpath(os.path.realpath(home)))
            return str(base.parent if base.name == "bin" else base)
    return None


def _inside(path: str, folder: str) -> bool:
    """Whether ``path`` lies strictly below ``folder`` (both normalized, absolute)."""
    return path.startswith(folder.rstrip("/") + "/")


def _shown(path: str, hidden: list[str], writable: list[str]) -> bool:
    """Whether ``path`` is still visible after the ``hidden`` folders are: outside all of
    them, or inside a writable path bound back over them."""
    return not any(_inside(path, h) for h in hidden) or any(
        path == w or _inside(path, w) for w in writable
    )


def _host_path(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


class _Info:
    """Reads bwrap's ``--info-fd`` JSON (non-blocking) to learn the namespace init's pid."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._pid: int | None = None
        self._data = b""

    def child_pid(self) -> int | None:
        if self._pid is None:
            with contextlib.suppress(BlockingIOError, OSError):
                self._data += os.read(self.read_fd, 4096)
            found = _CHILD_PID.search(self._data)
            self._pid = int(found.group(1)) if found else None
        return self._pid

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


class BubblewrapSandbox(ProcessSandbox):
    """The default sandbox for skill scripts (see the module docstring).

    ``policy`` says what a run may touch; ``bwrap`` and ``prlimit`` are looked up on ``PATH``
    when the check runs; ``mount_proc=False`` skips the fresh ``/proc`` (needed in some nested
    containers; the run then sees the outer ``/proc`` read-only, host processes included);
    ``probe_timeout`` bounds the first-use check. Raises
    :class:`~plait.sandbox.errors.SandboxPolicyInvalid` for a bad policy."""

    name = "bubblewrap"

    def __init__(
        self,
        policy: SandboxPolicy | None = None,
        *,
        bwrap: str = "bwrap",
        prlimit: str = "prlimit",
        mount_proc: bool = True,
        probe_timeout: float = PROBE_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__()
        self.policy = policy if policy is not None else SandboxPolicy()
        self.policy.check()
        if not probe_timeout > 0:
            raise SandboxPolicyInvalid("probe_timeout must be > 0 seconds.")
        self.bwrap = bwrap
        self.prlimit = prlimit
        self.mount_proc = mount_proc
        self.probe_timeout = probe_timeout
        self._tools: tuple[str, str] | None = None
        self._guard: str | None = None

    @property
    def userns_guard(self) -> str | None:
        """What keeps a run from making a user namespace, once :meth:`check` passed:
        ``"bwrap --disable-userns"``, ``"seccomp"`` (bwrap older than 0.8, or one that
        cannot make a user namespace of its own here), or ``"none"`` when the policy allows
        them (``user_namespaces="on"``); None before the check."""
        return self._guard

    async def check(self) -> None:
        """Prove bwrap works here (once per command shape per process) or raise
        :class:`~plait.sandbox.errors.SandboxUnavailable` naming the cause and the fix;
        :class:`~plait.sandbox.errors.SandboxPolicyInvalid` for a missing ``write_allow``.
        With ``user_namespaces="off"`` it tries ``--disable-userns`` first, then the seccomp
        rule, and fails (cause ``userns-unblockable`` when neither exists) rather than run
        without either."""
        if self._tools is not None:
            return
        self._writable()  # a missing write_allow path fails every time, cache or not
        tools = resolve_tools(self.bwrap, self.prlimit)
        policy = self.policy
        filters = build_filter(unix_sockets=False, user_namespaces=False) is not None
        if policy.unix_sockets == "off" and not filters:
            raise SandboxUnavailable(
                "seccomp-unsupported",
                "The filter that keeps scripts away from host Unix sockets exists for x86_64 "
                'and aarch64 only. Accept host Unix sockets with SandboxPolicy(unix_sockets="on")'
                " if you must. " + OPT_OUT,
            )
        guards = [_NO_GUARD] if policy.user_namespaces == "on" else [_BWRAP_GUARD]
        if policy.user_namespaces == "off" and filters:
            guards.append(_SECCOMP_GUARD)
        errors: list[SandboxUnavailable] = []
        for guard in guards:
            try:
                await self._probe(tools, guard)
            except SandboxUnavailable as error:
                if error.cause == "probe-timeout":
                    raise  # says nothing about the shape (a loaded machine): no fallback
                errors.append(error)
                continue
            self._tools, self._guard = tools, guard
            return
        if guards == [_BWRAP_GUARD] and "disable-userns" in str(errors[0]):
            raise SandboxUnavailable(
                "userns-unblockable",
                f"{tools[0]} is older than bubblewrap 0.8 (no --disable-userns) and the seccomp "
                "fallback exists for x86_64 and aarch64 only, so a script could make a user "
                "namespace (every capability inside it). Upgrade bubblewrap, or allow it with "
                'SandboxPolicy(user_namespaces="on") if you must. ' + OPT_OUT,
            )
        raise errors[-1]

    async def _probe(self, tools: tuple[str, str], guard: str) -> None:
        policy = self.policy
        flags = (self.mount_proc, policy.network, policy.unix_sockets, policy.private_tmp, guard)
        key = (*tools, *map(str, flags))
        seccomp = self._seccomp_fd(guard)
        fds = () if seccomp is None else (seccomp,)
        try:
            await probe(
                lambda ws, argv: self._argv(tools, ws, argv, None, seccomp, guard),
                key,
                self.probe_timeout,
                fds,
            )
        finally:
            if seccomp is not None:
                os.close(seccomp)

    def _seccomp_fd(self, guard: str) -> int | None:
        unix = self.policy.unix_sockets == "on"
        program = build_filter(unix_sockets=unix, user_namespaces=guard != _SECCOMP_GUARD)
        if program is None or (unix and guard != _SECCOMP_GUARD):
            return None
        return write_filter(program)

    def launch(self, command: SandboxCommand) -> Launch:
        assert self._tools is not None and self._guard is not None, "check() runs first"
        info = _Info()
        seccomp = self._seccomp_fd(self._guard)

        def cleanup() -> None:
            info.close()
            if seccomp is not None:
                os.close(seccomp)

        try:
            argv = self._argv(
                self._tools, command.workspace, command.argv, info.write_fd, seccomp, self._guard
            )
        except BaseException:
            cleanup()
            raise
        fds = (info.write_fd,) if seccomp is None else (info.write_fd, seccomp)

        def kill_tree(pid: int) -> None:
            child = info.child_pid()
            if child is None:
                kill_group(pid)  # not started yet; --die-with-parent takes the rest
                return
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)

        limits = self.policy.limits
        watch: WorkspaceWatch | None = None
        if limits.workspace_bytes is not None or limits.workspace_files is not None:
            watch = WorkspaceWatch(
                command.workspace,
                limits.workspace_bytes if limits.workspace_bytes is not None else 1 << 62,
                limits.workspace_files if limits.workspace_files is not None else 1 << 62,
            )
        return Launch(
            argv,
            kill_tree=kill_tree,
            pass_fds=fds,
            cleanup=cleanup,
            watch=watch,
            watch_seconds=WORKSPACE_POLL_SECONDS,
        )

    def _writable(self) -> list[str]:
        """The host paths of ``write_allow``; raise if one does not exist."""
        paths = []
        for raw in self.policy.write_allow:
            path = _host_path(raw)
            if not os.path.exists(path):
                raise SandboxPolicyInvalid(
                    f"SandboxPolicy.write_allow path {raw!r} does not exist; create it or "
                    "remove it from the policy."
                )
            paths.append(path)
        return paths

    def bwrap_args(self, workspace: Path, program: str | None = None) -> list[str]:
        """The bwrap options for a run of ``program`` in ``workspace``; see :meth:`_args`
        (``--disable-userns`` shows once :meth:`check` chose it)."""
        return self._args(workspace, program, self._guard)

    def _args(self, workspace: Path, program: str | None, guard: str | None) -> list[str]:
        """The bwrap options for a run of ``program`` in ``workspace`` (see the module).

        A ``read_deny`` folder that holds no writable path is hidden *before* the binds (an
        empty tmpfs, made read-only last), so the workspace, ``write_allow`` paths and the
        ``program``'s prefix inside it (a virtualenv or pyenv under ``/root``) are bound back
        on top; one inside a writable path is hidden after the binds. Entries inside an
        already hidden folder are dropped (already hidden), and so are ``write_deny`` paths
        there (binding them would show them). With a private ``/tmp``, a ``program`` under
        ``/tmp`` stays visible the same way: its prefix (the folder above ``bin/``), and that
        of every symlink on the way to the real binary, is bound back read-only."""
        policy = self.policy
        args = ["--new-session", "--die-with-parent", "--unshare-pid", "--unshare-ipc"]
        args += ["--unshare-uts", "--unshare-cgroup-try"]
        if policy.network == "off":
            args.append("--unshare-net")
        if guard == _BWRAP_GUARD:
            args += ["--unshare-user", "--disable-userns"]
        limits = policy.limits
        args += ["--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev"]
        args += ["--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm"]
        if self.mount_proc:
            args += ["--proc", "/proc"]
        root = str(workspace.resolve())
        writable = [*self._writable(), root]
        outer, inner, files = self._hidden(writable)
        covered = [*outer, "/tmp"] if policy.private_tmp else outer
        if policy.private_tmp:
            args += ["--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
        for folder in outer:
            args += ["--tmpfs", folder]
        for prefix in _prefixes_under(program, covered):
            args += ["--ro-bind", prefix, prefix]
        for path in writable:
            args += ["--bind", path, path]
        for raw in policy.write_deny:
            path = _host_path(raw)
            if os.path.exists(path) and _shown(path, outer, writable):
                args += ["--ro-bind", path, path]
        for folder in inner:
            args += ["--tmpfs", folder, "--remount-ro", folder]
        for path in files:
            args += ["--ro-bind", _empty_file(), path]
        for folder in outer:
            args += ["--remount-ro", folder]
        return [*args, "--remount-ro", "/dev", "--chdir", root]

    def _hidden(self, writable: list[str]) -> tuple[list[str], list[str], list[str]]:
        """The ``read_deny`` paths to hide, as (folders holding no writable path, folders
        inside a writable path, files); missing or unreadable paths are skipped (nothing to
        hide), and so is anything inside an already hidden folder and outside every
        writable path; a folder that is itself a writable path (``write_allow=("~",)`` of an
        agent running as root, whose home ``/root`` is denied) stays shown and writable, the
        denied paths inside it still hidden."""
        folders: list[str] = []
        files: list[str] = []
        for path in self.policy.denied_paths():
            if os.access(path, os.R_OK):
                (folders if os.path.isdir(path) else files).append(path)
        folders = [d for d in folders if d not in writable]  # written explicitly: shown
        inner = [d for d in folders if any(_inside(d, w) for w in writable)]
        candidates = [d for d in folders if d not in inner]
        outer = [d for d in candidates if not any(_inside(d, o) for o in candidates)]
        inner = [d for d in inner if _shown(d, outer, writable)]
        return outer, inner, [f for f in files if _shown(f, outer, writable)]

    def _argv(
        self,
        tools: tuple[str, str],
        workspace: Path,
        argv: Sequence[str],
        info_fd: int | None,
        seccomp_fd: int | None,
        guard: str,
    ) -> list[str]:
        bwrap, prlimit = tools
        args = self._args(workspace, argv[0] if argv else None, guard)
        if info_fd is not None:
            args += ["--info-fd", str(info_fd)]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        return [prlimit, *self.policy.limits.prlimit_args(), "--", bwrap, *args, "--", *argv]

    def wall_seconds(self) -> float | None:
        return self.policy.limits.wall_seconds

    def limit_hit(self, exit_code: int, output: str) -> str | None:
        """Name the limit a failed run most likely hit (bwrap exits 128+N for signal N)."""
        if exit_code == 0:
            return None
        limits = self.policy.limits
        signum = exit_code - 128 if exit_code > 128 else -exit_code
        if signum == signal.SIGXCPU:
            return f"cpu_seconds={limits.cpu_seconds} (CPU time limit reached, SIGXCPU)"
        if signum == signal.SIGXFSZ or "File too large" in output:
            return f"file_size_bytes={limits.file_size_bytes} (file size limit reached, SIGXFSZ)"
        if any(sign in output for sign in _MEMORY_SIGNS):
            return f"memory_bytes={limits.memory_bytes} (memory limit reached)"
        if "No space left on device" in output:
            return (
                f"tmp_bytes={limits.tmp_bytes} or shm_bytes={limits.shm_bytes} (/tmp or "
                "/dev/shm is full)"
            )
        if "Too many open files" in output:
            return f"open_files={limits.open_files} (open file limit reached)"
        return None

    def __repr__(self) -> str:
        return f"BubblewrapSandbox({self.policy!r}, mount_proc={self.mount_proc})"
