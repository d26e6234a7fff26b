"""``plait config show``: the merged configuration and where each value came from."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.text import Text

from plait.cli.config import Settings
from plait.cli.console import fail
from plait.cli.options import Flags, merged_settings, model_spec, with_flags
from plait.cli.run import MODEL_EPILOG
from plait.cli.skill_folders import skill_folders
from plait.errors import ConfigurationError

__all__ = ["config_app", "describe"]

config_app = typer.Typer(
    help="Show the configuration: config files, environment and flags, merged.",
    no_args_is_help=True,
)


class ShowFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_defaults=True)
    return value


_HIDDEN = "<hidden>"


def _shown(key: str, value: Any, origin: str) -> Any:
    """``value`` as it may be printed: an API key, and the ``env`` and ``headers`` values of a
    ``.mcp.json`` server (``${VAR}`` expanded: tokens), are hidden."""
    if key.startswith("providers.") and key.endswith(".api_key"):
        return _HIDDEN
    if key.startswith("mcp.") and origin.endswith(".mcp.json") and isinstance(value, dict):
        for table in ("env", "headers"):
            if isinstance(value.get(table), dict):
                value = {**value, table: dict.fromkeys(value[table], _HIDDEN)}
    return value


def describe(settings: Settings) -> list[tuple[str, Any, str]]:
    """``(key, value, origin)`` for every setting, sorted by key, plus the model actually chosen
    and the skills folders actually used (the standard ones that exist included). Secrets are
    hidden (see :func:`_shown`)."""
    rows = [
        (k, _shown(k, _plain(v), settings.origins[k]), settings.origins[k])
        for k, v in sorted(settings.values.items())
    ]
    if "model" not in settings.values:
        try:
            rows.append(("model", model_spec(settings), "a provider key in the environment"))
        except ConfigurationError:
            rows.append(("model", None, "none: set PLAIT_MODEL, model in plait.toml or --model"))
    folders = skill_folders(
        [], settings.get("skills", []), use_standard=bool(settings.get("default_skills"))
    )
    rows.append(("skill folders", [f.label for f in folders], "skills + standard folders"))
    return sorted(rows, key=lambda row: row[0])


@config_app.command("show", epilog=MODEL_EPILOG)
@with_flags
def show(
    flags: Flags,
    output: Annotated[ShowFormat, typer.Option("--format", help="text or json.")] = (
        ShowFormat.TEXT
    ),
) -> None:
    """Print every setting, its value and where it came from: a config file (plait.toml,
    pyproject.toml [tool.plait], $PLAIT_HOME/config.toml), an environment variable, a flag or
    the default. Flags given here override as they would for plait run."""
    try:
        settings = merged_settings(flags)
        rows = describe(settings)
    except ConfigurationError as exc:
        fail(str(exc), 2)
    if output is ShowFormat.JSON:
        document = {
            "files": [str(path) for path in settings.files],
            "settings": {key: {"value": value, "from": origin} for key, value, origin in rows},
        }
        typer.echo(json.dumps(document, indent=2, default=str))
        return
    console = Console(highlight=False, emoji=False)
    files = ", ".join(map(str, settings.files)) or "none found"
    console.print(Text(f"config files: {files}", style="dim"), soft_wrap=True)
    for key, value, origin in rows:
        line = Text(f"{key} = ")
        line.append(json.dumps(value, default=str, ensure_ascii=False))
        line.append(f"  # {origin}", style="dim")
        console.print(line, soft_wrap=True)
