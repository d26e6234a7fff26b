"""Extras and the command line: ``plait[all]`` installs every extra it can ask for, and a
missing one is one line with the ``pip install`` command, never a traceback."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest
from cli_inprocess import run_plait

ROOT = Path(__file__).parents[2]

# What the CLI loads: its commands, the providers, the trace page, MCP, stores and backends.
CLI_PACKAGES = ("cli", "models", "trace", "mcp", "stores", "backends")


def _extras(name: str, table: dict[str, list[str]]) -> set[str]:
    """``name`` and every extra it pulls in through ``plait[...]`` requirements."""
    found = {name}
    for requirement in table[name]:
        if match := re.fullmatch(r"plait\[([a-z,]+)\]", requirement):
            for inner in match[1].split(","):
                found |= _extras(inner, table)
    return found


def test_all_installs_every_extra_a_cli_message_tells_the_user_to_install() -> None:
    # Before: plait[all] was openai, anthropic and fsspec: `plait ui` and `--mcp` then asked for
    # another pip install.
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named: set[str] = set()
    for package in CLI_PACKAGES:
        for path in (ROOT / "src" / "plait" / package).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            named.update(re.findall(r"pip install '?plait\[([a-z]+)\]", text))
    assert {"ui", "mcp", "openai", "anthropic", "postgres"} <= named
    assert named <= _extras("all", table) - {"all"}


POSTGRES = "postgresql://plait@127.0.0.1:9/never"  # never reached: the SDK is missing first
COMPATIBLE = "openai-compatible:m@http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("missing", "extra", "args"),
    [
        (("psycopg", "psycopg_pool"), "postgres", ("threads", "list", "--store", POSTGRES)),
        (("psycopg", "psycopg_pool"), "postgres", ("db", "upgrade", "--store", POSTGRES)),
        (
            ("psycopg", "psycopg_pool"),
            "postgres",
            ("run", "hi", "--model", COMPATIBLE, "--store", POSTGRES, "--no-trace"),
        ),
        (("mcp",), "mcp", ("run", "hi", "--model", COMPATIBLE, "--mcp", "x=echo hi")),
        (("openai",), "openai", ("run", "hi", "--model", COMPATIBLE)),
        (("anthropic",), "anthropic", ("chat", "--model", "anthropic:claude-x")),
    ],
)
def test_a_missing_extra_is_one_line_with_the_install_command(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    missing: tuple[str, ...],
    extra: str,
    args: tuple[str, ...],
) -> None:
    # Before: a Postgres store without psycopg ended in a ModuleNotFoundError traceback.
    for name in [m for m in sys.modules if m.split(".")[0] in missing]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in missing:  # what an environment without the extra sees
        monkeypatch.setitem(sys.modules, name, None)
    result = run_plait(*args, home=tmp_path, env={"ANTHROPIC_API_KEY": "k"})
    assert result.returncode in (1, 2), result.stdout + result.stderr
    # piped, a failed run also names its thread on stderr (the answer alone goes to stdout)
    lines = [x for x in result.stderr.strip().splitlines() if not x.startswith("thread: ")]
    assert len(lines) == 1 and f"pip install 'plait[{extra}]'" in lines[0], result.stderr
