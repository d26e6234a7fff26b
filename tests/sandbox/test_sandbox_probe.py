"""The first-use check: missing tools, a hanging probe, the cache, the diagnosis table."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from plait.sandbox import BubblewrapSandbox, SandboxCommand, SandboxPolicy, SandboxUnavailable
from plait.sandbox.probe import diagnose


def fake_bwrap(folder: Path, body: str) -> Path:
    path = folder / "bin" / "bwrap"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


async def test_missing_prlimit_names_util_linux() -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install util-linux") as info:
        await BubblewrapSandbox(prlimit="plait-no-such-prlimit").check()
    assert info.value.cause == "prlimit-missing"


async def test_a_hanging_probe_is_cut_at_its_deadline(tmp_path: Path) -> None:
    bwrap = fake_bwrap(tmp_path, "exec sleep 30")
    box = BubblewrapSandbox(bwrap=str(bwrap), probe_timeout=0.3)
    with pytest.raises(SandboxUnavailable, match="NFS or autofs") as info:
        await box.check()
    assert info.value.cause == "probe-timeout"


async def test_a_probe_that_timed_out_is_tried_again_not_cached(tmp_path: Path) -> None:
    # A probe cut at its deadline (a loaded machine, an NFS hiccup) says nothing lasting about
    # this machine: caching it would disable every sandbox of the process until a restart.
    flag = tmp_path / "slow-once"
    bwrap = fake_bwrap(tmp_path, f"[ -e {flag} ] && exit 0; touch {flag}; exec sleep 30")
    box = BubblewrapSandbox(bwrap=str(bwrap), probe_timeout=0.3)
    with pytest.raises(SandboxUnavailable) as info:
        await box.check()
    assert info.value.cause == "probe-timeout"
    await box.check()  # the machine answers now: the sandbox works


async def test_the_probe_runs_once_per_command_shape(tmp_path: Path) -> None:
    count = tmp_path / "count"
    bwrap = fake_bwrap(tmp_path, f"echo probe >> {count}")
    for _ in range(3):
        await BubblewrapSandbox(bwrap=str(bwrap)).check()
    await BubblewrapSandbox(bwrap=str(bwrap), mount_proc=False).check()
    assert count.read_text().splitlines() == ["probe", "probe"]


async def test_a_failed_probe_stays_failed_and_never_falls_back(tmp_path: Path) -> None:
    bwrap = fake_bwrap(
        tmp_path, "echo 'bwrap: Failed to make / slave: Permission denied' >&2; exit 1"
    )
    box = BubblewrapSandbox(bwrap=str(bwrap))
    for _ in range(2):
        with pytest.raises(SandboxUnavailable) as info:
            await box.check()
        assert info.value.cause == "mount-propagation-refused"
    with pytest.raises(SandboxUnavailable):
        await box.run(None)  # type: ignore[arg-type]  # refused before the command is read


def test_an_unknown_failure_shows_bwraps_last_line_and_how_to_see_more() -> None:
    error = diagnose("noise\nbwrap: something new\n", 1)
    assert error.cause == "bwrap-failed"
    assert "(bwrap: something new)" in str(error) and "bwrap --ro-bind / / true" in str(error)
    assert "UnsandboxedRunner()" in str(error)


def test_the_unix_socket_filter_exists_for_x86_64_and_aarch64_only() -> None:
    from plait.sandbox.seccomp import unix_socket_filter

    x86 = unix_socket_filter("x86_64")
    arm = unix_socket_filter("aarch64")
    assert x86 is not None and len(x86) == 12 * 8  # x32 and the three io_uring calls refused
    assert arm is not None and len(arm) == 11 * 8
    assert unix_socket_filter("riscv64") is None


async def test_an_unsupported_architecture_refuses_rather_than_drops_the_filter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import platform

    from plait.sandbox import SandboxPolicy

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    with pytest.raises(SandboxUnavailable, match='unix_sockets="on"') as info:
        await BubblewrapSandbox().check()
    assert info.value.cause == "seccomp-unsupported"
    await BubblewrapSandbox(SandboxPolicy(unix_sockets="on")).check()  # explicit opt-in works


def bwrap_without_disable_userns(folder: Path) -> Path:
    """The real bwrap, as one older than 0.8 (which refuses ``--disable-userns``) would act."""
    real = shutil.which("bwrap")
    return fake_bwrap(
        folder,
        'for a in "$@"; do [ "$a" = --disable-userns ] && '
        "{ echo 'bwrap: Unknown option --disable-userns' >&2; exit 1; }; done\n"
        f'exec {real} "$@"',
    )


NEW_USERNS = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "ok = libc.unshare(0x10000000) == 0\n"
    "print('made' if ok else os.strerror(ctypes.get_errno()), end=', ')\n"
    "print(libc.syscall(435, 0, 0), os.strerror(ctypes.get_errno()))\n"
)


async def test_an_older_bwrap_falls_back_to_the_seccomp_rule_against_user_namespaces(
    tmp_path: Path,
) -> None:
    box = BubblewrapSandbox(bwrap=str(bwrap_without_disable_userns(tmp_path)))
    command = SandboxCommand((sys.executable, "-c", NEW_USERNS), tmp_path, 30, 10_000)
    run = await box.run(command)
    assert box.userns_guard == "seccomp"
    assert run.output.strip() == "Operation not permitted, -1 Function not implemented"
    threads = "import subprocess, threading; t = threading.Thread(target=print); t.start()"
    threads += "; t.join(); subprocess.run(['/bin/true'], check=True); print('ok')"
    still = await box.run(SandboxCommand((sys.executable, "-c", threads), tmp_path, 30, 10_000))
    assert still.output.split() == ["ok"]  # glibc falls back from clone3 to clone


async def test_no_way_to_refuse_user_namespaces_is_a_typed_error_not_a_weaker_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "riscv64")  # no seccomp filter here
    bwrap = str(bwrap_without_disable_userns(tmp_path))
    box = BubblewrapSandbox(SandboxPolicy(unix_sockets="on"), bwrap=bwrap)
    with pytest.raises(SandboxUnavailable, match='user_namespaces="on"') as info:
        await box.check()
    assert info.value.cause == "userns-unblockable"
    allowed = BubblewrapSandbox(SandboxPolicy(unix_sockets="on", user_namespaces="on"), bwrap=bwrap)
    await allowed.check()
    assert allowed.userns_guard == "none"
