"""``plait demo``: the whole lifecycle on the bundled skills, with a scripted model.

No API key and no network: the model is a :class:`~plait.models.FunctionModel` that reacts to
what it is sent, exactly as a test would script it, and the screen says so. Three user turns show,
in order: the skills catalog in the system prompt, the model reading a skill's SKILL.md, the skill's
tool appearing only after that read, an oversized tool result evicted to a backend and paged back,
and the history summarized once it outgrows a (deliberately small) budget — which also withdraws
the skill tool, since the read that disclosed it was compacted away.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from plait.cli.console import report_note
from plait.cli.run import check_skills_folders
from plait.cli.ui import NoTraceOption, trace_hint

__all__ = ["bundled_skills", "demo"]


def bundled_skills() -> Path:
    """The example skills: inside the installed package, or ``examples/skills`` in a checkout."""
    package = Path(__file__).parent.parent
    for candidate in (package / "_examples" / "skills", package.parents[1] / "examples" / "skills"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("The bundled example skills are missing from this installation.")


def demo(
    skills: Annotated[
        Path | None, typer.Option("--skills", help="Skills folder (default: the bundled one).")
    ] = None,
    no_trace: NoTraceOption = False,
) -> None:
    """Run the bundled example skills end to end with a scripted model (no key, no network)."""
    from plait.cli.demo_script import SKILL, recorded_demo

    console = Console(highlight=False, emoji=False)
    check_skills_folders([skills] if skills else [])
    folder = skills or bundled_skills()
    console.print(
        Panel.fit(
            "[bold]plait demo[/bold] — [yellow]scripted model[/yellow]: its answers are "
            "pre-written and react to what it is sent. No API key, no network.\n"
            f"skills: {folder}",
            border_style="yellow",
        )
    )
    with tempfile.TemporaryDirectory(prefix="plait-demo-") as workdir:
        seen, run_id = asyncio.run(recorded_demo(console, folder, Path(workdir), not no_trace))
    table = Table(title="What happened", show_header=False)
    for label, happened in seen.rows():
        table.add_row("[green]✓[/green]" if happened else "[red]✗[/red]", label)
    console.print(table)
    if run_id is not None:
        console.print(f"[dim]{escape(trace_hint(run_id))}[/dim]", soft_wrap=True)
    if not seen.listed:
        report_note(
            f"{folder} has no {SKILL} skill: the scripted model's steps after the catalog "
            f"need it. Run 'plait demo' without --skills to see them."
        )
    if not all(happened for _, happened in seen.rows()):
        raise typer.Exit(1)
