"""The workspace toolset in ``plait run``: on by default, gated writes and shell (``--yes``,
``[workspace] allow``, refused with no terminal), ``--no-workspace``, ``AGENTS.md`` in the prompt,
and a skill's script run through ``shell`` in bubblewrap in disclosure mode, end to end with a
scripted wire model (in-process, the current folder as the workspace)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_completions import sse_answer
from cli_inprocess import empty_home
from test_cli_mcp import sse_tool_call
from typer.testing import CliRunner, Result
from wire_server import WireServer

from plait.cli.app import app

FIXTURES = Path(__file__).parents[1] / "models" / "fixtures" / "openai"


@pytest.fixture
def server() -> Iterator[WireServer]:
    with WireServer(FIXTURES) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return empty_home(tmp_path, monkeypatch) / "project"


def plait(server: WireServer, *args: str) -> Result:
    spec = f"openai-compatible:m@{server.url}/v1"
    return CliRunner().invoke(app, ["run", *args, "--model", spec], env={"COLUMNS": "200"})


def tool_results(server: WireServer, index: int) -> list[dict[str, Any]]:
    return [m for m in server.bodies()[index]["messages"] if m["role"] == "tool"]


def tool_names(server: WireServer) -> set[str]:
    return {t["function"]["name"] for t in server.bodies()[0].get("tools", [])}


def test_the_workspace_tools_are_on_by_default(server: WireServer, project: Path) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    server._replies.append(sse_tool_call("read_file", {"path": "notes.txt"}))
    server._replies.append(sse_answer("Read it."))
    result = plait(server, "what is in notes.txt?")
    assert result.exit_code == 0, result.output
    assert {"ls", "read_file", "write_file", "edit_file", "glob", "grep", "shell"} <= tool_names(
        server
    )
    [read] = tool_results(server, 1)
    assert "alpha" in read["content"] and "beta" in read["content"]


def test_a_write_with_no_terminal_and_no_yes_is_refused_and_the_model_told_how(
    server: WireServer, project: Path
) -> None:
    server._replies.append(sse_tool_call("write_file", {"path": "out.txt", "content": "x"}))
    server._replies.append(sse_answer("Could not."))
    result = plait(server, "write out.txt")
    assert result.exit_code == 0, result.output
    assert not (project / "out.txt").exists()
    [refused] = tool_results(server, 1)
    assert "--yes" in refused["content"] and "[workspace]" in refused["content"]


@pytest.mark.parametrize("allow", ["--yes", "-y", "config"])
def test_yes_or_the_config_policy_lets_the_model_write(
    server: WireServer, project: Path, allow: str
) -> None:
    if allow == "config":
        (project / "plait.toml").write_text('[workspace]\nallow = ["write"]\n', encoding="utf-8")
    server._replies.append(sse_tool_call("write_file", {"path": "out.txt", "content": "made"}))
    server._replies.append(sse_answer("Wrote it."))
    result = plait(server, "write out.txt", *([allow] if allow != "config" else []))
    assert result.exit_code == 0, result.output
    assert (project / "out.txt").read_text(encoding="utf-8") == "made"


def test_the_config_policy_allows_only_what_it_names(server: WireServer, project: Path) -> None:
    (project / "plait.toml").write_text('[workspace]\nallow = ["write"]\n', encoding="utf-8")
    server._replies.append(sse_tool_call("shell", {"command": "touch ran"}))
    server._replies.append(sse_answer("No shell."))
    result = plait(server, "run something")
    assert result.exit_code == 0, result.output
    assert not (project / "ran").exists()
    assert "'shell' needs approval" in tool_results(server, 1)[0]["content"]


def test_a_bad_workspace_policy_names_the_file_and_key(project: Path) -> None:
    (project / "plait.toml").write_text('[workspace]\nallow = ["delete"]\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "hi"])
    assert result.exit_code == 2
    assert "key 'workspace.allow.0'" in result.output


def test_no_workspace_leaves_the_tools_and_project_file_out(
    server: WireServer, project: Path
) -> None:
    (project / "AGENTS.md").write_text("Always answer in French.", encoding="utf-8")
    server._replies.append(sse_answer("Sans outils."))
    result = plait(server, "hi", "--no-workspace")
    assert result.exit_code == 0, result.output
    assert not tool_names(server) & {"write_file", "shell", "ls"}
    assert "Always answer in French." not in server.bodies()[0]["messages"][0]["content"]


def test_agents_md_is_in_the_system_prompt_and_named_with_verbose(
    server: WireServer, project: Path
) -> None:
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text("Always answer in French.", encoding="utf-8")
    server._replies.append(sse_answer("Bonjour."))
    result = plait(server, "hi", "-v")
    assert result.exit_code == 0, result.output
    system = server.bodies()[0]["messages"][0]
    assert system["role"] == "system" and "Always answer in French." in system["content"]
    assert f"◆ project instructions: {project / 'AGENTS.md'} (24 chars)" in result.stderr
    quiet = plait(server, "again")
    assert "project instructions" not in quiet.output


SKILL = """---
name: report-maker
description: Make a report file from a title. Use when asked for a report.
---

