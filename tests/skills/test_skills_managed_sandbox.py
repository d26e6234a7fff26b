"""Managed mode: skill scripts run in the bubblewrap sandbox (a real ``bwrap``), each case a
real script in a skill folder called through the ``run_<skill>_<script>`` tool the model calls."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.sandbox import (
    MIB,
    TRUNCATION_MARKER,
    BubblewrapSandbox,
    SandboxLimits,
    SandboxPolicy,
    UnsandboxedRunner,
)
from plait.skills import FilesystemSource
from plait.skills.managed import (
    ScriptConfig,
    SkillLoaded,
    SkillLoadFailed,
    SkillManager,
    SkillSandboxUnavailable,
    allow_all,
    create_skill_manager,
)

SKILL_MD = "---\nname: box\ndescription: Sandbox probes. Use for tests.\n---\nRun them.\n"

SPAWN = """\
import os, sys, time
flags, marker = sys.argv[1], sys.argv[2]
stubborn = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').close(); time.sleep(600)"
)
pid = os.fork()
if pid == 0:  # a child that ignores SIGTERM
    os.execv(sys.executable, [sys.executable, "-c", stubborn, flags + "/child", marker])
if os.fork() == 0:  # a double-forked grandchild in its own session
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", stubborn, flags + "/grandchild", marker])
    os._exit(0)
