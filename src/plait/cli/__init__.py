"""The ``plait`` command line. Each command group lives in its own module.

``plait --version``, ``plait --help`` and a bare ``plait`` answer from this module alone: typer,
rich and every plait layer stay unloaded, so they return in the time Python takes to start. The
root help is rendered from :mod:`plait.cli.root`'s table, which a test holds equal to the typer
app's own (:mod:`plait.cli.app`). Any other invocation (``plait run …``,
``plait skills --help``) builds the typer app, which imports every command module. The typer
app itself is ``plait.cli.app.app`` (``plait.cli.app`` is its module).
"""

from __future__ import annotations

import sys

from plait.__about__ import __version__
from plait.cli.root import root_help

__all__ = ["main"]


def main() -> None:
    """Console-script entry point (also ``python -m plait``)."""
    args = sys.argv[1:]
    if args == ["--version"]:
        sys.stdout.write(f"plait {__version__}\n")
        return
    if args == ["--help"]:
        sys.stdout.write(root_help())
        return
    if not args:  # as typer's no_args_is_help: the help, and the usage-error status
        sys.stdout.write(root_help())
        raise SystemExit(2)
    from plait.cli.app import main as run_app

    run_app()