# Report maker

Run the script with the title and the output file, from the workspace:

    python3 {folder}/scripts/make_report.py "TITLE" report.txt
"""

SCRIPT = """import sys
title, out = sys.argv[1], sys.argv[2]
with open(out, "w") as f:
    f.write("REPORT: " + title.upper() + "\\n")
print("wrote", out)
"""


def test_a_skill_script_runs_through_shell_in_the_sandbox_and_writes_into_the_workspace(
    server: WireServer, project: Path
) -> None:
    """Disclosure mode end to end: the model reads SKILL.md through the one read_file, runs
    the skill's script through shell (bubblewrap), and the script's output lands in the
    workspace."""
    folder = project / ".agents" / "skills" / "report-maker"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL.format(folder=folder), encoding="utf-8")
    (folder / "scripts" / "make_report.py").write_text(SCRIPT, encoding="utf-8")
    command = f'python3 {folder}/scripts/make_report.py "q3 sales" report.txt'
    server._replies.append(sse_tool_call("read_file", {"path": str(folder / "SKILL.md")}))
    server._replies.append(sse_tool_call("shell", {"command": command}))
    server._replies.append(sse_answer("The report is in report.txt."))
    result = plait(server, "make a report on q3 sales", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert "report-maker" in server.bodies()[0]["messages"][0]["content"]  # the catalog
    read = tool_results(server, 1)[0]["content"]
    assert "Run the script with the title" in read
    ran = tool_results(server, 2)[-1]["content"]
    assert "wrote report.txt" in ran
    assert (project / "report.txt").read_text(encoding="utf-8") == "REPORT: Q3 SALES\n"
    events = [json.loads(line) for line in result.stdout.splitlines()]
    finished = [e["call"]["name"] for e in events if e["type"] == "tool_call_finished"]
    assert finished == ["read_file", "shell"]


def test_run_help_documents_the_workspace_stdin_and_pipes() -> None:
    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for needle in (
        "--yes",
        "-y",
        "--no-workspace",
        'allow = ["write", "shell"] under [workspace] in plait.toml',
        "network = true under [workspace]",
        "echo TASK | plait run",
        "At most 1 MiB",
        "gets the answer only",
        "--attach",
        "--thinking",
        "--no-thinking",
    ):
        assert needle in text, needle


def test_approve_tool_decides_held_workspace_calls_one_by_one(
    server: WireServer, project: Path
) -> None:
    server._replies.append(sse_tool_call("write_file", {"path": "out.txt", "content": "made"}))
    server._replies.append(sse_tool_call("shell", {"command": "touch ran"}))
    server._replies.append(sse_answer("Wrote, no shell."))
    result = plait(server, "write out.txt, then touch ran", "--approve", "write_*")
    assert result.exit_code == 0, result.output
    assert (project / "out.txt").read_text(encoding="utf-8") == "made"
    assert not (project / "ran").exists()  # not covered by the flag, nobody to ask: rejected
    [rejected] = tool_results(server, 2)[-1:]
    assert "--approve-all or --approve TOOL" in rejected["content"]


@pytest.mark.parametrize(("flag", "written"), [("--approve-all", True), ("--deny-all", False)])
def test_approve_all_and_deny_all_decide_every_held_call(
    server: WireServer, project: Path, flag: str, written: bool
) -> None:
    server._replies.append(sse_tool_call("write_file", {"path": "out.txt", "content": "made"}))
    server._replies.append(sse_answer("Done."))
    result = plait(server, "write out.txt", flag)
    assert result.exit_code == 0, result.output
    assert (project / "out.txt").exists() == written
