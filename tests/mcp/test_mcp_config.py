"""Servers from ``--mcp NAME=...`` and from config tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from plait.mcp import McpConfigError, parse_mcp_option, servers_from_mapping
from plait.mcp.client import HttpTransport, StdioTransport


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("files=npx -y server .", ("files", {"command": ["npx", "-y", "server", "."]})),
        ("q= 'my server' --flag='a b'", ("q", {"command": ["my server", "--flag=a b"]})),
        ("docs=http://127.0.0.1:8000/mcp", ("docs", {"url": "http://127.0.0.1:8000/mcp"})),
        ("x=https://example.org/mcp", ("x", {"url": "https://example.org/mcp"})),
    ],
)
def test_parse_mcp_option(text: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert parse_mcp_option(text) == expected


@pytest.mark.parametrize("text", ["files", "=cmd", "files=", "files=  ", "q='unclosed"])
def test_bad_mcp_options_say_the_expected_form(text: str) -> None:
    with pytest.raises(McpConfigError, match=r"NAME=COMMAND|cannot split"):
        parse_mcp_option(text)


def test_servers_from_mapping_builds_each_server() -> None:
    docs, files = servers_from_mapping(
        {
            "docs": {"url": "http://127.0.0.1:1/mcp", "timeout": 5, "headers": {"A": "b"}},
            "files": {"command": "srv --root '/a b'", "prefix": "fs", "block": ["rm"]},
        }
    )
    assert isinstance(docs.transport, HttpTransport) and docs.transport.headers == {"A": "b"}
    assert docs.timeout == 5.0 and docs.prefix == "docs"
    assert isinstance(files.transport, StdioTransport)
    assert files.transport.command == ("srv", "--root", "/a b")
    assert files.prefix == "fs" and files.block == {"rm"} and files.allow is None


def test_servers_from_mapping_takes_dataclasses_and_skips_none() -> None:
    @dataclass
    class Config:
        command: list[str] | None = None
        url: str | None = None
        allow: list[str] | None = None

    (server,) = servers_from_mapping({"s": Config(command=["srv"])})
    assert server.transport == StdioTransport(("srv",))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"s": {"command": "srv", "colour": "red"}}, "unknown setting"),
        ({"s": "srv"}, "must be a table"),
        ({"s": {"command": ""}}, "command is empty"),
        ({"s": {"url": "http://x", "timeout": -1}}, "timeout"),
    ],
)
def test_bad_server_settings_name_the_server(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(McpConfigError, match=f"'s'.*{message}|{message}"):
        servers_from_mapping(settings)
