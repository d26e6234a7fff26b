"""``plait[all]`` installs every extra the command line can ask for."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
