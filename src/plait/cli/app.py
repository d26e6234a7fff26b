"""The root ``plait`` command: ``--version``, ``--help`` and the command groups."""

from __future__ import annotations

import io
import sys

import typer

from plait.__about__ import __version__
from plait.cli.chat import chat
from plait.cli.config_command import config_app
from plait.cli.db import db_app
from plait.cli.demo import demo
from plait.cli.models import models
from plait.cli.root import HELP
from plait.cli.run import MODEL_EPILOG, run
from plait.cli.serve import serve
from plait.cli.skills import skills_app
from plait.cli.threads import threads_app
from plait.cli.ui import ui

app = typer.Typer(
    name="plait",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(skills_app, name="skills")
app.add_typer(threads_app, name="threads")
app.add_typer(db_app, name="db")
app.add_typer(config_app, name="config")
app.command(epilog=MODEL_EPILOG)(run)
app.command(epilog=MODEL_EPILOG)(chat)
app.command()(demo)
app.command()(ui)
app.command()(serve)
app.command(epilog=MODEL_EPILOG)(models)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"plait {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """plait: agents from an orchestrator loop and composable middleware."""


def _tolerate_unencodable_output() -> None:
    """Print ``?`` for characters the terminal's encoding cannot show (a model's answer, the
    CLI's own symbols) instead of failing with ``UnicodeEncodeError`` mid-turn."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="replace")


def main() -> None:
    """Console-script entry point."""
    _tolerate_unencodable_output()
    app()
