"""``--sandbox bwrap|none``: what runs skill scripts in ``plait run``/``chat`` (managed mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from plait import ScriptedModel, ToolCall, ToolMessage
from plait.cli.agents import AgentOptions, Mode, SandboxChoice, build_agent
from plait.cli.demo import bundled_skills
from plait.skills.managed import SkillLoaded

SCRIPT_TOOL = "run_csv-insights_summarize"


@pytest.mark.parametrize(
    ("choice", "name"),
    [(SandboxChoice.BWRAP, "bubblewrap"), (SandboxChoice.NONE, "unsandboxed")],
)
async def test_the_sandbox_choice_runs_the_scripts_and_is_named(
    tmp_path: Path, choice: SandboxChoice, name: str
) -> None:
    load = ToolCall("c1", "load_skill", {"skill": "csv-insights"})
    model = ScriptedModel([load, ToolCall("c2", SCRIPT_TOOL, {}), "done"])
    options = AgentOptions(
        model=model,
        skills=[bundled_skills()],
        mode=Mode.MANAGED,
        store=tmp_path / "t.sqlite3",
        allow_scripts=True,
        sandbox=choice,
    )
    agent, closers = await build_agent(options)
    try:
        result = await agent.run("summarize", thread_id="t")
    finally:
        for close in closers:
            await close()
    [loaded] = [e for e in result.events if isinstance(e, SkillLoaded)]
    assert loaded.sandbox == name
    ran = [m.text for m in result.new_messages if isinstance(m, ToolMessage)][-1]
    assert "Script scripts/summarize.py exited" in ran and f"sandbox={name}" in ran


def test_help_shows_the_sandbox_choices_and_the_default() -> None:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    for command in ("run", "chat"):
        done = subprocess.run(
            [sys.executable, "-c", "from plait.cli import main; main()", command, "--help"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        text = " ".join(done.stdout.split())
        assert "--sandbox [bwrap|none]" in text or "--sandbox <bwrap|none>" in text
        assert "[default: bwrap]" in text


def test_the_terminal_shows_which_sandbox_runs_a_loaded_skills_scripts() -> None:
    import io

    from rich.console import Console

    from plait.cli.console import EventPrinter

    out = io.StringIO()
    printer = EventPrinter(Console(file=out, width=200, no_color=True, highlight=False))
    printer(SkillLoaded(skill="pdf", version="1", tools=("run_pdf_x",), sandbox="unsandboxed"))
    printer(SkillLoaded(skill="csv", version="1", tools=("run_csv_x",), sandbox="bubblewrap"))
    printer(SkillLoaded(skill="txt", version="1", tools=()))
    printer.finish()
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("(scripts UNSANDBOXED)")
    assert lines[1].endswith("(scripts in bubblewrap)")
    assert "scripts" not in lines[2]
