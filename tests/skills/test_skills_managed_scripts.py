"""Managed mode: skill scripts as ``run_<skill>_<script>`` tools (argv only, workspace, limits)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait import Agent, Limits, ScriptedModel, ToolCall, ToolMessage
from plait.messages import Message
from plait.sandbox import (
    BubblewrapSandbox,
    RunningProcess,
    SandboxLimits,
    SandboxPolicy,
    UnsandboxedRunner,
)
from plait.skills import FilesystemSource, MemorySource
from plait.skills.managed import (
    InvalidSkillsConfig,
    ScriptConfig,
    SkillManager,
    SkillScriptRejected,
    SkillScriptTimeout,
    allow_all,
    create_skill_manager,
)
from plait.skills.managed.scripts import (
    DEFAULT_THREAD_WORKSPACE_BYTES,
    TRUNCATION_MARKER,
    Workspace,
    run_script,
    script_tool_name,
)

SKILL_MD = "---\nname: tools\ndescription: Script tools. Use for tests.\n---\nRun the scripts.\n"

SCRIPTS = {
    "scripts/echo.py": "import sys\nprint('|'.join(sys.argv[1:]))\n",
    "scripts/env.py": "import os\nprint(sorted(os.environ))\nprint(os.environ.get('ALLOWED'))\n",
    "scripts/cwd.py": (
        "import os\nprint(os.getcwd())\nprint(open('references/data.txt').read())\n"
        "open('written.txt', 'w').write('x')\n"
    ),
    "scripts/loud.py": "print('x' * 5000)\n",
    "scripts/fail.py": "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(3)\n",
    "scripts/slow.py": (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    ),
    "scripts/hello.sh": 'echo "sh says $1"\n',
    "scripts/notes.txt": "not a script",
    "references/data.txt": "DATA-FILE",
}


def source(**extra: str) -> MemorySource:
    return MemorySource({"tools": {"SKILL.md": SKILL_MD, **SCRIPTS, **extra}})


async def manager(src: Any = None, **options: Any) -> SkillManager:
    options.setdefault("gate", allow_all)
    options.setdefault("scripts", ScriptConfig(timeout=10))
    return await create_skill_manager(sources=[src or source()], **options)


async def call(m: SkillManager, name: str, args: dict[str, Any]) -> ToolMessage:
    """Load the skill (if needed) and run one script tool through the agent loop."""
    if "tools" not in m.loaded():
        await m.load("tools")
    model = ScriptedModel([ToolCall("c1", name, args), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go")
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    return message


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a killed process whose parent died may linger as a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never became true")


def exists(path: Path) -> bool:
    return path.exists()


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage)]


async def test_scripts_become_run_tools_only_for_configured_interpreters() -> None:
    m = await manager()
    result = await m.load("tools")
    assert set(result.tools) == {
        "run_tools_echo",
        "run_tools_env",
        "run_tools_cwd",
        "run_tools_loud",
        "run_tools_fail",
        "run_tools_slow",
        "run_tools_hello",
    }
    assert script_tool_name("pdf-kit", "scripts/sub/x.y.py") == "run_pdf-kit_sub_x_y"
    without = await manager(scripts=None)
    assert (await without.load("tools")).tools == ()
    assert without.record("tools").workspace is None


async def test_arguments_are_argv_never_a_shell(tmp_path: Path) -> None:
    m = await manager()
    marker = tmp_path / "pwned"
    payload = f"$(touch {marker}); echo hi"
    message = await call(m, "run_tools_echo", {"args": [payload, "a b", "*"]})
    assert message.text.startswith("Script scripts/echo.py exited 0")
    assert f"{payload}|a b|*" in message.text
    assert not exists(marker)


async def test_shell_scripts_run_through_their_interpreter_as_argv() -> None:
    m = await manager()
    message = await call(m, "run_tools_hello", {"args": ["$HOME; id"]})
    assert "sh says $HOME; id" in message.text


async def test_arguments_starting_with_dash_or_holding_nul_are_refused() -> None:
    m = await manager()
    dashed = await call(m, "run_tools_echo", {"args": ["--help"]})
    assert dashed.text.startswith("Error (SCRIPT_REJECTED): Script argument '--help' refused")
    nul = await call(m, "run_tools_echo", {"args": ["a\x00b"]})
    assert nul.text.startswith("Error (SCRIPT_REJECTED):") and "\\x00" in nul.text


async def test_environment_is_clean_except_what_the_config_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLAIT_TEST_SECRET", "s3cret-value")
    m = await manager(scripts=ScriptConfig(timeout=10, env={"ALLOWED": "yes"}))
    message = await call(m, "run_tools_env", {})
    assert "PLAIT_TEST_SECRET" not in message.text and "s3cret-value" not in message.text
    assert "['ALLOWED']" in message.text or "'ALLOWED'" in message.text
    assert message.text.rstrip().endswith("yes")


async def test_cwd_is_a_private_workspace_copy_of_the_skill(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "tools"
    for rel, content in {"SKILL.md": SKILL_MD, **SCRIPTS}.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    m = await manager(FilesystemSource(tmp_path / "skills"))
    message = await call(m, "run_tools_cwd", {})
    template = m.record("tools").workspace
    assert template is not None
    (workspace,) = template.threads.values()  # the thread's own copy of the template
    assert str(workspace.root.resolve()) in message.text or str(workspace.root) in message.text
    assert "DATA-FILE" in message.text
    assert exists(workspace.root / "written.txt") and not exists(template.root / "written.txt")
    assert not exists(folder / "written.txt")  # the skill's own folder is untouched


async def test_output_is_capped_with_a_truncation_marker() -> None:
    m = await manager(scripts=ScriptConfig(timeout=10, max_output_bytes=100))
    message = await call(m, "run_tools_loud", {})
    assert "captured 100 bytes; truncated=True" in message.text
    assert message.text.endswith("x" * 100 + TRUNCATION_MARKER)


async def test_non_zero_exit_is_a_typed_error_with_the_output() -> None:
    m = await manager()
    message = await call(m, "run_tools_fail", {})
    assert message.text.startswith("Error (SCRIPT_FAILED): Script scripts/fail.py exited 3")
    assert "bad input" in message.text
    lenient = await manager(scripts=ScriptConfig(timeout=10, fail_on_nonzero_exit=False))
    message = await call(lenient, "run_tools_fail", {})
    assert message.text.startswith("Script scripts/fail.py exited 3")


async def test_timeout_kills_the_whole_process_group() -> None:
    # Unsandboxed (explicitly): the process group is what it kills. The bubblewrap sandbox's
    # PID-namespace kill is tested in test_skills_managed_sandbox.py.
    m = await manager(scripts=ScriptConfig(timeout=0.5, sandbox=UnsandboxedRunner()))
    message = await call(m, "run_tools_slow", {})
    assert message.text.startswith("Error (SCRIPT_TIMEOUT): Script scripts/slow.py ran past")
    child = int(message.text.split("Output so far:\n", 1)[1].split()[0])
    for _ in range(100):
        if not alive(child):
            break
        await asyncio.sleep(0.02)
    assert not alive(child)


async def test_timeout_seconds_is_bounded_by_the_config() -> None:
    m = await manager(scripts=ScriptConfig(timeout=1, max_timeout=2))
    message = await call(m, "run_tools_echo", {"timeout_seconds": 5})
    assert message.text.startswith("Error (SCRIPT_REJECTED): timeout_seconds must be")


async def test_cancelling_a_run_kills_its_process_group(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "slow.py").write_text(SCRIPTS["scripts/slow.py"])
    config = ScriptConfig(timeout=30)
    started: list[RunningProcess] = []
    task = asyncio.create_task(
        run_script(Workspace(root), "scripts/slow.py", [], config, on_start=started.append)
    )
    await wait_until(lambda: bool(started))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert started[0].returncode is not None


async def test_direct_run_raises_typed_errors(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "slow.py").write_text("import time\ntime.sleep(5)\n")
    with pytest.raises(SkillScriptRejected):
        await run_script(Workspace(root), "scripts/slow.py", ["-x"], ScriptConfig())
    with pytest.raises(SkillScriptTimeout):
        await run_script(Workspace(root), "scripts/slow.py", [], ScriptConfig(timeout=0.2))


async def test_missing_interpreter_is_a_script_failure() -> None:
    m = await manager(scripts=ScriptConfig(interpreters={".py": ["/nonexistent/python"]}))
    message = await call(m, "run_tools_echo", {})
    assert message.text.startswith("Error (SCRIPT_FAILED): Script scripts/echo.py could not start")


async def test_script_tools_are_gated() -> None:
    def gate(ctx: Any, name: str, args: Any) -> None:
        if name.startswith("run_"):
            raise PermissionError("scripts need approval")

    m = await manager(gate=gate)
    message = await call(m, "run_tools_echo", {"args": ["x"]})
    assert message.text == (
        "Error (DENIED): run_tools_echo was refused by the gate: scripts need approval"
    )


async def test_dispose_kills_running_scripts_and_removes_the_workspace() -> None:
    m = await manager(scripts=ScriptConfig(timeout=30), close_timeout=0.2)
    await m.load("tools")
    workspace = m.record("tools").workspace
    assert workspace is not None
    model = ScriptedModel([ToolCall("c1", "run_tools_slow", {}), "done"])
    turn = asyncio.create_task(Agent(model, middleware=[*m.middleware]).run("go"))
    await wait_until(lambda: m.record("tools").in_flight > 0)
    await m.aclose()
    assert workspace.disposed and not exists(workspace.root)
    result = await asyncio.wait_for(turn, 10)
    assert texts(result.new_messages)[0].startswith("Error (SCRIPT_FAILED)")


async def test_unload_keeps_the_workspace_until_in_flight_calls_finish() -> None:
    m = await manager()
    await m.load("tools")
    record = m.record("tools")
    assert record.workspace is not None
    record.enter()
    await m.unload("tools")
    assert exists(record.workspace.root)
    record.exit()
    assert not exists(record.workspace.root)


@pytest.mark.parametrize(
    "config",
    [
        ScriptConfig(interpreters={}),
        ScriptConfig(interpreters={"py": [sys.executable]}),
        ScriptConfig(interpreters={".py": sys.executable}),
        ScriptConfig(interpreters={".py": []}),
        ScriptConfig(timeout=0),
        ScriptConfig(thread_workspaces=0),
        ScriptConfig(thread_workspace_bytes=0),
        ScriptConfig(timeout=10, max_timeout=5),
        ScriptConfig(max_output_bytes=0),
    ],
)
async def test_bad_script_config_is_invalid_config(config: ScriptConfig) -> None:
    with pytest.raises(InvalidSkillsConfig) as info:
        await manager(scripts=config)
    assert info.value.code == "INVALID_CONFIG"


async def test_a_script_may_run_past_the_agents_tool_timeout_up_to_its_own() -> None:
    # The script's own deadline (timeout_seconds, bounded by max_timeout) governs it; the
    # agent-wide Limits.tool_timeout must not cut a script the model was allowed to run longer.
    nap = "import time\ntime.sleep(0.5)\nprint('rested')\n"
    m = await manager(
        source(**{"scripts/nap.py": nap}),
        scripts=ScriptConfig(timeout=20, sandbox=UnsandboxedRunner()),
    )
    await m.load("tools")
    model = ScriptedModel([ToolCall("c1", "run_tools_nap", {}), "done"])
    agent = Agent(model, middleware=[*m.middleware], limits=Limits(tool_timeout=0.05))
    result = await agent.run("go")
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    assert "rested" in message.text
    assert not message.is_error
    await m.aclose()


async def test_a_run_cut_by_the_sandboxs_wall_time_names_that_limit(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "slow.py").write_text("import time\ntime.sleep(30)\n")
    box = BubblewrapSandbox(SandboxPolicy(limits=SandboxLimits(wall_seconds=0.5)))
    config = ScriptConfig(timeout=20, sandbox=box)
    with pytest.raises(SkillScriptTimeout, match=r"ran past the limit wall_seconds=0\.5 ") as cut:
        await run_script(Workspace(root), "scripts/slow.py", [], config)
    assert "20s timeout" in str(cut.value)
    with pytest.raises(SkillScriptTimeout, match=r"ran past its 0\.3s timeout"):
        await run_script(Workspace(root), "scripts/slow.py", [], config, timeout_seconds=0.3)


@pytest.mark.parametrize(
    ("policy", "says"),
    [
        (SandboxPolicy(), "writes only in the workspace and a private /tmp"),
        (
            SandboxPolicy(write_allow=("/var/tmp",), network="on"),
            "writes in the workspace, a private /tmp and /var/tmp, network on",
        ),
        (SandboxPolicy(private_tmp=False), "writes only in the workspace, no network"),
    ],
)
async def test_a_script_tools_description_says_where_it_may_write(
    policy: SandboxPolicy, says: str
) -> None:
    m = await manager(scripts=ScriptConfig(timeout=10, sandbox=BubblewrapSandbox(policy)))
    await m.load("tools")
    tool = next(t for t in m.record("tools").tools if t.name == "run_tools_echo")
    assert says in tool.definition.description
    await m.aclose()


NOTES = {
    "scripts/leave.py": "import sys\nopen('note.txt', 'w').write(sys.argv[1])\nprint('left')\n",
    "scripts/peek.py": (
        "import os, sys\npath = sys.argv[1] if len(sys.argv) > 1 else 'note.txt'\n"
        "print(open(path).read() if os.path.exists(path) else 'nothing')\n"
    ),
}


async def in_thread(m: SkillManager, thread: str, name: str, *args: str) -> str:
    model = ScriptedModel([ToolCall("c1", name, {"args": list(args)}), "done"])
    result = await Agent(model, middleware=[*m.middleware]).run("go", thread_id=thread)
    [message] = [x for x in result.new_messages if isinstance(x, ToolMessage)]
    return message.text


async def test_each_thread_runs_scripts_in_its_own_copy_of_the_workspace() -> None:
    m = await manager(source(**NOTES))
    await m.load("tools")
    assert (await in_thread(m, "a", "run_tools_leave", "from-a")).endswith("left\n")
    template = m.record("tools").workspace
    assert template is not None and not exists(template.root / "note.txt")
    a_copy = template.threads["a"].root
    assert (await in_thread(m, "b", "run_tools_peek")).endswith("\nnothing\n")
    # not even by its path: the sandbox's private /tmp hides other threads' copies
    by_path = await in_thread(m, "b", "run_tools_peek", str(a_copy / "note.txt"))
    assert by_path.endswith("\nnothing\n")
    assert (await in_thread(m, "a", "run_tools_peek")).endswith("\nfrom-a\n")
    assert list(template.threads) == ["b", "a"]  # least recently used first
    await m.aclose()
    assert not exists(a_copy) and not exists(template.root) and template.threads == {}


async def test_at_most_thread_workspaces_copies_are_kept_least_recently_used_go_first() -> None:
    m = await manager(source(**NOTES), scripts=ScriptConfig(timeout=10, thread_workspaces=2))
    await m.load("tools")
    for thread in ("a", "b", "c"):
        await in_thread(m, thread, "run_tools_leave", f"from-{thread}")
    template = m.record("tools").workspace
    assert template is not None and list(template.threads) == ["b", "c"]
    assert (await in_thread(m, "a", "run_tools_peek")).endswith("\nnothing\n")  # a fresh copy
    assert (await in_thread(m, "c", "run_tools_peek")).endswith("\nfrom-c\n")
    assert list(template.threads) == ["a", "c"]
    copies = [w.root for w in template.threads.values()]
    await m.unload("tools")
    assert not any(exists(root) for root in copies)
    await m.aclose()


async def test_the_copies_kept_hold_at_most_thread_workspace_bytes_together(
    tmp_path: Path,
) -> None:
    root = tmp_path / "template"
    (root / "scripts").mkdir(parents=True)
    template = Workspace(root)
    bound = 3 * 1024 * 1024
    async with template.thread_copy("a", 10, bound) as a:
        (a.root / "data").write_bytes(b"x" * (2 * 1024 * 1024))
    assert list(template.threads) == ["a"] and a.size >= 2 * 1024 * 1024  # measured at the end
    async with template.thread_copy("b", 10, bound) as b:
        (b.root / "data").write_bytes(b"x" * (2 * 1024 * 1024))
    assert list(template.threads) == ["b"] and not exists(a.root)  # 4 MiB > 3: a went first
    async with template.thread_copy("c", 10, bound) as c:
        (c.root / "data").write_bytes(b"x" * (4 * 1024 * 1024))
    assert template.threads == {} and not exists(c.root)  # alone over the bound: gone too
    assert ScriptConfig().thread_workspace_bytes == DEFAULT_THREAD_WORKSPACE_BYTES == 2**31
    template.dispose()


async def test_a_run_that_fills_its_workspace_past_the_quota_resets_the_threads_copy() -> None:
    fill = "open('note.txt', 'w').write('kept?')\nfor n in range(8):\n"
    fill += "    open(f'big{n}', 'wb').write(b'x' * 1024 * 1024)\n"
    limits = SandboxLimits(workspace_bytes=4 * 1024 * 1024)
    sandbox = BubblewrapSandbox(SandboxPolicy(limits=limits))
    config = ScriptConfig(timeout=30, sandbox=sandbox)
    m = await manager(source(**NOTES, **{"scripts/fill.py": fill}), scripts=config)
    await m.load("tools")
    failed = await in_thread(m, "a", "run_tools_fill")
    assert "workspace_bytes=4194304" in failed and "workspace was reset" in failed
    assert (await in_thread(m, "a", "run_tools_peek")).endswith("\nnothing\n")  # fresh copy
    await m.aclose()


async def test_a_copy_in_use_is_never_evicted(tmp_path: Path) -> None:
    root = tmp_path / "template"
    (root / "scripts").mkdir(parents=True)
    template = Workspace(root)
    async with template.thread_copy("busy", limit=1) as busy:
        async with template.thread_copy("other", limit=1) as other:
            assert list(template.threads) == ["busy", "other"]  # both in use: over the limit
        async with template.thread_copy("third", limit=1):
            assert list(template.threads) == ["busy", "third"] and not exists(other.root)
        assert exists(busy.root / "scripts")
    async with template.thread_copy("fourth", limit=1):
        assert list(template.threads) == ["fourth"] and not exists(busy.root)
    template.dispose()
    with pytest.raises(RuntimeError, match="was removed"):
        async with template.thread_copy("late"):
            pass
