"""The stdio transport: a server process whose stdout carries one JSON-RPC message per line,
read with a bound.

The SDK's own ``stdio_client`` (1.x) keeps appending to a line until a newline comes, so a
server that writes a huge line (or binary junk with no newline) grows the agent's memory without
limit, and re-joins the whole buffer on every chunk. This transport does what it does otherwise
(the SDK's safe default environment plus ``env``, the process in its own session, the server's
stderr on this process's file descriptor 2, or appended to ``log_file``; on close: stdin
closed, :data:`EXIT_GRACE_SECONDS` for the process to exit, then SIGTERM and SIGKILL to its
process group), but a line longer than
``max_message_bytes`` ends the session with a :class:`McpMessageTooLarge`, naming the bound. A
line that is not JSON-RPC is passed on as an error, which the session logs and skips (as the SDK
does).

With ``log_file``, the server's stderr goes to that file instead (its folder is made), never to
the terminal: each start appends a header line (time, command); a file that has reached
:data:`MAX_LOG_BYTES` is first moved to ``<log_file>.1`` (replacing the one before), and what a
session writes past the bound is dropped, after one line saying so (stderr is still read, so the
server never blocks on it). A log file that cannot be opened is a :class:`OSError`, as a command
that cannot start is.

Only :mod:`plait.mcp.client` uses it; like it, it imports the SDK only when a session starts.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from plait.mcp.errors import McpError

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "EXIT_GRACE_SECONDS",
    "MAX_LOG_BYTES",
    "McpMessageTooLarge",
    "open_stdio",
]

MAX_LOG_BYTES = 1_048_576
"""Bytes a server's ``log_file`` may reach (1 MiB): a full one is moved to ``<log_file>.1`` at
the next start; one session writes at most this much into it (see the module docstring)."""

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Bytes one message (one line) from a stdio server may take (``McpServer(max_message_bytes=)``)."""

EXIT_GRACE_SECONDS = 2.0
"""Seconds a server has to exit after its stdin is closed, before its process group is
terminated (SIGTERM, then SIGKILL 2 s later)."""

_CHUNK = 65_536


class McpMessageTooLarge(McpError):
    """A server sent a message longer than ``max_message_bytes`` (a stdio line, an HTTP
    response or event); the session ended."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"the server sent a message longer than {limit:,} bytes; raise the server's "
            "max_message_bytes if its results are that big"
        )


@contextlib.asynccontextmanager
async def open_stdio(
    command: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    max_message_bytes: int,
    on_too_large: Callable[[McpMessageTooLarge], None] = lambda _: None,
    log_file: str | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``command`` and yield ``(read_stream, write_stream)`` for a ``ClientSession``;
    stop the process on exit, even when cancelled (see the module docstring; at most
    :data:`EXIT_GRACE_SECONDS` plus 2 s). ``on_too_large`` is told before the read stream
    ends because of a message over the bound. ``log_file`` receives the server's stderr."""
    import anyio
    from mcp.client.stdio import get_default_environment
    from mcp.os.posix.utilities import terminate_posix_process_tree
    from mcp.shared.message import SessionMessage

    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    streams = (read_writer, read_stream, write_stream, write_reader)
    log: IO[bytes] | None = None
    try:
        if log_file is not None:
            log = _open_log(log_file, command)
        process = await anyio.open_process(
            list(command),
            env={**get_default_environment(), **(env or {})},
            cwd=cwd,
            # without a log file the server's stderr is this process's file descriptor 2
            stderr=None if log is None else subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        if log is not None:
            log.write(f"[plait] could not start: {exc}\n".encode())
            log.close()
        for stream in streams:
            await stream.aclose()
        raise

    async def pump_out() -> None:
        assert process.stdout is not None
        async with read_writer:
            try:
                async for line in _lines(process.stdout, max_message_bytes):
                    if line.strip():
                        await read_writer.send(_message(line))
            except McpMessageTooLarge as exc:
                on_too_large(exc)  # then the stream ends, which ends the session

    async def pump_in() -> None:
        assert process.stdin is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async with write_reader:
                async for item in write_reader:
                    text = item.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send(text.encode("utf-8") + b"\n")

    async def pump_err() -> None:
        assert process.stderr is not None and log is not None
        room = max(0, MAX_LOG_BYTES - log.tell())
        with log, contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                if room > 0:
                    log.write(chunk[:room])
                    log.flush()
                    room -= len(chunk)
                    if room <= 0:
                        log.write(f"\n[plait] log cut at {MAX_LOG_BYTES:,} bytes\n".encode())
                        log.flush()

    async with anyio.create_task_group() as group, process:
        group.start_soon(pump_out)
        group.start_soon(pump_in)
        if log is not None:
            group.start_soon(pump_err)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # bounded: the grace, then the tree's kill
                if process.stdin is not None:
                    with contextlib.suppress(Exception):
                        await process.stdin.aclose()
                try:
                    with anyio.fail_after(EXIT_GRACE_SECONDS):
                        await process.wait()
                except TimeoutError:
                    await terminate_posix_process_tree(process)
                for stream in streams:
                    await stream.aclose()


def _open_log(path: str, command: Sequence[str]) -> IO[bytes]:
    """``path`` opened to append (its folder made; moved to ``.1`` first once full), with a
    header line for this start."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if target.stat().st_size >= MAX_LOG_BYTES:
            os.replace(target, f"{target}.1")
    handle = target.open("ab")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    handle.write(f"[plait] {stamp} starting: {shlex.join(command)}\n".encode())
    handle.flush()
    return handle


async def _lines(stdout: Any, limit: int) -> AsyncIterator[bytes]:
    """The lines of ``stdout`` (without the newline); :class:`McpMessageTooLarge` once a line
    passes ``limit`` bytes. At most ``limit`` plus one chunk is held."""
    buffer = bytearray()
    async for chunk in stdout:
        searched = len(buffer)
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", max(start, searched))) != -1:
            if end - start > limit:
                raise McpMessageTooLarge(limit)
            yield bytes(buffer[start:end])
            start = end + 1
        del buffer[:start]
        if len(buffer) > limit:
            raise McpMessageTooLarge(limit)
    if buffer:
        yield bytes(buffer)


def _message(line: bytes) -> Any:
    """The SDK message in ``line``, or the exception that says why it is not one."""
    from mcp import types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(types.JSONRPCMessage.model_validate_json(line))
    except Exception as exc:
        return exc
