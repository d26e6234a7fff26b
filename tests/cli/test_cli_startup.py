"""``plait --version`` and ``plait --help`` answer without loading typer, rich or any layer, and
the root help they print is the typer app's own."""

from __future__ import annotations

import json
import subprocess
import sys

import typer

from plait import __version__
from plait.cli.app import app
from plait.cli.root import COMMANDS, HELP, root_help

HEAVY = ("typer", "rich", "click", "pydantic", "pydantic_core", "yaml", "asyncio")


def run_main(*args: str) -> tuple[str, set[str]]:
    """``plait.cli.main`` in a fresh interpreter: its output, and the modules loaded."""
    code = (
        "import sys, json\n"
        f"sys.argv = ['plait', *{list(args)!r}]\n"
        "from plait.cli import main\n"
        "try:\n    main()\nexcept SystemExit as stop:\n    print(f'exit={stop.code}')\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout, set(json.loads(done.stderr))


def test_the_root_help_table_is_the_typer_apps() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    ctx = group.context_class(group, info_name="plait")
    listed = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        first_paragraph = (command.short_help or command.help or "").split("\n\n")[0]
        listed.append((name, " ".join(first_paragraph.split())))  # as typer's help lists it
    assert listed == list(COMMANDS)
    assert group.help == HELP
    assert "--version" in [opt for p in group.params for opt in p.opts]


def test_version_prints_the_version_and_loads_nothing_heavy() -> None:
    out, modules = run_main("--version")
    assert out == f"plait {__version__}\n"
    assert [m for m in modules if m.startswith(HEAVY)] == []
    assert {m for m in modules if m.startswith("plait")} == {
        "plait",
        "plait.__about__",
        "plait.errors",
        "plait.lazy",
        "plait.cli",
        "plait.cli.root",
    }


def test_help_lists_every_command_and_loads_nothing_heavy() -> None:
    out, modules = run_main("--help")
    assert out == root_help()
    for name, text in COMMANDS:
        assert f"  {name}" in out and text in out
    assert [m for m in modules if m.startswith(HEAVY)] == []


def test_other_invocations_still_go_through_typer() -> None:
    out, modules = run_main("skills", "--help")
    assert "typer" in modules
    assert "validate" in out


def test_a_command_loads_the_layers_it_runs_on_only_when_it_runs() -> None:
    # The agent and its batteries load when run, chat or demo build one; plait.mcp for --mcp
    # (or servers in the config); the manager and the sandbox for --mode managed.
    _, modules = run_main("run", "--help")
    assert "plait.cli.run" in modules and "plait.cli.demo" in modules
    unused = (
        "plait.runtime",
        "plait.context",
        "plait.guards",
        "plait.trace",
        "plait.mcp",
        "plait.sandbox",
        "plait.skills.managed.manager",
        "plait.cli.display",
        "plait.cli.demo_script",
    )
    assert [m for m in modules if m.startswith(unused)] == []


def test_bare_plait_prints_the_help_with_the_usage_error_status() -> None:
    out, modules = run_main()
    assert out == root_help() + "exit=2\n"
    assert [m for m in modules if m.startswith(HEAVY)] == []