time.sleep(600)
"""

SCRIPTS = {
    "scripts/write.py": (
        "import sys\nopen(sys.argv[1], 'w').write('escaped')\nprint('wrote', sys.argv[1])\n"
    ),
    "scripts/read.py": (
        "import os, sys\nprint(repr(open(sys.argv[1]).read()))\n"
        "print(sorted(os.listdir(sys.argv[2])))\n"
    ),
    "scripts/connect.py": (
        "import socket, sys\n"
        "socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5).close()\n"
        "print('connected')\n"
    ),
    "scripts/spawn.py": SPAWN,
    "scripts/unix.py": (
        "import asyncio, socket, sys\n"
        "asyncio.run(asyncio.sleep(0))  # socketpair (asyncio's self-pipe) still works\n"
        "client = socket.socket(socket.AF_UNIX)\nclient.connect(sys.argv[1])\n"
        "print('connected')\n"
    ),
    "scripts/hog.py": "data = bytearray(512 * 1024 * 1024)\nprint(len(data))\n",
    "scripts/spin.py": "while True:\n    pass\n",
    "scripts/devnull.py": (
        "import subprocess\nopen('/dev/null', 'w').write('x')\n"
        "assert open('/dev/null').read() == ''\n"
        "subprocess.run(['true'], stdout=subprocess.DEVNULL, check=True)\nprint('devnull ok')\n"
    ),
    "scripts/flood.py": "import sys\nsys.stdout.write('y' * 10_000_000)\n",
    "scripts/env.py": "import json, os\nprint(json.dumps(dict(os.environ)))\n",
    "scripts/hello.sh": 'echo "hello $1"\n',
}


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "box"
    for rel, content in {"SKILL.md": SKILL_MD, **SCRIPTS}.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(content)
    return tmp_path / "skills"


async def manager(root: Path, sandbox: Any = None, **config: Any) -> SkillManager:
    config.setdefault("timeout", 20)
    scripts = ScriptConfig(sandbox=sandbox or BubblewrapSandbox(), **config)
    m = await create_skill_manager(
        sources=[FilesystemSource(root)], gate=allow_all, scripts=scripts, close_timeout=0.1
    )
    await m.load("box")
    return m


async def call(m: SkillManager, name: str, args: dict[str, Any]) -> str:
    model = ScriptedModel([ToolCall("c1", name, args), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    return message.text


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (the host sees every PID namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


OUTSIDE = Path("/var/tmp")  # on the host's read-only root, not under the private /tmp


async def test_writing_outside_the_workspace_fails(skills_root: Path) -> None:
    outside = OUTSIDE / f"escape-{uuid.uuid4().hex}.txt"
    m = await manager(skills_root)
    text = await call(m, "run_box_write", {"args": [str(outside)]})
    assert text.startswith("Error (SCRIPT_FAILED): Script scripts/write.py exited 1")
    assert "Read-only file system" in text and "sandbox=bubblewrap" in text
    assert not outside.exists()
    inside = await call(m, "run_box_write", {"args": ["inside.txt"]})
    template = m.record("box").workspace
    assert template is not None and not (template.root / "inside.txt").exists()
    workspace = list(template.threads.values())[-1]  # the last thread's own copy
    assert (workspace.root / "inside.txt").read_text() == "escaped"
    assert inside.startswith("Script scripts/write.py exited 0")
    await m.aclose()


async def test_write_allow_opens_a_host_folder_and_write_deny_closes_part_of_it(
    skills_root: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "locked").mkdir(parents=True)
    policy = SandboxPolicy(write_allow=(str(shared),), write_deny=(str(shared / "locked"),))
    m = await manager(skills_root, BubblewrapSandbox(policy))
    ok = await call(m, "run_box_write", {"args": [str(shared / "out.txt")]})
    assert ok.startswith("Script scripts/write.py exited 0")
    assert (shared / "out.txt").read_text() == "escaped"
    denied = await call(m, "run_box_write", {"args": [str(shared / "locked" / "x.txt")]})
    assert "Read-only file system" in denied and not (shared / "locked" / "x.txt").exists()
    await m.aclose()


async def test_reading_a_denied_path_gets_nothing(skills_root: Path, tmp_path: Path) -> None:
    secret_file = tmp_path / "token.txt"
    secret_file.write_text("sk-secret-file")
    secret_dir = tmp_path / "creds"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("sk-secret-dir")
    # private_tmp=False so the host's /tmp (where tmp_path is) is visible but for read_deny.
    policy = SandboxPolicy(read_deny=(str(secret_file), str(secret_dir)), private_tmp=False)
    m = await manager(skills_root, BubblewrapSandbox(policy))
    text = await call(m, "run_box_read", {"args": [str(secret_file), str(secret_dir)]})
    assert text.startswith("Script scripts/read.py exited 0")
    assert "''\n[]" in text and "sk-secret" not in text
    visible = SandboxPolicy(read_deny=(), private_tmp=False)
    open_box = await manager(skills_root, BubblewrapSandbox(visible))
    seen = await call(open_box, "run_box_read", {"args": [str(secret_file), str(secret_dir)]})
    assert "'sk-secret-file'\n['key']" in seen
    await m.aclose()
    await open_box.aclose()


async def test_tcp_to_localhost_fails_with_network_off_and_works_with_it_on(
    skills_root: Path, listener: int
) -> None:
    off = await manager(skills_root)
    refused = await call(off, "run_box_connect", {"args": [str(listener)]})
    assert refused.startswith("Error (SCRIPT_FAILED): Script scripts/connect.py exited 1")
    assert "ConnectionRefusedError" in refused
    on = await manager(skills_root, BubblewrapSandbox(SandboxPolicy(network="on")))
    connected = await call(on, "run_box_connect", {"args": [str(listener)]})
    assert connected.startswith("Script scripts/connect.py exited 0") and "connected" in connected
    await off.aclose()
    await on.aclose()


async def test_host_unix_sockets_are_out_of_reach_unless_allowed(
    skills_root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(4)
    try:
        # private_tmp=False: the socket's folder is visible (read-only) to the script
        off = await manager(skills_root, BubblewrapSandbox(SandboxPolicy(private_tmp=False)))
        refused = await call(off, "run_box_unix", {"args": [str(path)]})
        assert refused.startswith("Error (SCRIPT_FAILED): Script scripts/unix.py exited 1")
        assert "PermissionError: [Errno 1] Operation not permitted" in refused
        allowed = SandboxPolicy(private_tmp=False, unix_sockets="on")
        on = await manager(skills_root, BubblewrapSandbox(allowed))
        connected = await call(on, "run_box_unix", {"args": [str(path)]})
        assert connected.startswith("Script scripts/unix.py exited 0")
    finally:
        server.close()
    await off.aclose()
    await on.aclose()


async def wait_for_flags(flags: Path) -> None:
    for _ in range(1000):
        if (flags / "child").exists() and (flags / "grandchild").exists():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the script's children never started")


async def test_timeout_kills_a_sigterm_ignoring_child_and_a_double_forked_grandchild(
    skills_root: Path, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    marker = f"plait-marker-{uuid.uuid4().hex}"
    sandbox = BubblewrapSandbox(SandboxPolicy(write_allow=(str(flags),)))
    m = await manager(skills_root, sandbox, timeout=20)
    call_task = asyncio.create_task(
        call(m, "run_box_spawn", {"args": [str(flags), marker], "timeout_seconds": 3})
    )
    await wait_for_flags(flags)
    assert len(processes_with(marker)) >= 2  # bwrap's own argv holds the marker too
    text = await call_task
    assert text.startswith("Error (SCRIPT_TIMEOUT): Script scripts/spawn.py ran past its 3s")
    assert processes_with(marker) == []
    await m.aclose()


async def test_dispose_kills_a_sigterm_ignoring_child_and_a_double_forked_grandchild(
    skills_root: Path, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    marker = f"plait-marker-{uuid.uuid4().hex}"
    sandbox = BubblewrapSandbox(SandboxPolicy(write_allow=(str(flags),)))
    m = await manager(skills_root, sandbox, timeout=60)
    call_task = asyncio.create_task(call(m, "run_box_spawn", {"args": [str(flags), marker]}))
    await wait_for_flags(flags)
    assert len(processes_with(marker)) >= 2  # bwrap's own argv holds the marker too
    await m.aclose()
    assert processes_with(marker) == []
    assert (await call_task).startswith("Error (SCRIPT_FAILED): Script scripts/spawn.py exited")


EXIT_CHECK = """\
import asyncio, json, os, sys, uuid
from pathlib import Path
from plait import Agent, ScriptedModel, ToolCall, ToolMessage
from plait.sandbox import BubblewrapSandbox, SandboxPolicy, UnsandboxedRunner
from plait.skills import FilesystemSource
from plait.skills.managed import ScriptConfig, allow_all, create_skill_manager

