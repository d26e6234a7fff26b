"""A stdio server's stderr goes to its ``log_file``, bounded (:data:`MAX_LOG_BYTES` per session,
a full file moved to ``.1`` at the next start), and a server that cannot start names the file."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp_server import STDIO

from plait.mcp import McpConnectError, McpServer
from plait.mcp.stdio import MAX_LOG_BYTES, open_stdio

FLOOD = (
    "import sys\n"
    "for _ in range(48):\n"
    "    sys.stderr.write('x' * 65536)\n"
    "sys.stderr.write('END-' + 'OF-FLOOD'); sys.stderr.flush()\n"
    "sys.stdin.read()\n"
)


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _size(path: Path) -> int:
    return path.stat().st_size


async def _wait_for(path: Path, needle: str, deadline: float = 30.0) -> str:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline
    while loop.time() < end:
        text = _read(path)
        if needle in text:
            return text
        await asyncio.sleep(0.05)
    raise AssertionError(f"{needle!r} never reached {path}")


async def test_a_server_flooding_stderr_fills_its_log_up_to_the_bound_only(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "flood.log"
    command = [sys.executable, "-c", FLOOD]
    async with open_stdio(command, None, None, 1 << 20, log_file=str(log)):
        await _wait_for(log, "log cut at")
    text = log.read_text(errors="replace")
    header, ended = text.splitlines()[0], "END-OF-FLOOD" in text
    assert header.startswith("[plait] ") and "starting: " in header
    assert MAX_LOG_BYTES < log.stat().st_size < MAX_LOG_BYTES + 1024
    assert not ended  # written past the bound: dropped
    async with open_stdio([sys.executable, "-c", "import sys; sys.stdin.read()"], None, None,
                          1 << 20, log_file=str(log)):  # fmt: skip
        pass
    assert _size(Path(f"{log}.1")) > MAX_LOG_BYTES  # the full one, moved aside
    assert _size(log) < 1024 and _read(log).startswith("[plait] ")


async def test_a_working_servers_stderr_is_in_its_log_file(tmp_path: Path) -> None:
    log = tmp_path / "demo.log"
    async with McpServer("demo", command=STDIO, log_file=str(log)) as server:
        assert server.log_file == str(log)
        assert "demo_echo" in {t.name for t in await server.list_tools()}
    assert log.read_text().startswith("[plait] ")


async def test_a_server_that_cannot_start_names_its_log_file(tmp_path: Path) -> None:
    log = tmp_path / "missing.log"
    server = McpServer("missing", command=["/nonexistent/srv"], log_file=str(log))
    try:
        with pytest.raises(McpConnectError) as info:
            await server.connect()
    finally:
        await server.aclose()
    assert info.value.log_file == str(log)
    assert f"its errors are in {log}" in str(info.value)
    assert "could not start: " in log.read_text()


def test_log_file_applies_to_command_servers_only() -> None:
    from plait.mcp import McpConfigError

    with pytest.raises(McpConfigError, match="log_file"):
        McpServer("web", url="http://127.0.0.1:1/mcp", log_file="x.log")
