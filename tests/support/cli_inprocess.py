"""Run the ``plait`` command in this process through typer's ``CliRunner``.

A spawned ``python -c 'from plait.cli import main; main()'`` costs a fresh interpreter and every
import per call; most CLI tests only need the command's exit status and output, so they run it
here. Tests of what must cross a process boundary (the console-script entry point, signals,
argv/stdout encoding) still spawn a process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

_PROVIDER_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLAIT_MODEL", "PLAIT_STORE")


@dataclass(frozen=True)
class Completed:
    """What a command did: the fields tests read from ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


def run_plait(
    *args: str,
    home: Path,
    columns: int = 200,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Completed:
    """``plait *args`` with ``PLAIT_HOME=home``, no provider variables, ``NO_COLOR`` and
    ``COLUMNS=columns``; ``env`` adds variables. The environment is restored afterwards.

    Called from a coroutine (an async test), the command runs in a worker thread, since it starts
    its own event loop; the caller's loop is blocked meanwhile (at most ``_DEADLINE`` seconds).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _invoke(args, home, columns, stdin, env)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_invoke, args, home, columns, stdin, env).result(timeout=_DEADLINE)


_DEADLINE = 120.0


def _invoke(
    args: tuple[str, ...],
    home: Path,
    columns: int,
    stdin: str | None,
    env: Mapping[str, str] | None,
) -> Completed:
    from plait.cli.app import app

    variables: dict[str, str | None] = dict.fromkeys(_PROVIDER_VARIABLES)
    variables.update({"PLAIT_HOME": str(home), "COLUMNS": str(columns), "NO_COLOR": "1"})
    variables.update(env or {})
    result = CliRunner().invoke(app, list(args), input=stdin, env=variables)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Completed(result.exit_code, result.stdout, result.stderr)


def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Isolate a CLI test: no provider or plait variables, empty ``$HOME`` and ``$PLAIT_HOME``
    (``tmp_path/home``, ``tmp_path/plait-home``) and ``tmp_path/project`` as the current folder.
    Returns ``tmp_path``."""
    for name in (*_PROVIDER_VARIABLES, "PLAIT_MODEL_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for name in ("home", "plait-home", "project"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path / "plait-home"))
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path
