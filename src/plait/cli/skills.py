"""``plait skills …``: validate, list, show and prompt (render the catalog of) Agent Skills
folders.

Every PATH may be a skill folder, its SKILL.md, or a folder of skill folders (scanned like
:class:`~plait.skills.FilesystemSource` does). Several PATHs become ordered sources; on a name
clash the earlier PATH wins.
"""

from __future__ import annotations

import asyncio
import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from plait.cli.console import fail
from plait.errors import PlaitError
from plait.paths import PathEscapeError
from plait.skills import (
    Code,
    Diagnostic,
    DiscoveryProblem,
    FilesystemSource,
    PromptFormat,
    SkillCatalog,
    SkillEntry,
    SkillError,
    SkillNotFound,
    ValidationMode,
    validate_skill_dir,
)
from plait.skills.skill_file import is_skill_file_name
from plait.skills.validator import find_skill_md

skills_app = typer.Typer(
    help="Validate, inspect and render Agent Skills (SKILL.md) folders.", no_args_is_help=True
)

_PATHS_HELP = "Skill folders, SKILL.md files, or folders of skill folders."
PathsArgument = Annotated[list[Path], typer.Argument(help=_PATHS_HELP)]


class ReportFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


class ListFormat(StrEnum):
    TABLE = "table"
    JSON = "json"
    TSV = "tsv"


NAME_WIDTH = 40
"""Table cells cut names longer than this (with ``…``); ``--format json`` / ``tsv`` keep them."""
DESCRIPTION_WIDTH = 70


# --- validate -----------------------------------------------------------------------------------


def _skill_folders(path: Path) -> tuple[list[Path], list[Diagnostic]]:
    """The skill folders to validate under ``path``, and scan-level diagnostics."""
    if path.is_file() and is_skill_file_name(path.name):
        return [path.parent], []
    if not path.is_dir() or find_skill_md(path) is not None:
        return [path], []
    folders: list[Path] = []
    notes: list[Diagnostic] = []
    for item in FilesystemSource(path).scan():
        escaped = isinstance(item, DiscoveryProblem) and any(
            d.code is Code.PATH_ESCAPE for d in item.diagnostics
        )
        if item.id is None or escaped:
            notes.extend(item.diagnostics if isinstance(item, DiscoveryProblem) else ())
        else:
            folders.append(path / item.id)
    return (folders or [path]), notes


def _print_report(folder: Path, diagnostics: list[Diagnostic]) -> None:
    errors = sum(d.is_error for d in diagnostics)
    others = len(diagnostics) - errors
    status = "invalid" if errors else "ok"
    suffix = f" ({others} warning{'s' if others != 1 else ''}/info)" if others else ""
    typer.echo(f"{status:<8}{folder}{suffix}")
    for d in diagnostics:
        where = f" (line {d.line})" if d.line is not None else ""
        message = d.message.replace("\n", "\n      ")
        typer.echo(f"  - {d.severity.value} {d.code.value}{where}: {message}")


@skills_app.command("validate")
def validate(
    paths: PathsArgument,
    strict: Annotated[
        bool, typer.Option("--strict", help="Report exactly what skills-ref reports, as errors.")
    ] = False,
    output: Annotated[ReportFormat, typer.Option("--format", help="text or json.")] = (
        ReportFormat.TEXT
    ),
) -> None:
    """Validate skills; exit 1 if any has an error or a scan limit left folders unscanned.

    Lenient by default: what other clients tolerate is a warning. --strict reports exactly
    what the Agent Skills reference validator (skills-ref) reports.
    """
    mode = ValidationMode.STRICT if strict else ValidationMode.LENIENT
    reports: list[tuple[Path, list[Diagnostic]]] = []
    scan_notes: list[tuple[Path, list[Diagnostic]]] = []
    for path in paths:
        folders, notes = _skill_folders(path)
        root = path if path.is_dir() else path.parent
        reports.extend((folder, validate_skill_dir(folder, mode, root=root)) for folder in folders)
        if notes:
            scan_notes.append((path, notes))
    failed = sum(any(d.is_error for d in diags) for _, diags in reports)
    failed_scans = sum(any(_fails_scan(d) for d in diags) for _, diags in scan_notes)
    if output is ReportFormat.JSON:
        document = {
            "mode": mode.value,
            "valid": failed + failed_scans == 0,
            "skills": [_report_json(folder, diags) for folder, diags in reports],
            "scans": [_report_json(path, diags) for path, diags in scan_notes],
        }
        typer.echo(json.dumps(document, indent=2))
    else:
        for folder, diags in [*reports, *scan_notes]:
            _print_report(folder, diags)
        typer.echo(
            f"{len(reports)} checked ({mode.value}): {len(reports) - failed} valid, "
            f"{failed} invalid."
        )
    if failed or failed_scans:
        raise typer.Exit(1)


