"""``plait serve`` under load: 200 concurrent conversations x 5 turns against a fake model with a
fixed 100 ms latency, beside a minimal Starlette endpoint calling the same agent (the floor).

Configurations: ``plait serve`` on SQLite (1 worker), the floor on SQLite, and with
``$PLAIT_TEST_POSTGRES_URL`` set ``plait serve`` on Postgres with 2 workers. They run
interleaved round by round (``--rounds``). Per configuration: requests/s, p50/p99 latency added
over the model's 100 ms, the servers' resident memory per idle thread after the load (RSS after
minus RSS before, over the threads made), and lost or duplicated messages (each thread read
back must hold exactly its 5 user messages and 5 answers, in order; the script exits 1
otherwise; a request that failed, e.g. a store deadline under overload, is counted under
``failed`` and its turn is then missing from its thread). The load client is asyncio streams
with h11 (one keep-alive connection a conversation, opened before the clock starts; see
``Connection``); every server is a real process on 127.0.0.1.

    python bench/serve_load.py [--conversations 200] [--turns 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import h11
import httpx

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from serve_process import ServeProcess, serve_process  # noqa: E402

from plait.trace.access import new_token  # noqa: E402
from plait.trace.server import free_port  # noqa: E402

LATENCY = 0.1

FLOOR = '''
"""The floor: the same agent behind one Starlette route, nothing else."""
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from myapp import agent


async def chat(request: Request) -> JSONResponse:
    body = await request.json()
    result = await agent.run(body["text"], thread_id=body["thread"])
    return JSONResponse({"content": result.output})


async def thread(request: Request) -> JSONResponse:
    snapshot = await agent.store.load(request.path_params["thread"])
    return JSONResponse({"messages": [{"content": m.text} for m in snapshot.messages]})


app = Starlette(routes=[Route("/chat", chat, methods=["POST"]), Route("/threads/{thread}", thread)])
'''


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


@contextlib.contextmanager
def floor_process(folder: Path) -> Iterator[ServeProcess]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "floor.py").write_text(FLOOR)
    (folder / "myapp.py").write_text((ROOT / "tests" / "serve" / "myapp.py").read_text())
    port = free_port()
    log = folder / "floor.log"
    env = {
        **os.environ,
        "PLAIT_FAKE_LATENCY": str(LATENCY),
        "PLAIT_TEST_SERVE_STORE": str(folder / "floor.sqlite3"),
    }
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "floor:app",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=out)
    served = ServeProcess(f"http://127.0.0.1:{port}", None, process, log, folder)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(served.url + "/threads/x", timeout=1)
                break
            time.sleep(0.05)
        yield served
    finally:
        process.terminate()
        process.wait(timeout=20)


class Connection:
    """One keep-alive HTTP/1.1 connection of the load client: asyncio streams and ``h11`` (the
    HTTP/1.1 state machine httpx itself runs on). Why not httpx's pool: with 200 connections
    in one ``AsyncClient`` its pool costs the client ~15 ms of CPU a request, and 200 clients
    cost ~25 ms each to build; on 2 cores shared with the servers the client, not the server,
    set the figures (64 requests/s against an endpoint that only sleeps 100 ms)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT)

    @classmethod
    async def open(cls, url: str) -> Connection:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        return cls(reader, writer)

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.conn.our_state is h11.DONE:
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

    def close(self) -> None:
        self.writer.close()


