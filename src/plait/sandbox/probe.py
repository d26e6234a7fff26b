"""The first-use check: does ``bwrap`` (behind ``prlimit``) work on this machine?

:func:`probe` runs the same command shape a real run uses (``/bin/true`` in a throwaway
workspace) with a deadline (:data:`PROBE_TIMEOUT_SECONDS`: a probe can hang on NFS/autofs)
and, when it fails, raises :class:`~plait.sandbox.errors.SandboxUnavailable` with the cause
read from bwrap's message and the fix. Results (success or failure) are cached per command
shape for the life of the process, except a probe cut at its deadline, which the next check
runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from plait.sandbox.errors import SandboxUnavailable

__all__ = ["OPT_OUT", "PROBE_TIMEOUT_SECONDS", "diagnose", "probe"]

PROBE_TIMEOUT_SECONDS = 10.0
_STDERR_CAP = 4096

OPT_OUT = (
    "If you trust the skills, opt out explicitly: ScriptConfig(sandbox=UnsandboxedRunner()) "
    "or `plait run --sandbox none` (scripts then run as your user, unisolated)."
)

_USERNS_FIX = (
    "User namespaces are not available to this user. Allow them (Debian/Ubuntu: "
    "`sysctl -w kernel.unprivileged_userns_clone=1`; everywhere: `user.max_user_namespaces` > 0), "
    "or, inside Docker, run the container with `--security-opt seccomp=unconfined` (or as "
    "root with CAP_SYS_ADMIN)."
)
_APPARMOR_FIX = (
    "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+/24.04: "
    "kernel.apparmor_restrict_unprivileged_userns=1). Install an AppArmor profile for "
    "/usr/bin/bwrap that allows `userns,` (see the bubblewrap package's apparmor example), or "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`."
)
_PROC_FIX = (
    "Mounting a fresh /proc was refused (typical in unprivileged Docker/Kubernetes containers "
    "whose /proc is masked or whose seccomp profile forbids the mount). Use the weaker variant "
    "for nested containers, BubblewrapSandbox(mount_proc=False) (the script then sees the "
    "container's /proc read-only), or run the container with `--security-opt "
    "systempaths=unconfined --security-opt seccomp=unconfined`."
)
_PROPAGATION_FIX = (
    "bwrap could not set up its mounts (e.g. 'Failed to make / slave' in a container on "
    "overlayfs). Run the agent outside that container or give the container CAP_SYS_ADMIN."
)

_SECCOMP_FIX = (
    "Loading the seccomp filter that blocks Unix sockets failed. Allow seccomp for bwrap, or "
    'accept host Unix sockets with SandboxPolicy(unix_sockets="on").'
)

_CAUSES: tuple[tuple[str, str, str], ...] = (
    ("can't mount proc", "proc-mount-refused", _PROC_FIX),
    ("rtm_newaddr", "apparmor-userns", _APPARMOR_FIX),
    ("setting up uid map", "apparmor-userns", _APPARMOR_FIX),
    ("creating new namespace failed", "user-namespaces-blocked", _USERNS_FIX),
    ("no permissions to create new namespace", "user-namespaces-blocked", _USERNS_FIX),
    ("failed to make / slave", "mount-propagation-refused", _PROPAGATION_FIX),
    ("seccomp", "seccomp-refused", _SECCOMP_FIX),
)

_cache: dict[tuple[str, ...], SandboxUnavailable | None] = {}


def diagnose(stderr: str, code: int | None) -> SandboxUnavailable:
    """The typed error for a failed probe whose bwrap printed ``stderr``."""
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {code}"
    lowered = stderr.lower()
    for needle, cause, fix in _CAUSES:
        if needle in lowered:
            return SandboxUnavailable(
                cause, f"The bubblewrap sandbox does not work here ({detail}). {fix} {OPT_OUT}"
            )
    return SandboxUnavailable(
        "bwrap-failed",
        f"The bubblewrap sandbox does not work here: bwrap failed ({detail}). Run "
        "`bwrap --ro-bind / / true` to see why. " + OPT_OUT,
    )


def resolve_tools(bwrap: str, prlimit: str) -> tuple[str, str]:
    """Absolute paths of ``bwrap`` and ``prlimit`` (looked up on ``PATH``), or the typed error."""
    found_bwrap = shutil.which(bwrap)
    if found_bwrap is None:
        raise SandboxUnavailable(
            "bwrap-missing",
            f"bubblewrap is not installed ({bwrap!r} is not on PATH). Install it "
            "(`apt-get install bubblewrap`, `dnf install bubblewrap`). " + OPT_OUT,
        )
    found_prlimit = shutil.which(prlimit)
    if found_prlimit is None:
        raise SandboxUnavailable(
            "prlimit-missing",
            f"prlimit is not installed ({prlimit!r} is not on PATH); it applies the resource "
            "limits. Install util-linux (`apt-get install util-linux`). " + OPT_OUT,
        )
    return found_bwrap, found_prlimit


async def probe(
    build: Callable[[Path, Sequence[str]], list[str]],
    key: tuple[str, ...],
    seconds: float = PROBE_TIMEOUT_SECONDS,
    pass_fds: tuple[int, ...] = (),
) -> None:
    """Run ``build(workspace, ["/bin/true"])`` once per ``key``; raise (from cache) if it
    failed (a timeout is not cached: the next call probes again). ``build`` returns the full
    argv of a sandboxed command; ``pass_fds`` are the file descriptors it names."""
    if key in _cache:
        cached = _cache[key]
        if cached is not None:
            raise cached
        return
    error = await _run_probe(build, seconds, pass_fds)
    if error is None or error.cause != "probe-timeout":
        _cache[key] = error  # a timeout says nothing lasting (a loaded machine): tried again
    if error is not None:
        raise error


async def _run_probe(
    build: Callable[[Path, Sequence[str]], list[str]], seconds: float, pass_fds: tuple[int, ...]
) -> SandboxUnavailable | None:
    true = shutil.which("true") or "/bin/true"
    with tempfile.TemporaryDirectory(prefix="plait-sandbox-probe-") as folder:
        try:
            process = await asyncio.create_subprocess_exec(
                *build(Path(folder), [true]),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env={},
                start_new_session=True,
                pass_fds=pass_fds,
            )
        except OSError as err:
            return SandboxUnavailable(
                "bwrap-failed", f"bwrap could not be started: {err}. {OPT_OUT}"
            )
        assert process.stderr is not None
        try:
            async with asyncio.timeout(seconds):
                err_bytes = await process.stderr.read(_STDERR_CAP)
                while await process.stderr.read(65_536):
                    pass  # the rest is drained, not kept
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            return SandboxUnavailable(
                "probe-timeout",
                f"The bubblewrap probe did not finish within {seconds:g}s (a hanging network "
                "file system such as NFS or autofs?). " + OPT_OUT,
            )
    if process.returncode == 0:
        return None
    return diagnose(err_bytes.decode("utf-8", "replace"), process.returncode)
