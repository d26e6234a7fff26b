"""The scripted run behind ``plait demo`` (:mod:`plait.cli.demo`): the model's script, the
milestones it must reach, and the run itself, optionally recorded for the trace page.

Loaded only by ``plait demo`` (and the tests that drive it): it builds an agent with every battery.
"""

from __future__ import annotations

import csv
import io
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from plait.backends.memory import MemoryBackend
from plait.cli.console import EventPrinter
from plait.cli.ui import open_trace_store
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

__all__ = ["QUESTIONS", "SKILL", "Milestones", "recorded_demo", "run_demo"]

QUESTIONS = (
    "What is in sales.csv?",
    "Which region sold the most units?",
    "Draft a one-line note for the team about it.",
)
SKILL = "csv-insights"
_REGIONS = ("North", "South", "East", "West")
_PRODUCTS = ("widget", "gadget", "gizmo", "doohickey")


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
            found = re.search(rf"\*\*{SKILL}\*\*.*? path: (\S+)", system_prompt)
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
class Milestones:
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
            self.listed = self.listed or f"**{SKILL}**" in prompt
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
            (f"{SKILL} listed in it", self.listed),
            ("the model read csv-insights/SKILL.md", self.read),
            ("csv_rows appeared only after that read", self.unlocked),
            ("an oversized result was evicted and paged back", self.evicted),
            ("history summarized past its budget", self.summarized),
            ("csv_rows withdrawn when its read was compacted", self.withdrawn),
        ]


async def run_demo(
    console: Console,
    skills: Path,
    workdir: Path,
    recorder: TraceRecorder | None = None,
    thread_id: str = "demo",
) -> Milestones:
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
    printer, seen = EventPrinter(console), Milestones()
    for question in QUESTIONS:
        console.print(f"\n[bold]you>[/bold] {question}")
        async for event in agent.stream(question, thread_id=thread_id):
            seen.see(event)
            printer(event)
        printer.finish()
    return seen


async def recorded_demo(
    console: Console, skills: Path, workdir: Path, trace: bool
) -> tuple[Milestones, str | None]:
    """The demo, recorded into the CLI's trace store unless ``trace`` is false; returns what
    happened and the id of the last turn's run (for the ``plait ui`` hint)."""
    if not trace:
        return await run_demo(console, skills, workdir), None
    from plait.trace import TraceRecorder

    recorder = TraceRecorder(open_trace_store(), agent="plait demo")
    try:
        seen = await run_demo(console, skills, workdir, recorder, thread_id=f"demo-{new_id()[:8]}")
    finally:
        await recorder.aclose()
    return seen, recorder.last_run_id
