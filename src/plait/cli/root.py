"""The root command's help, without typer: what ``plait --help`` prints from :mod:`plait.cli`.

:mod:`plait.cli.app` builds the typer app from the same :data:`HELP`; a test holds
:data:`COMMANDS` equal to the commands the typer app lists, so the two helps cannot drift.
"""

from __future__ import annotations

__all__ = ["COMMANDS", "HELP", "root_help"]

HELP = "Run LLM agents built from middleware, with Agent Skills and context management."
"""The root command's help text (typer's ``app.info.help``)."""

COMMANDS: tuple[tuple[str, str], ...] = (
    ("run", "Run one turn: stream the answer and show tool calls, skills and context events."),
    (
        "chat",
        "An interactive session. Ctrl-C cancels the running turn; Ctrl-D or /exit ends the"
        " session.",
    ),
    (
        "demo",
        "Run the bundled example skills end to end with a scripted model (no key, no network).",
    ),
    ("ui", "Open the local trace page: runs, waterfalls, context diffs, tokens and costs."),
    (
        "serve",
        "Serve agents over HTTP: AG-UI, OpenAI-compatible chat completions, threads and runs.",
    ),
    ("models", "List the models the configured provider offers."),
    ("skills", "Validate, inspect and render Agent Skills (SKILL.md) folders."),
    ("threads", "List, show, export and delete stored conversations."),
    ("db", "Set up the Postgres database a store URL names."),
    ("config", "Show the configuration: config files, environment and flags, merged."),
)
"""Every root command with its one-line help, in the order the typer app lists them."""


def root_help() -> str:
    """``plait --help``: usage, :data:`HELP`, the root options and :data:`COMMANDS`."""
    width = max(len(name) for name, _ in COMMANDS)
    commands = "".join(f"  {name:<{width}}  {text}\n" for name, text in COMMANDS)
    return (
        "Usage: plait [OPTIONS] COMMAND [ARGS]...\n\n"
        f"  {HELP}\n\n"
        "Options:\n"
        "  --version  Print the version and exit.\n"
        "  --help     Show this message and exit.\n\n"
        f"Commands:\n{commands}\n"
        "Run 'plait COMMAND --help' for a command's arguments and options.\n"
    )
