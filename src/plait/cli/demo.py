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
import csv
import io
import random
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from plait.backends.memory import MemoryBackend
from plait.cli.console import EventPrinter, report_note
from plait.cli.run import check_skills_folders
from plait.cli.ui import NoTraceOption, open_trace_store, trace_hint
from plait.context import (
    HistorySummarized,
    ResultEvicted,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.context.offload import READ_TOOL_NAME
from plait.messages import ToolCall, ToolMessage, Usage, UserMessage, new_id
from plait.middleware.context import Event
from plait.models.base import ModelRequest, ModelResponse
from plait.models.scripted import FunctionModel
from plait.runtime.agent import Agent
from plait.runtime.events import ModelRequestSent, ToolCallStarted
from plait.skills import SkillsMiddleware
from plait.skills.disclosure import SkillToolsDisclosed, SkillToolsWithdrawn
from plait.skills.disclosure.snapshot import DEFAULT_INSTRUCTIONS
from plait.tokens import CHARS_PER_TOKEN, message_tokens, tool_tokens
from plait.tools import tool
from plait.trace.recorder import TraceRecorder

__all__ = ["QUESTIONS", "bundled_skills", "demo"]

QUESTIONS = (
    "What is in sales.csv?",
    "Which region sold the most units?",
    "Draft a one-line note for the team about it.",
)
_SKILL = "csv-insights"
_REGIONS = ("North", "South", "East", "West")
_PRODUCTS = ("widget", "gadget", "gizmo", "doohickey")


def bundled_skills() -> Path:
    """The example skills: inside the installed package, or ``examples/skills`` in a checkout."""
    package = Path(__file__).parent.parent
    for candidate in (package / "_examples" / "skills", package.parents[1] / "examples" / "skills"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("The bundled example skills are missing from this installation.")


def _write_sales(folder: Path, rows: int = 1200) -> Path:
    rng = random.Random(7)
    path = folder / "sales.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["date", "region", "product", "units", "unit_price"])
        for i in range(rows):
            writer.writerow(
                [
                    f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
                    rng.choice(_REGIONS),
                    rng.choice(_PRODUCTS),
                    rng.randint(1, 40),
                    f"{rng.uniform(2, 90):.2f}",
                ]
            )
    return path


@tool
def csv_rows(path: str) -> str:
    """Return every row of a CSV file as text (the csv-insights skill's data tool)."""
    return Path(path).read_text()


@dataclass
class _Script:
    """The scripted model's decisions, as a function of the request it receives."""

    data: Path
    answers: list[str] = field(default_factory=list)

    def __call__(self, request: ModelRequest) -> ModelResponse:
        response = self._decide(request)
        # Report usage as a provider would (estimated: there is no tokenizer behind a script),
        # so the trace page has figures to show.
        return response.replace(usage=_estimated_usage(request, response))

    def _decide(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        tools = {t.name for t in request.tools}
        if isinstance(last, UserMessage):
            return self._on_question(last.text, request.system_prompt)
        if isinstance(last, ToolMessage) and last.name == "read_file" and "csv_rows" in tools:
            return _call(
                "The skill unlocked csv_rows; loading the table.",
                "csv_rows",
                {"path": str(self.data)},
            )
        if (
            isinstance(last, ToolMessage)
            and isinstance(last.data, dict)
            and last.data.get("_evicted")
        ):
            return _call(
                "The table was too big for the context; reading its first page.",
                READ_TOOL_NAME,
                {"path": last.data["full_result_path"], "offset": 0, "limit": 300},
            )
        return ModelResponse(content=self._report())

    def _on_question(self, text: str, system_prompt: str) -> ModelResponse:
        if text == QUESTIONS[0]:
            found = re.search(rf"\*\*{_SKILL}\*\*.*? path: (\S+)", system_prompt)
            if found is None:
                return ModelResponse(content="No skill for CSV files is listed.")
            return _call(
                "This is a job for the csv-insights skill; reading it first.",
                "read_file",
                {"path": found.group(1)},
            )
        region, units = self._top_region()
        if text == QUESTIONS[1]:
            return ModelResponse(content=f"{region} sold the most: {units:,} units.")
        return ModelResponse(content=f"Team note: {region} leads sales with {units:,} units.")

    def _rows(self) -> list[dict[str, str]]:
        return list(csv.DictReader(io.StringIO(self.data.read_text())))

    def _top_region(self) -> tuple[str, int]:
        totals: Counter[str] = Counter()
        for row in self._rows():
            totals[row["region"]] += int(row["units"])
        return totals.most_common(1)[0]

    def _report(self) -> str:
        rows = self._rows()
        columns = ", ".join(rows[0])
        products = Counter(r["product"] for r in rows).most_common(1)[0][0]
        return (
            f"sales.csv has {len(rows):,} rows and {len(rows[0])} columns ({columns}); "
            f"no missing values. The most common product is {products}."
        )


def _estimated_usage(request: ModelRequest, response: ModelResponse) -> Usage:
    prompt = sum(message_tokens(m) for m in request.messages) + sum(
        tool_tokens(t) for t in request.tools
    )
    prompt += -(-len(request.system_prompt) // CHARS_PER_TOKEN)
    answer = -(-len(response.content) // CHARS_PER_TOKEN) + 8 * len(response.tool_calls)
    return Usage(input_tokens=prompt, output_tokens=answer, requests=1)


def _call(text: str, name: str, args: dict[str, object]) -> ModelResponse:
    return ModelResponse(content=text, tool_calls=[ToolCall(f"call_{name}", name, args)])


@dataclass
class _Milestones:
    catalog: bool = False
    listed: bool = False
    read: bool = False
    unlocked: bool = False
    evicted: bool = False
    summarized: bool = False
    withdrawn: bool = False

    def see(self, event: Event) -> None:
        if isinstance(event, ModelRequestSent):
            prompt = event.request.system_prompt
            self.catalog = self.catalog or DEFAULT_INSTRUCTIONS in prompt
            self.listed = self.listed or f"**{_SKILL}**" in prompt
        elif isinstance(event, SkillToolsDisclosed):
            self.unlocked = True
        elif isinstance(event, ResultEvicted):
            self.evicted = True
        elif isinstance(event, HistorySummarized):
            self.summarized = True
        elif isinstance(event, SkillToolsWithdrawn):
            self.withdrawn = True
        elif isinstance(event, ToolCallStarted) and event.call.name == "read_file":
            self.read = True

    def rows(self) -> list[tuple[str, bool]]:
        return [
            ("catalog of skills in the system prompt", self.catalog),
            (f"{_SKILL} listed in it", self.listed),
            ("the model read csv-insights/SKILL.md", self.read),
            ("csv_rows appeared only after that read", self.unlocked),
            ("an oversized result was evicted and paged back", self.evicted),
            ("history summarized past its budget", self.summarized),
            ("csv_rows withdrawn when its read was compacted", self.withdrawn),
        ]


async def _run_demo(
    console: Console,
    skills: Path,
    workdir: Path,
    recorder: TraceRecorder | None = None,
    thread_id: str = "demo",
) -> _Milestones:
    data = _write_sales(workdir)
    backend = MemoryBackend()
    agent = Agent(
        FunctionModel(_Script(data), name="scripted-demo"),
        system_prompt="You are a data assistant. Use the skills listed below.",
        middleware=[
            *([recorder] if recorder is not None else []),
            SummarizationMiddleware(1000, keep_messages=2, backend=backend),
            ResultEvictionMiddleware(500, backend=backend, excluded_tools=["read_file"]),
            SkillsMiddleware(sources=[skills], tools=[csv_rows]),
        ],
    )
    printer, seen = EventPrinter(console), _Milestones()
    for question in QUESTIONS:
        console.print(f"\n[bold]you>[/bold] {question}")
        async for event in agent.stream(question, thread_id=thread_id):
            seen.see(event)
            printer(event)
        printer.finish()
    return seen


async def _recorded_demo(
    console: Console, skills: Path, workdir: Path, trace: bool
) -> tuple[_Milestones, str | None]:
    """The demo, recorded into the CLI's trace store unless ``trace`` is false; returns what
    happened and the id of the last turn's run (for the ``plait ui`` hint)."""
    if not trace:
        return await _run_demo(console, skills, workdir), None
    from plait.trace import TraceRecorder

    recorder = TraceRecorder(open_trace_store(), agent="plait demo")
    try:
        seen = await _run_demo(console, skills, workdir, recorder, thread_id=f"demo-{new_id()[:8]}")
    finally:
        await recorder.aclose()
    return seen, recorder.last_run_id


def demo(
    skills: Annotated[
        Path | None, typer.Option("--skills", help="Skills folder (default: the bundled one).")
    ] = None,
    no_trace: NoTraceOption = False,
) -> None:
    """Run the bundled example skills end to end with a scripted model (no key, no network)."""
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
        seen, run_id = asyncio.run(_recorded_demo(console, folder, Path(workdir), not no_trace))
    table = Table(title="What happened", show_header=False)
    for label, happened in seen.rows():
        table.add_row("[green]✓[/green]" if happened else "[red]✗[/red]", label)
    console.print(table)
    if run_id is not None:
        console.print(f"[dim]{escape(trace_hint(run_id))}[/dim]", soft_wrap=True)
    if not seen.listed:
        report_note(
            f"{folder} has no {_SKILL} skill: the scripted model's steps after the catalog "
            f"need it. Run 'plait demo' without --skills to see them."
        )
    if not all(happened for _, happened in seen.rows()):
        raise typer.Exit(1)