_INCOMPLETE_SCAN = frozenset({Code.SCAN_LIMIT, Code.DEPTH_LIMIT})


def _fails_scan(diagnostic: Diagnostic) -> bool:
    """An error, or a limit that left folders unscanned (skills may be missing)."""
    return diagnostic.is_error or diagnostic.code in _INCOMPLETE_SCAN


def _report_json(path: Path, diagnostics: list[Diagnostic]) -> dict[str, object]:
    return {
        "path": str(path),
        "valid": not any(d.is_error for d in diagnostics),
        "diagnostics": [d.to_dict() for d in diagnostics],
    }


# --- catalog-based commands ---------------------------------------------------------------------


def _catalog(paths: list[Path], labels: list[str] | None = None) -> SkillCatalog:
    """The catalog of ``paths`` in order (earlier wins clashes), each source named by its label
    (default: the path as given)."""
    sources: dict[str, FilesystemSource] = {}
    for path, label in zip(paths, labels or [str(p) for p in paths], strict=True):
        sources.setdefault(label, FilesystemSource(path, source_id=label))
    catalog = SkillCatalog(list(sources.values()))
    asyncio.run(catalog.load())
    return catalog


def _source_failures(catalog: SkillCatalog) -> list[Diagnostic]:
    return catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE)


def _report_failures(catalog: SkillCatalog) -> bool:
    failures = _source_failures(catalog)
    for d in failures:
        typer.echo(f"Error: {d.message}", err=True)
    return bool(failures)


def _status(entry: SkillEntry) -> str:
    if entry.shadowed_by is not None:
        return f"shadowed by {entry.shadowed_by}"
    warnings = len(entry.warnings)
    return f"active, {warnings} warning{'s' if warnings != 1 else ''}" if warnings else "active"


def _shorten(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _first_error(problem: DiscoveryProblem) -> str:
    errors = [d for d in problem.diagnostics if d.is_error] or list(problem.diagnostics)
    return errors[0].message.splitlines()[0] if errors else ""


@skills_app.command("list")
def list_skills(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            help=_PATHS_HELP + " Default: the folders plait run uses (--skills of the config "
            "files, then ./.agents/skills, ./.claude/skills, ~/.agents/skills, ~/.claude/skills, "
            "$PLAIT_HOME/skills)."
        ),
    ] = None,
    no_default_skills: Annotated[
        bool, typer.Option("--no-default-skills", help="Without PATHS: skip the standard folders.")
    ] = False,
    output: Annotated[
        ListFormat,
        typer.Option("--format", help="table; json or tsv (one skill a line) for machines."),
    ] = ListFormat.TABLE,
) -> None:
    """List skills with their source and status (active, shadowed, rejected)."""
    catalog = _catalog(*_list_sources(paths, no_default_skills))
    rejected = [p for p in catalog.problems() if p.id is not None]
    if output is ListFormat.JSON:
        rows: list[dict[str, object]] = [_entry_json(e) for e in catalog.entries()]
        rows.extend(_problem_json(p) for p in rejected)
        typer.echo(json.dumps(rows, indent=2, default=str))
    elif output is ListFormat.TSV:
        _print_tsv(catalog, rejected)
    else:
        _print_table(catalog, rejected)
    for notice in catalog.problems():
        if notice.id is None:  # scan limits, nested skill files: said, never silent
            for d in notice.diagnostics:
                typer.echo(f"{d.severity.value} {d.code.value}: {d.message}", err=True)
    if _report_failures(catalog):
        raise typer.Exit(1)