def processes_with(marker):
    found = []
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found

async def main(root, flags):
    report = {}
    for case in ("timeout", "dispose", "unsandboxed"):
        marker = sys.argv[3] + "-" + case
        box = BubblewrapSandbox(SandboxPolicy(write_allow=(flags,)))
        if case == "unsandboxed":
            box = UnsandboxedRunner()
        m = await create_skill_manager(
            sources=[FilesystemSource(root)], gate=allow_all,
            scripts=ScriptConfig(timeout=60, sandbox=box), close_timeout=0.1)
        await m.load("box")
        args = {"args": [flags, marker]}
        if case != "dispose":
            args["timeout_seconds"] = 2
        model = ScriptedModel([ToolCall("c1", "run_box_spawn", args), "done"])
        turn = asyncio.create_task(Agent(model, middleware=[*m.middleware]).run("go"))
        while not (os.path.exists(flags + "/child") and os.path.exists(flags + "/grandchild")):
            await asyncio.sleep(0.01)
        started = len(processes_with(marker)) >= 2
        if case == "dispose":
            await m.aclose()
        result = await turn
        await m.aclose()
        [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
        left = len(processes_with(marker))
        code = message.text.split(":")[0]
        report[case] = [started, left if case != "unsandboxed" else left > 0, code]
        for name in ("child", "grandchild"):
            os.remove(flags + "/" + name)
    print(json.dumps(report))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_no_warning_at_interpreter_exit_after_timeout_and_dispose(
    skills_root: Path, tmp_path: Path
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    marker = f"plait-exit-{uuid.uuid4().hex}"
    try:
        done = subprocess.run(
            [sys.executable, "-c", EXIT_CHECK, str(skills_root), str(flags), marker],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
    finally:
        for pid in processes_with(marker):  # the unsandboxed case's escaped grandchild
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "timeout": [True, 0, "Error (SCRIPT_TIMEOUT)"],
        "dispose": [True, 0, "Error (SCRIPT_FAILED)"],
        # unsandboxed: the double-forked grandchild escapes the process group and survives
        # (documented), yet nothing is left for the garbage collector at exit either
        "unsandboxed": [True, True, "Error (SCRIPT_TIMEOUT)"],
    }
    assert "Exception ignored" not in done.stderr and "Event loop is closed" not in done.stderr
    assert done.stderr == ""


async def test_a_memory_hog_over_its_limit_is_stopped_and_reported(skills_root: Path) -> None:
    limits = SandboxLimits(memory_bytes=256 * MIB)
    m = await manager(skills_root, BubblewrapSandbox(SandboxPolicy(limits=limits)))
    text = await call(m, "run_box_hog", {})
    assert text.startswith("Error (SCRIPT_FAILED): Script scripts/hog.py exited 1")
    assert f"Resource limit hit: memory_bytes={256 * MIB} (memory limit reached)" in text
    assert "MemoryError" in text
    await m.aclose()


async def test_a_cpu_spinner_over_its_limit_is_stopped_and_reported(skills_root: Path) -> None:
    limits = SandboxLimits(cpu_seconds=1)
    m = await manager(skills_root, BubblewrapSandbox(SandboxPolicy(limits=limits)))
    text = await call(m, "run_box_spin", {})
    assert text.startswith("Error (SCRIPT_FAILED): Script scripts/spin.py exited 152")
    assert "Resource limit hit: cpu_seconds=1 (CPU time limit reached, SIGXCPU)" in text
    await m.aclose()


async def test_dev_null_works(skills_root: Path) -> None:
    m = await manager(skills_root)
    text = await call(m, "run_box_devnull", {})
    assert text.startswith("Script scripts/devnull.py exited 0") and "devnull ok" in text
    await m.aclose()


async def test_an_output_flood_is_capped(skills_root: Path) -> None:
    m = await manager(skills_root, max_output_bytes=1000)
    text = await call(m, "run_box_flood", {})
    assert "captured 1000 bytes; truncated=True; sandbox=bubblewrap" in text
    assert text.endswith("y" * 1000 + TRUNCATION_MARKER)
    await m.aclose()


async def test_the_environment_holds_no_api_key(
    skills_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-scripts")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-scripts")
    m = await manager(skills_root, env={"LANG": "C.UTF-8"})
    text = await call(m, "run_box_env", {})
    env = json.loads(text.split("\n", 1)[1])
    assert set(env) <= {"LANG", "PWD", "LC_CTYPE"} and env["LANG"] == "C.UTF-8"
    assert "sk-" not in text
    await m.aclose()


async def test_shell_scripts_run_sandboxed_too(skills_root: Path) -> None:
    m = await manager(skills_root)
    text = await call(m, "run_box_hello", {"args": ["world; id"]})
    assert text.startswith("Script scripts/hello.sh exited 0") and "hello world; id" in text
    await m.aclose()


async def test_the_nested_container_variant_runs_without_a_fresh_proc(skills_root: Path) -> None:
    m = await manager(skills_root, BubblewrapSandbox(mount_proc=False))
    text = await call(m, "run_box_devnull", {})
    assert text.startswith("Script scripts/devnull.py exited 0")
    await m.aclose()


async def test_missing_bwrap_fails_the_load_with_a_typed_error(skills_root: Path) -> None:
    with pytest.raises(SkillSandboxUnavailable) as info:
        await manager(skills_root, BubblewrapSandbox(bwrap="plait-no-such-bwrap"))
    assert info.value.code == "SANDBOX_UNAVAILABLE" and info.value.cause == "bwrap-missing"
    assert "apt-get install bubblewrap" in str(info.value)
    assert "UnsandboxedRunner()" in str(info.value) and "--sandbox none" in str(info.value)


async def test_a_missing_write_allow_folder_fails_the_load(
    skills_root: Path, tmp_path: Path
) -> None:
    policy = SandboxPolicy(write_allow=(str(tmp_path / "not-created"),))
    with pytest.raises(SkillLoadFailed, match="does not exist; create it or remove it"):
        await manager(skills_root, BubblewrapSandbox(policy))


async def test_missing_bwrap_on_path_fails_the_load(
    skills_root: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(SkillSandboxUnavailable) as info:
        await manager(skills_root)
    assert info.value.cause == "bwrap-missing" and "Nothing was loaded" in str(info.value)


@pytest.mark.parametrize(
    ("message", "cause", "fix"),
    [
        (
            "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
            "proc-mount-refused",
            "BubblewrapSandbox(mount_proc=False)",
        ),
        (
            "bwrap: Creating new namespace failed: Operation not permitted",
            "user-namespaces-blocked",
            "max_user_namespaces",
        ),
        (
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
            "apparmor-userns",
            "apparmor_restrict_unprivileged_userns",
        ),
    ],
)
async def test_a_bwrap_that_does_not_work_here_names_the_cause_and_the_fix(
    skills_root: Path, tmp_path: Path, message: str, cause: str, fix: str
) -> None:
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    (tmp_path / "message.txt").write_text(message + "\n")
    fake.write_text(f"#!/bin/sh\ncat {tmp_path / 'message.txt'} >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SkillSandboxUnavailable) as info:
        await manager(skills_root, BubblewrapSandbox(bwrap=str(fake)))
    assert info.value.cause == cause
    assert fix in str(info.value) and "UnsandboxedRunner()" in str(info.value)


async def test_unsandboxed_runs_only_when_chosen_and_says_so_everywhere(
    skills_root: Path,
) -> None:
    m = await create_skill_manager(
        sources=[FilesystemSource(skills_root)],
        gate=allow_all,
        scripts=ScriptConfig(timeout=20, sandbox=UnsandboxedRunner()),
    )
    load = ToolCall("l1", "load_skill", {"skill": "box"})
    model = ScriptedModel([load, ToolCall("c1", "run_box_hello", {}), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    [loaded] = [e for e in result.events if isinstance(e, SkillLoaded)]
    assert loaded.sandbox == "unsandboxed"
    tool = next(t for t in m.record("box").tools if t.name == "run_box_hello")
    assert tool.definition.metadata["sandbox"] == "unsandboxed"
    assert "UNSANDBOXED" in tool.definition.description
    texts = [x.text for x in result.new_messages if isinstance(x, ToolMessage)]
    assert (
        texts[-1].startswith("Script scripts/hello.sh exited 0")
        and "sandbox=unsandboxed" in (texts[-1])
    )
    await m.aclose()
