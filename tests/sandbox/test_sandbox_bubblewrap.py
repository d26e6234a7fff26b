"""The sandbox layer on its own (a real ``bwrap``): policy checks, the argv it builds, runs,
cancellation, ``aclose()``, and the explicit unsandboxed runner."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from plait.sandbox import (
    DEFAULT_READ_DENY,
    MIB,
    BubblewrapSandbox,
    RunningProcess,
    Sandbox,
    SandboxClosed,
    SandboxCommand,
    SandboxLimits,
    SandboxPolicy,
    SandboxPolicyInvalid,
    UnsandboxedRunner,
)


def command(workspace: Path, *argv: str, timeout: float = 20, cap: int = 10_000) -> SandboxCommand:
    return SandboxCommand(tuple(argv), workspace, timeout, cap)


def py(workspace: Path, code: str, *args: str, **kw: Any) -> SandboxCommand:
    return command(workspace, sys.executable, "-c", code, *args, **kw)


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            continue
    return found


SLEEPER = "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(600)\n"


@pytest.mark.parametrize(
    ("policy", "needle"),
    [
        (SandboxPolicy(network="maybe"), "network must be 'off' or 'on'"),  # type: ignore[arg-type]
        (SandboxPolicy(unix_sockets="yes"), "unix_sockets must be"),  # type: ignore[arg-type]
        (SandboxPolicy(write_allow="/tmp"), "tuple of paths"),  # type: ignore[arg-type]
        (SandboxPolicy(write_allow=("relative/dir",)), "absolute path"),
        (SandboxPolicy(read_deny=("/",)), "may not contain '/'"),
        (SandboxPolicy(read_deny=("/*",)), "may not contain '/'"),
        (SandboxPolicy(write_allow=("//",)), "may not contain '/'"),  # POSIX keeps '//'
        (SandboxPolicy(read_deny=("//*",)), "may not contain '/'"),
        (SandboxPolicy(write_deny=("/home/*/.ssh",)), "'\\*' matches folders in read_deny only"),
        (SandboxPolicy(write_allow=("/srv/*",)), "'\\*' matches folders in read_deny only"),
        (SandboxPolicy(write_deny=("/srv/a*",)), "'\\*' matches folders in read_deny only"),
        # a glob the policy does not expand would hide nothing, silently
        (SandboxPolicy(read_deny=("~/.config/*.json",)), "only a whole '\\*' component"),
        (SandboxPolicy(read_deny=("/home/*/.ssh*",)), "only a whole '\\*' component"),
        (SandboxPolicy(limits=SandboxLimits(cpu_seconds=0)), "cpu_seconds must be"),
        (SandboxPolicy(limits=SandboxLimits(memory_bytes=MIB)), "below 64 MiB"),
        (SandboxPolicy(limits=SandboxLimits(open_files=3)), "open_files must be at least 16"),
        (SandboxPolicy(limits=SandboxLimits(processes=0)), "processes must be >= 1"),
        (SandboxPolicy(limits=SandboxLimits(wall_seconds=float("nan"))), "wall_seconds"),
        (SandboxPolicy(limits=SandboxLimits(wall_seconds="5")), "wall_seconds"),  # type: ignore[arg-type]
        (SandboxPolicy(limits=None), "limits must be a SandboxLimits"),  # type: ignore[arg-type]
        (SandboxPolicy(private_tmp="no"), "private_tmp must be True or False"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_policy_is_a_typed_error_saying_what_to_fix(
    policy: SandboxPolicy, needle: str
) -> None:
    with pytest.raises(SandboxPolicyInvalid, match=needle):
        BubblewrapSandbox(policy)


@pytest.mark.parametrize("make", [BubblewrapSandbox, UnsandboxedRunner])
@pytest.mark.parametrize(
    ("seconds", "cap", "argv", "needle"),
    [
        (float("nan"), 10, ("/bin/true",), "timeout must be a finite number"),
        (float("inf"), 10, ("/bin/true",), "timeout must be a finite number"),
        (-1.0, 10, ("/bin/true",), "timeout must be a finite number"),
        (5.0, 0, ("/bin/true",), "max_output_bytes must be an integer >= 1"),
        (5.0, 10, (), "argv must be a non-empty tuple"),
    ],
)
async def test_a_command_without_a_deadline_or_argv_is_refused_before_it_starts(
    tmp_path: Path, make: Any, seconds: float, cap: int, argv: tuple[str, ...], needle: str
) -> None:
    with pytest.raises(SandboxPolicyInvalid, match=needle):
        await make().run(SandboxCommand(argv, tmp_path, seconds, cap))


def test_the_default_policy_is_the_safe_one() -> None:
    policy = SandboxPolicy()
    assert policy.network == "off" and policy.write_allow == () and policy.private_tmp
    assert "~/.ssh" in policy.read_deny and policy.read_deny == DEFAULT_READ_DENY
    assert policy.limits.prlimit_args() == [
        "--cpu=60:61",
        f"--as={2048 * MIB}:{2048 * MIB}",
        "--nofile=256:256",
        f"--fsize={256 * MIB}:{256 * MIB}",
        "--core=0:0",
    ]


def test_the_bwrap_command_line(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    allowed = tmp_path / "out"
    allowed.mkdir()
    box = BubblewrapSandbox(
        SandboxPolicy(read_deny=(str(secret), "/no/such/path"), write_allow=(str(allowed),))
    )
    args = box.bwrap_args(tmp_path)
    for flag in ("--new-session", "--die-with-parent", "--unshare-pid", "--unshare-net"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    mounts = (
        f"--ro-bind / / --dev /dev --size {64 * MIB} --tmpfs /dev/shm --proc /proc "
        f"--size {256 * MIB} --tmpfs /tmp"
    )
    assert " ".join(args).count(mounts) == 1  # memory-backed mounts are size-capped
    assert ["--bind", str(allowed), str(allowed)] == args[args.index("--bind") :][:3]
    # a hidden folder inside the workspace is hidden after the binds
    assert ["--tmpfs", str(secret), "--remount-ro", str(secret)] == args[
        args.index(str(secret)) - 1 :
    ][:4]
    # one holding the workspace before them, made read-only last
    above = BubblewrapSandbox(SandboxPolicy(read_deny=(str(tmp_path),))).bwrap_args(secret)
    assert above.index(str(tmp_path)) < above.index("--bind")
    assert above[-6:-2] == ["--remount-ro", str(tmp_path), "--remount-ro", "/dev"]
    assert "/no/such/path" not in args and args[-4:] == [
        "--remount-ro",
        "/dev",  # last: nothing can be written into /dev itself (a tmpfs: memory)
        "--chdir",
        str(tmp_path),
    ]
    nested = BubblewrapSandbox(SandboxPolicy(network="on"), mount_proc=False).bwrap_args(tmp_path)
    assert "--proc" not in nested and "--unshare-net" not in nested


async def test_an_interpreter_in_a_virtualenv_under_tmp_stays_visible(tmp_path: Path) -> None:
    # venv/bin/python -> base/bin/python -> the real interpreter: both prefixes under /tmp
    # are bound back read-only over the private /tmp.
    base, venv = tmp_path / "base", tmp_path / "venv"
    for prefix in (base, venv):
        (prefix / "bin").mkdir(parents=True)
    (base / "bin" / "python").symlink_to(sys.executable)
    python = venv / "bin" / "python"
    python.symlink_to(base / "bin" / "python")
    box = BubblewrapSandbox()
    args = box.bwrap_args(tmp_path / "ws", str(python))
    binds = " ".join(args[args.index("/tmp") + 1 : args.index("--bind")])
    assert f"--ro-bind {venv} {venv} --ro-bind {base} {base}" in binds
    (tmp_path / "ws").mkdir()
    run = await box.run(py_with(python, tmp_path / "ws", "print('from the venv')"))
    assert (run.exit_code, run.output) == (0, "from the venv\n")
    assert box.bwrap_args(tmp_path, "/usr/bin/python3") == box.bwrap_args(tmp_path)


def test_a_virtualenv_made_with_copies_keeps_its_base_pythons_prefix_visible(
    tmp_path: Path,
) -> None:
    # venv --copies: bin/python is a file, not a link; its stdlib lives in pyvenv.cfg's home.
    home = tmp_path / "home"
    base, venv = home / ".pyenv" / "versions" / "3.12", home / "proj" / ".venv"
    for prefix in (base, venv):
        (prefix / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_bytes(b"")
    (venv / "pyvenv.cfg").write_text(
        f"home = {base / 'bin'}\ninclude-system-site-packages = false\n"
    )
    box = BubblewrapSandbox(SandboxPolicy(read_deny=(str(home),), private_tmp=False))
    args = " ".join(box.bwrap_args(tmp_path / "ws", str(venv / "bin" / "python")))
    assert f"--ro-bind {venv} {venv} --ro-bind {base} {base}" in args


def py_with(python: Path, workspace: Path, code: str) -> SandboxCommand:
    return command(workspace, str(python), "-c", code)


def test_a_missing_write_allow_path_is_refused_when_a_run_starts(tmp_path: Path) -> None:
    box = BubblewrapSandbox(SandboxPolicy(write_allow=(str(tmp_path / "missing"),)))
    with pytest.raises(SandboxPolicyInvalid, match="does not exist; create it"):
        box.bwrap_args(tmp_path)


async def test_a_run_reports_exit_code_output_and_sandbox(tmp_path: Path) -> None:
    box = BubblewrapSandbox()
    assert isinstance(box, Sandbox) and isinstance(UnsandboxedRunner(), Sandbox)
    run = await box.run(
        py(tmp_path, "import os; print(os.getpid(), os.getcwd()); raise SystemExit(4)")
    )
    assert (run.exit_code, run.sandbox, run.timed_out) == (4, "bubblewrap", False)
    assert run.output.split() == ["2", str(tmp_path)]  # pid 2 in its own PID namespace


IO_URING_SETUP = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "params = ctypes.create_string_buffer(120)\n"
    "fd = libc.syscall(425, 4, params)\n"
    "print('refused' if fd < 0 and ctypes.get_errno() == 1 else f'ring {fd}')\n"
)


async def test_io_uring_is_refused_as_it_would_get_around_the_socket_filter(
    tmp_path: Path,
) -> None:
    # IORING_OP_SOCKET / IORING_OP_CONNECT create and connect an AF_UNIX socket without the
    # socket() system call, so the seccomp filter must refuse io_uring itself.
    run = await BubblewrapSandbox().run(py(tmp_path, IO_URING_SETUP))
    assert run.output.strip() == "refused"
    allowed = BubblewrapSandbox(SandboxPolicy(unix_sockets="on"))
    assert (await allowed.run(py(tmp_path, IO_URING_SETUP))).output.startswith("ring ")


async def test_cancelling_a_run_kills_its_tree_before_the_cancellation_lands(
    tmp_path: Path,
) -> None:
    box = BubblewrapSandbox()
    marker = f"plait-cancel-{uuid.uuid4().hex}"
    started: list[RunningProcess] = []
    task = asyncio.create_task(box.run(py(tmp_path, SLEEPER, marker), on_start=started.append))
    for _ in range(1000):
        # bwrap outside, bwrap's init inside, the script, its setsid child
        if started and len(processes_with(marker)) >= 4:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert started[0].returncode is not None
    assert processes_with(marker) == []


@pytest.mark.parametrize("make", [BubblewrapSandbox, UnsandboxedRunner])
async def test_aclose_kills_every_running_tree_and_refuses_new_runs(
    tmp_path: Path, make: Any
) -> None:
    box = make()
    marker = f"plait-aclose-{uuid.uuid4().hex}"
    code = "import time\ntime.sleep(600)\n"
    runs = [asyncio.create_task(box.run(py(tmp_path, code, marker))) for _ in range(2)]
    for _ in range(1000):
        if len(processes_with(marker)) >= 2:
            break
        await asyncio.sleep(0.01)
    await box.aclose()
    assert processes_with(marker) == []
    for run in runs:
        assert (await run).exit_code != 0
    with pytest.raises(SandboxClosed, match="create a new one"):
        await box.run(py(tmp_path, "pass"))
    await box.aclose()  # idempotent


async def test_the_wall_time_limit_caps_a_longer_timeout(tmp_path: Path) -> None:
    box = BubblewrapSandbox(SandboxPolicy(limits=SandboxLimits(wall_seconds=0.5)))
    run = await box.run(py(tmp_path, "import time; time.sleep(60)", timeout=60))
    assert run.timed_out and run.exit_code != 0


async def test_open_files_and_file_size_limits_are_named(tmp_path: Path) -> None:
    limits = SandboxLimits(open_files=32, file_size_bytes=MIB)
    box = BubblewrapSandbox(SandboxPolicy(limits=limits))
    many = await box.run(py(tmp_path, "[open('/dev/null') for _ in range(100)]"))
    assert many.limit == "open_files=32 (open file limit reached)"
    big = await box.run(py(tmp_path, "open('big', 'wb').write(b'x' * (4 * 1024 * 1024))"))
    assert big.limit == f"file_size_bytes={MIB} (file size limit reached, SIGXFSZ)"
    assert (tmp_path / "big").stat().st_size <= MIB


BACKGROUND = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', sys.argv[1]])\n"
    "print('done')\n"
)


@pytest.mark.parametrize("make", [BubblewrapSandbox, UnsandboxedRunner])
async def test_a_background_child_holding_the_output_pipe_does_not_make_a_run_time_out(
    tmp_path: Path, make: Any
) -> None:
    marker = f"plait-background-{uuid.uuid4().hex}"
    run = await make().run(py(tmp_path, BACKGROUND, marker, timeout=60))
    assert (run.exit_code, run.output.strip(), run.timed_out) == (0, "done", False)
    assert processes_with(marker) == []  # the straggler was killed with its group


async def test_unsandboxed_is_named_and_unlimited(tmp_path: Path) -> None:
    run = await UnsandboxedRunner().run(py(tmp_path, "import os; print(os.getpid() > 2)"))
    assert (run.sandbox, run.output.strip(), run.limit) == ("unsandboxed", "True", None)


NEW_USERNS = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "if libc.unshare(0x10000000 | 0x00020000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS\n"
    "    print('made', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    "else:\n"
    "    print('refused', os.strerror(ctypes.get_errno()))\n"
)


async def test_a_run_cannot_make_a_user_namespace_unless_the_policy_allows_it(
    tmp_path: Path,
) -> None:
    box = BubblewrapSandbox()
    assert box.userns_guard is None  # not checked yet
    run = await box.run(py(tmp_path, NEW_USERNS))
    assert run.output.startswith("refused "), run.output
    assert box.userns_guard == "bwrap --disable-userns"  # bubblewrap 0.8+ (Debian 12: 0.8.0)
    assert "--disable-userns" in box.bwrap_args(tmp_path)
    allowed = BubblewrapSandbox(SandboxPolicy(user_namespaces="on"))
    made = await allowed.run(py(tmp_path, NEW_USERNS))
    assert made.output.startswith("made "), made.output  # every capability inside
    assert allowed.userns_guard == "none" and "--disable-userns" not in allowed.bwrap_args(tmp_path)


async def test_the_hosts_network_interface_names_are_hidden(tmp_path: Path) -> None:
    assert os.listdir("/sys/class/net")  # the host has some (lo at least)
    code = "import os; print(sorted(os.listdir('/sys/class/net')), socket_names())"
    code = (
        "import socket\ndef socket_names(): return [n for _, n in socket.if_nameindex()]\n" + code
    )
    run = await BubblewrapSandbox().run(py(tmp_path, code))
    assert run.output.strip() == "[] ['lo']"  # its own namespace has only loopback