def _list_sources(paths: list[Path] | None, no_default: bool) -> tuple[list[Path], list[str]]:
    """PATHS as given, else the folders ``plait run`` would use, with their labels."""
    from plait.cli.config import load_settings
    from plait.cli.skill_folders import check_skill_path, skill_folders

    try:
        if paths:
            for path in paths:
                check_skill_path(path)
            return paths, [str(p) for p in paths]
        settings = load_settings()
        use_standard = bool(settings.get("default_skills")) and not no_default
        folders = skill_folders([], settings.get("skills", []), use_standard=use_standard)
    except PlaitError as exc:
        fail(str(exc), 2)
    if not folders:
        fail(
            "No skills folder found: none of ./.agents/skills, ./.claude/skills, "
            "~/.agents/skills, ~/.claude/skills, $PLAIT_HOME/skills exists and no config file "
            "names one. Give PATHS, e.g.: plait skills list ./skills",
            1,
        )
    return [f.path for f in folders], [f.label for f in folders]


def _tsv_cell(text: str) -> str:
    return " ".join(text.split())


def _print_tsv(catalog: SkillCatalog, rejected: list[DiscoveryProblem]) -> None:
    """One skill a line: name, status, source, description (tabs and newlines in values become
    spaces)."""
    lines = [
        "\t".join(
            _tsv_cell(v)
            for v in (e.name, "shadowed" if e.shadowed else "active", e.source_id, e.description)
        )
        for e in catalog.entries()
    ]
    lines += [
        "\t".join(_tsv_cell(v) for v in (p.id or "?", "rejected", p.source_id, _first_error(p)))
        for p in rejected
    ]
    if lines:
        typer.echo("\n".join(lines))


def _entry_json(entry: SkillEntry) -> dict[str, object]:
    return {
        "name": entry.name,
        "description": entry.description,
        "source": entry.source_id,
        "id": entry.id,
        "version": entry.version,
        "location": entry.location,
        "status": "shadowed" if entry.shadowed else "active",
        "shadowed_by": str(entry.shadowed_by) if entry.shadowed_by else None,
        "meta": entry.meta.to_dict(),
        "diagnostics": [d.to_dict() for d in entry.diagnostics],
    }


def _problem_json(problem: DiscoveryProblem) -> dict[str, object]:
    return {
        "name": None,
        "id": problem.id,
        "source": problem.source_id,
        "location": problem.location,
        "status": "rejected",
        "diagnostics": [d.to_dict() for d in problem.diagnostics],
    }


_SOURCE_WIDTH = 40
_STATUS_WIDTH = 30


def _table_rows(
    catalog: SkillCatalog, rejected: list[DiscoveryProblem]
) -> list[tuple[str, str, str, str, str]]:
    """``(name, status, status style, source, description)`` for every entry and rejection."""
    rows = []
    for entry in catalog.entries():
        source = f"{entry.source_id} ({entry.id})" if entry.id != entry.name else entry.source_id
        style = "yellow" if entry.shadowed or entry.warnings else "green"
        rows.append((entry.name, _status(entry), style, source, entry.description))
    for problem in rejected:
        rows.append(
            (problem.id or "?", "rejected", "red", problem.source_id, _first_error(problem))
        )
    return rows


def _print_table(catalog: SkillCatalog, rejected: list[DiscoveryProblem]) -> None:
    """Aligned columns, one line per skill whatever its name's length (names, statuses and
    sources are cut with ``…``, the description gets what is left of the width), built as one
    text: a rich ``Table`` takes seconds for 10,000 rows."""
    console = Console(highlight=False, emoji=False)
    if not console.is_terminal:
        console.width = 140
    rows = _table_rows(catalog, rejected)
    header = ("Name", "Status", "", "Source", "Description")
    widths = [
        min(max((len(r[i]) for r in [header, *rows]), default=0), cap)
        for i, cap in ((0, NAME_WIDTH), (1, _STATUS_WIDTH), (3, _SOURCE_WIDTH))
    ]
    rest = max(console.width - sum(widths) - 6, 20)
    text = Text()
    for index, (name, status, style, source, description) in enumerate([header, *rows]):
        text.append(_shorten(name, widths[0]).ljust(widths[0]), style="bold")
        text.append("  ")
        text.append(_shorten(status, widths[1]).ljust(widths[1]), style=style or "bold")
        text.append("  ")
        text.append(_shorten(source, widths[2]).ljust(widths[2]), style="" if index else "bold")
        text.append("  ")
        text.append(_shorten(description, rest), style="" if index else "bold")
        text.append("\n")
    console.print(text, end="", soft_wrap=True)
    total, active = len(catalog.entries()), len(catalog.active())
    console.print(
        Text(
            f"{total} loaded ({active} active, {total - active} shadowed), {len(rejected)} "
            "rejected. 'plait skills validate PATH' explains each warning and error."
        )
    )