async def load(
    server: ServeProcess, floor: bool, tag: str, conversations: int, turns: int
) -> dict[str, float]:
    latencies: list[float] = []
    errors: list[str] = []
    auth = dict(server.headers())
    # Every conversation's connection is open before the clock starts (a frontend's keep-alive
    # connection); each then sends its turns one after another.
    connections = [await Connection.open(server.url) for _ in range(conversations)]

    async def conversation(n: int) -> None:
        thread = f"{tag}-{n}"
        for turn in range(turns):
            text = f"c{n} t{turn}"
            started = time.perf_counter()
            try:
                content = await send(connections[n], thread, text)
            except (OSError, h11.ProtocolError, KeyError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)
            if content != f"echo: {text}":
                errors.append(f"wrong answer {content!r}")

    async def send(connection: Connection, thread: str, text: str) -> str:
        if floor:
            body = json.dumps({"thread": thread, "text": text}).encode()
            status, answer = await connection.post("/chat", body, auth)
            if status != 200:
                raise ValueError(f"HTTP {status}: {answer[:200]!r}")
            return str(json.loads(answer)["content"])
        request = {"model": "plait", "messages": [{"role": "user", "content": text}]}
        headers = {**auth, "x-plait-thread": thread}
        status, answer = await connection.post(
            "/v1/chat/completions", json.dumps(request).encode(), headers
        )
        if status != 200:
            raise ValueError(f"HTTP {status}: {answer[:200]!r}")
        return str(json.loads(answer)["choices"][0]["message"]["content"])

    before = rss_kib(server.process.pid)
    began = time.perf_counter()
    await asyncio.gather(*(conversation(n) for n in range(conversations)))
    elapsed = time.perf_counter() - began
    after = rss_kib(server.process.pid)
    for connection in connections:
        connection.close()
    bad = 0
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers(), timeout=120) as c:
        for n in range(conversations):
            got = (await c.get(f"/threads/{tag}-{n}")).json()["messages"]
            want = [x for t in range(turns) for x in (f"c{n} t{t}", f"echo: c{n} t{t}")]
            bad += [m["content"] for m in got] != want
    added = sorted((x - LATENCY) * 1000 for x in latencies)
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(added),
        "p99": added[min(len(added) - 1, int(len(added) * 0.99))],
        "kib_per_thread": max(0, after - before) / conversations,
        "bad": bad,
        "errors": len(errors),
    }


async def _setup(url: str, schema: str) -> None:
    from plait.stores.postgres import PostgresThreadStore

    store = PostgresThreadStore(url, schema=schema)
    try:
        await store.setup()
    finally:
        await store.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    env = {"PLAIT_FAKE_LATENCY": str(LATENCY)}
    results: dict[str, list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        servers: dict[str, tuple[ServeProcess, bool]] = {
            "plait serve, SQLite, 1 worker": (
                stack.enter_context(serve_process(folder / "sqlite", token=new_token(), env=env)),
                False,
            ),
            "floor (Starlette + agent.run), SQLite": (
                stack.enter_context(floor_process(folder / "floor")),
                True,
            ),
        }
        url = os.environ.get("PLAIT_TEST_POSTGRES_URL")
        if url:
            schema = f"bench_{os.getpid()}"
            asyncio.run(_setup(url, schema))
            pg_env = {**env, "PLAIT_TEST_SERVE_STORE": url, "PLAIT_TEST_SERVE_SCHEMA": schema}
            pg = stack.enter_context(
                serve_process(folder / "pg", token=new_token(), workers=2, env=pg_env)
            )
            servers["plait serve, Postgres, 2 workers"] = (pg, False)
        for round_ in range(args.rounds):
            for name, (server, floor) in servers.items():
                tag = f"r{round_}-{abs(hash(name)) % 10_000}"
                results.setdefault(name, []).append(
                    asyncio.run(load(server, floor, tag, args.conversations, args.turns))
                )
    load_avg = os.getloadavg()[0]
    print(
        f"{args.conversations} conversations x {args.turns} turns, fake model "
        f"{LATENCY * 1000:.0f} ms, {args.rounds} rounds (medians), load {load_avg:.1f}"
    )
    heads = ("req/s", "p50 +ms", "p99 +ms", "KiB/thread", "lost/dup", "failed")
    print(f"{'configuration':40} " + " ".join(f"{h:>10}" for h in heads))
    failed = False
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        bad = sum(int(r["bad"]) for r in runs)
        failed |= bad > 0
        failures = sum(int(r["errors"]) for r in runs)
        cells = [f"{med['rps']:.0f}", f"{med['p50']:.1f}", f"{med['p99']:.1f}"]
        cells += [f"{med['kib_per_thread']:.1f}", str(bad), str(failures)]
        print(f"{name:40} " + " ".join(f"{c:>10}" for c in cells))
    if not url:
        print("(Postgres with 2 workers: set PLAIT_TEST_POSTGRES_URL to include it)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
