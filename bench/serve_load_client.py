"""The load client of ``bench/serve_load.py``: one keep-alive HTTP/1.1 connection a conversation
(:class:`Connection`) and the three APIs it speaks to the servers it compares (:class:`ChatApi`):
``plait serve``'s ``/v1/chat/completions``, the floor's one route, and ``langgraph dev``'s
threads and runs. Each API names (or creates) a conversation's thread before the clock starts,
sends one turn, and reads a thread's messages back for the lost/duplicated check."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any, Protocol

import h11
import httpx


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its children (uvicorn's workers), KiB."""
    total = 0
    pids = [pid]
    with contextlib.suppress(OSError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(c) for c in children]
    for p in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


class Connection:
    """One keep-alive HTTP/1.1 connection of the load client: asyncio streams and ``h11`` (the
    HTTP/1.1 state machine httpx itself runs on). Why not httpx's pool: with 200 connections
    in one ``AsyncClient`` its pool costs the client ~15 ms of CPU a request, and 200 clients
    cost ~25 ms each to build; on 2 cores shared with the servers the client, not the server,
    set the figures (64 requests/s against an endpoint that only sleeps 100 ms)."""

    def __init__(
        self, url: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.url, self.reader, self.writer = url, reader, writer
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(url, reader, writer)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.reader.at_eof():
            # The server closed the idle keep-alive connection (uvicorn after 5 s, which a
            # think time can exceed): open a new one, as any HTTP client does.
            self.close()
            fresh = await Connection.open(self.url)
            self.reader, self.writer, self.conn = fresh.reader, fresh.writer, fresh.conn
        elif self.conn.our_state is h11.DONE:
            self.conn.start_next_cycle()
        head = [("host", "127.0.0.1"), ("content-type", "application/json")]
        head += [("content-length", str(len(body))), *headers.items()]
        data = self.conn.send(h11.Request(method="POST", target=path, headers=head))
        data += self.conn.send(h11.Data(data=body)) + self.conn.send(h11.EndOfMessage())
        self.writer.write(data)
        status, chunks = 0, []
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                received = await self.reader.read(65536)
                if not received:
                    raise ConnectionError("the server closed the connection")
                self.conn.receive_data(received)
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return status, b"".join(chunks)

    async def post_json(self, path: str, body: Any, headers: dict[str, str]) -> Any:
        """POST ``body`` as JSON; the decoded answer, or ``ValueError`` unless HTTP 200."""
        status, answer = await self.post(path, json.dumps(body).encode(), headers)
        if status != 200:
            raise ValueError(f"HTTP {status}: {answer[:200]!r}")
        return json.loads(answer)

    def close(self) -> None:
        self.writer.close()


class ChatApi(Protocol):
    """How the load client talks to one kind of server."""

    headers: dict[str, str]

    async def threads(self, client: httpx.AsyncClient, tag: str, count: int) -> list[str]:
        """The ids of ``count`` fresh threads (made before the clock starts, if the API needs
        a thread made first)."""
        ...

    async def send(self, connection: Connection, thread: str, text: str) -> str:
        """One turn: ``text`` as the user's message on ``thread``; the answer's text."""
        ...

    async def messages(self, client: httpx.AsyncClient, thread: str) -> list[str]:
        """The texts of ``thread``'s messages, in order, as the server kept them."""
        ...


class PlaitChat:
    """``plait serve``: ``POST /v1/chat/completions`` (the thread named by ``x-plait-thread``),
    read back with ``GET /threads/{id}``."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    async def threads(self, client: httpx.AsyncClient, tag: str, count: int) -> list[str]:
        return [f"{tag}-{n}" for n in range(count)]

    async def send(self, connection: Connection, thread: str, text: str) -> str:
        request = {"model": "plait", "messages": [{"role": "user", "content": text}]}
        headers = {**self.headers, "x-plait-thread": thread}
        answer = await connection.post_json("/v1/chat/completions", request, headers)
        return str(answer["choices"][0]["message"]["content"])

    async def messages(self, client: httpx.AsyncClient, thread: str) -> list[str]:
        got = (await client.get(f"/threads/{thread}")).json()["messages"]
        return [str(m["content"]) for m in got]


class FloorChat(PlaitChat):
    """The floor: ``POST /chat`` with ``{"thread", "text"}``; read back as ``plait serve``."""

    async def send(self, connection: Connection, thread: str, text: str) -> str:
        request = {"thread": thread, "text": text}
        return str((await connection.post_json("/chat", request, self.headers))["content"])


class LangGraphRuns:
    """``langgraph dev``: ``POST /threads`` makes each thread (ids are the server's), a turn is
    ``POST /threads/{id}/runs/wait`` (the run's final state in the answer), read back with
    ``GET /threads/{id}/state``."""

    def __init__(self, assistant: str) -> None:
        self.headers: dict[str, str] = {}
        self.assistant = assistant

    async def threads(self, client: httpx.AsyncClient, tag: str, count: int) -> list[str]:
        made = []
        for n in range(count):
            created = await client.post("/threads", json={"metadata": {"bench": f"{tag}-{n}"}})
            made.append(str(created.raise_for_status().json()["thread_id"]))
        return made

    async def send(self, connection: Connection, thread: str, text: str) -> str:
        request = {
            "assistant_id": self.assistant,
            "input": {"messages": [{"role": "user", "content": text}]},
        }
        state = await connection.post_json(f"/threads/{thread}/runs/wait", request, {})
        return str(state["messages"][-1]["content"])

    async def messages(self, client: httpx.AsyncClient, thread: str) -> list[str]:
        values = (await client.get(f"/threads/{thread}/state")).json()["values"] or {}
        return [str(m["content"]) for m in values.get("messages", [])]