@skills_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The skill's name (or its id within a source).")],
    from_: Annotated[
        list[Path] | None,
        typer.Option(
            "--from", help=_PATHS_HELP + " Default: the folders plait run uses (see skills list)."
        ),
    ] = None,
) -> None:
    """Show one skill: metadata, resources, diagnostics and the SKILL.md body."""
    catalog = _catalog(*_list_sources(from_, False))
    entry = _lookup(catalog, name)
    if entry is None:
        _report_failures(catalog)
        for problem in catalog.problems():
            if problem.id == name:
                typer.echo(f"Error: skill {name!r} could not be loaded:", err=True)
                for d in problem.diagnostics:
                    typer.echo(f"  - {d.severity.value} {d.code.value}: {d.message}", err=True)
                raise typer.Exit(1)
        # SkillNotFound's message quotes at most 200 characters of the name and lists 20 names.
        missing = SkillNotFound(name, [e.name for e in catalog.active()])
        typer.echo(f"Error: {missing}", err=True)
        raise typer.Exit(1)
    try:
        skill = asyncio.run(catalog.load_skill(entry))
    except (SkillError, PathEscapeError, OSError) as err:
        typer.echo(f"Error: {err}", err=True)
        raise typer.Exit(1) from None
    for line in _describe(entry):
        typer.echo(line)
    groups = skill.resources_by_kind()
    if skill.resources:
        typer.echo("resources:")
        for kind, files in groups.items():
            for path in files:
                typer.echo(f"  {kind}: {path}")
    if entry.diagnostics:
        typer.echo("diagnostics:")
        for d in entry.diagnostics:
            typer.echo(f"  - {d.severity.value} {d.code.value}: {d.message}")
    typer.echo("")
    typer.echo(skill.body)


def _lookup(catalog: SkillCatalog, name: str) -> SkillEntry | None:
    try:
        return catalog.get(name)
    except SkillError:
        matches = [e for e in catalog.entries() if e.id == name and not e.shadowed]
        return matches[0] if matches else None


def _describe(entry: SkillEntry) -> list[str]:
    meta = entry.meta
    lines = [
        f"name: {meta.name}",
        f"description: {meta.description}",
        f"source: {entry.source_id} (id {entry.id}, version {entry.version})",
        f"location: {entry.location}",
    ]
    if entry.shadowed_by is not None:
        lines.append(f"shadowed by: {entry.shadowed_by}")
    if meta.license:
        lines.append(f"license: {meta.license}")
    if meta.compatibility:
        lines.append(f"compatibility: {meta.compatibility}")
    if meta.allowed_tools is not None:
        lines.append(f"allowed-tools: {' '.join(meta.allowed_tools)}")
    lines.extend(f"metadata.{k}: {v}" for k, v in meta.metadata.items())
    lines.extend(f"{k}: {json.dumps(v, default=str)}" for k, v in meta.extra.items())
    return lines


@skills_app.command("prompt")
def prompt(
    paths: PathsArgument,
    output: Annotated[
        PromptFormat,
        typer.Option("--format", help="markdown, or xml (as skills-ref to-prompt)."),
    ] = PromptFormat.MARKDOWN,
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=1, help="At most this many characters; the rest counted."),
    ] = None,
) -> None:
    """Print the skills catalog as a system-prompt section."""
    catalog = _catalog(paths)
    failed = _report_failures(catalog)
    typer.echo(catalog.render(output, budget=budget))
    if failed:
        raise typer.Exit(1)
