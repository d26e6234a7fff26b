"""``.mcp.json`` as Claude Code and Cursor write it: entries become ``McpServer`` settings,
``${VAR}`` / ``${VAR:-default}`` expand as Claude Code expands them, and a bad entry is one
:class:`McpConfigError` naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait.mcp import McpConfigError, servers_from_mapping
from plait.mcp.dotmcp import MAX_MCP_JSON_BYTES, expand_variables, read_mcp_json


def dotmcp(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def test_stdio_and_http_entries_become_server_settings_in_file_order(tmp_path: Path) -> None:
    path = dotmcp(
        tmp_path,
        {
            "files": {"command": "npx", "args": ["-y", "server-fs", "."], "env": {"A": "1"}},
            "typed": {"type": "stdio", "command": "srv"},
            "docs": {"type": "http", "url": "https://x.example/mcp", "headers": {"H": "v"}},
            "claude-only": {"command": "srv", "description": "ignored", "timeout": 5},
        },
    )
    found = read_mcp_json(path, environ={})
    assert found.servers == {
        "files": {"command": ["npx", "-y", "server-fs", "."], "env": {"A": "1"}},
        "typed": {"command": ["srv"]},
        "docs": {"url": "https://x.example/mcp", "headers": {"H": "v"}},
        "claude-only": {"command": ["srv"]},
    }
    assert found.notes == []
    assert [s.name for s in servers_from_mapping(found.servers)] == list(found.servers)


def test_variables_expand_with_defaults_as_claude_code_does(tmp_path: Path) -> None:
    env = {"TOKEN": "t0k", "EMPTY": "", "BIN": "/opt/bin"}
    path = dotmcp(
        tmp_path,
        {
            "s": {
                "command": "${BIN}/srv",
                "args": ["--root=${ROOT:-.}", "${EMPTY:-fallback}", "$NOT_EXPANDED"],
                "env": {"KEY": "${TOKEN}", "BLANK": "${EMPTY}"},
            },
            "h": {"type": "http", "url": "${BASE:-http://127.0.0.1:9}/mcp",
                  "headers": {"Authorization": "Bearer ${TOKEN}"}},
        },
    )  # fmt: skip
    found = read_mcp_json(path, environ=env)
    assert found.servers["s"] == {
        "command": ["/opt/bin/srv", "--root=.", "fallback", "$NOT_EXPANDED"],
        "env": {"KEY": "t0k", "BLANK": ""},
    }
    assert found.servers["h"] == {
        "url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer t0k"},
    }
    assert expand_variables("${A}${B:-b}", "k", {"A": "a"}) == "ab"


def test_sse_and_disabled_entries_are_left_out_with_a_note(tmp_path: Path) -> None:
    path = dotmcp(
        tmp_path,
        {
            "old": {"type": "sse", "url": "https://x.example/sse"},
            "off": {"command": "srv", "disabled": True},
            "on": {"command": "srv"},
        },
    )
    found = read_mcp_json(path, environ={})
    assert list(found.servers) == ["on"]
    assert len(found.notes) == 2
    assert "'old' left out" in found.notes[0] and "Streamable HTTP" in found.notes[0]
    assert "'off' left out" in found.notes[1] and "disabled" in found.notes[1]


@pytest.mark.parametrize(
    ("servers", "needles"),
    [
        ({"s": {"command": "srv", "env": {"K": "${MISSING}"}}},
         ["mcpServers.s.env.K", "${MISSING} is not set", "${MISSING:-default}"]),
        ({"s": {"command": ["a", "b"]}}, ["mcpServers.s.command", "non-empty string"]),
        ({"s": {"command": "srv", "args": "x"}}, ["mcpServers.s.args", "list of strings"]),
        ({"s": {"command": "srv", "args": ["ok", 3]}}, ["mcpServers.s.args[1]"]),
        ({"s": {"command": "srv", "env": {"K": 1}}}, ["mcpServers.s.env", "object of strings"]),
        ({"s": {"type": "http", "url": "ftp://x"}}, ["mcpServers.s.url", "http://"]),
        ({"s": {"type": "ws", "url": "x"}}, ["mcpServers.s.type", "stdio, http, sse"]),
        ({"s": {"args": ["x"]}}, ["mcpServers.s", "give 'command'"]),
        ({"s": "npx srv"}, ["mcpServers.s", "must be an object"]),
        (["s"], ["mcpServers", "must be an object"]),
    ],
)  # fmt: skip
def test_a_bad_entry_names_the_file_and_the_key(
    tmp_path: Path, servers: object, needles: list[str]
) -> None:
    path = dotmcp(tmp_path, servers)
    with pytest.raises(McpConfigError) as info:
        read_mcp_json(path, environ={})
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "is not valid JSON"),
        (b"\xff\xfe", "is not UTF-8"),
        (b"[1, 2]", "must hold a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b" " * (MAX_MCP_JSON_BYTES + 1), "larger than"),
    ],
)
def test_a_file_that_cannot_be_read_as_json_is_one_error(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = tmp_path / ".mcp.json"
    path.write_bytes(content)
    with pytest.raises(McpConfigError, match=needle) as info:
        read_mcp_json(path)
    assert str(info.value).startswith(str(path))
