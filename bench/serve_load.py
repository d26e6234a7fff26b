"""``plait serve`` under load: 200 concurrent conversations x 5 turns against a fake model with a
fixed 100 ms latency, beside ``langgraph dev`` (``--langgraph VENV``) and a minimal Starlette
endpoint calling the same agent (the floor).

Configurations: ``plait serve`` on SQLite (1 worker), the floor on SQLite, with
``$PLAIT_TEST_POSTGRES_URL`` set ``plait serve`` on Postgres with 2 workers, and with
``--langgraph VENV`` ``langgraph dev`` from that virtual environment serving the same
behaviour as a LangGraph graph (``bench/serve_load_langgraph.py``: its in-memory runtime and
checkpointer, threads and ``runs/wait``). They run interleaved round by round (``--rounds``).

Three loads, a table each (``--think S`` and ``--start`` choose): back to back (think 0: each
conversation sends its next turn as soon as it has the answer, 200 conversations offer 2,000
requests/s, a capacity test) and with think time (mean 1.0 s: a person reading the answer
before writing again, drawn from an exponential distribution, seeded; offered load
conversations / (think + 0.1) requests/s, ~182 for 200, in the steady state; the header also
prints the schedule's own rate, all its turns over its longest conversation at zero added
latency, ~73 for 200), twice:

- ``--start steady``: the wait before a conversation's first turn is drawn like every other
  (exponential, mean think), so the 200 conversations are desynchronized from the start, as on
  a server that has been up a while: ~182-200 requests/s from the first second on;
- ``--start together``: every conversation starts within the first think time (a uniform delay
  in [0, think)), as after a restart that reconnected everyone at once: first turns and the
  quick readers' second turns overlap, ~320 requests/s in the 0.5-1 s window (1.75 times the
  steady rate), and that window's requests are the p99.

Every configuration gets the same
schedule of waits, and first answers 20 one-turn conversations, not measured (imports, caches,
the second worker's first requests). Latency is per request, from send to answer; think time
is not in it. A connection the server closed while idle (uvicorn's 5 s keep-alive, under the
floor and ``langgraph dev``; ``plait serve`` keeps them 30 s) is opened again before the next
turn, as any HTTP client does, inside that turn's latency.

Per configuration: requests/s, p50/p99 latency added over the model's 100 ms, the server's
resident memory per idle thread after the load (RSS after minus RSS before, over the threads
made; the process and its children), and lost or duplicated messages (each thread read back
must hold exactly its 5 user messages and 5 answers, in order, and every answer the client got
must be its turn's: the script exits 1 otherwise; a request that failed, e.g. a store deadline
under overload, is counted under ``failed`` and its turn is then missing from its thread). The
load client (``bench/serve_load_client.py``) is asyncio streams with h11, one keep-alive
connection a conversation, opened (and the thread made, where the API needs that) before the
clock starts; every server is a real process on 127.0.0.1.

    python bench/serve_load.py [--conversations 200] [--turns 5] [--rounds 2] [--think S]
        [--start steady|together|both] [--seed 0] [--langgraph /work/wt/lg-venv]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
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

from serve_load_client import (  # noqa: E402
    ChatApi,
    Connection,
    FloorChat,
    LangGraphRuns,
    PlaitChat,
    rss_kib,
)
from serve_load_langgraph import ASSISTANT, langgraph_process  # noqa: E402
from serve_process import ServeProcess, serve_process  # noqa: E402

from plait.trace.access import new_token  # noqa: E402
from plait.trace.server import free_port  # noqa: E402

LATENCY = 0.1
THINK = 1.0
"""The think time of the default run's second table, seconds (mean)."""
WARM = 20
"""Conversations of one turn each server answers before the measured loads."""

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


Row = dict[str, float]
"""A configuration's figures for one load (see :func:`load`)."""


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


STARTS = ("steady", "together")
"""How the conversations' first turns are spread (see the module docstring)."""


def schedule(
    conversations: int, turns: int, think: float, seed: int, start: str = "steady"
) -> list[list[float]]:
    """Seconds each conversation waits before each of its turns: an exponential draw of mean
    ``think`` before each (with ``start="together"`` a uniform delay in [0, ``think``) before
    the first); all 0 for ``think`` 0 (back to back)."""
    if not think:
        return [[0.0] * turns for _ in range(conversations)]
    rng = random.Random(seed)
    waits = [[rng.expovariate(1 / think) for _ in range(turns)] for _ in range(conversations)]
    if start == "together":
        for conversation in waits:
            conversation[0] = rng.uniform(0, think)
    return waits


async def load(
    server: ServeProcess, api: ChatApi, name: str, tag: str, waits: list[list[float]]
) -> Row:
    """One load on configuration ``name``: conversation ``n`` waits ``waits[n][t]`` then sends
    turn ``t`` on thread ``{tag}-{n}`` (or the server's id); the row."""
    conversations, turns = len(waits), len(waits[0])
    latencies: list[float] = []
    errors: list[str] = []
    wrong: list[str] = []
    async with httpx.AsyncClient(base_url=server.url, headers=api.headers, timeout=120) as c:
        threads = await api.threads(c, tag, conversations)
    # Every conversation's connection is open before the clock starts (a frontend's keep-alive
    # connection); each then sends its turns one after another.
    connections = [await Connection.open(server.url) for _ in range(conversations)]

    async def conversation(n: int) -> None:
        for turn, wait in enumerate(waits[n]):
            if wait:
                await asyncio.sleep(wait)
            text = f"c{n} t{turn}"
            started = time.perf_counter()
            try:
                content = await api.send(connections[n], threads[n], text)
            except (OSError, h11.ProtocolError, KeyError, TypeError, ValueError) as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - started)
            if content != f"echo: {text}":  # an answer lost on its way to the client
                wrong.append(f"wrong answer {content!r}")

    before = rss_kib(server.process.pid)
    began = time.perf_counter()
    await asyncio.gather(*(conversation(n) for n in range(conversations)))
    elapsed = time.perf_counter() - began
    after = rss_kib(server.process.pid)
    for connection in connections:
        connection.close()
    bad = len(wrong)
    async with httpx.AsyncClient(base_url=server.url, headers=api.headers, timeout=120) as c:
        for n, thread in enumerate(threads):
            want = [x for t in range(turns) for x in (f"c{n} t{t}", f"echo: c{n} t{t}")]
            bad += await api.messages(c, thread) != want
    if errors:
        print(f"{name}, {tag}: {len(errors)} failed, the first: {errors[0][:300]}", file=sys.stderr)
    if wrong:
        print(
            f"{name}, {tag}: {len(wrong)} answers lost, the first: {wrong[0][:300]}",
            file=sys.stderr,
        )
    added = sorted((x - LATENCY) * 1000 for x in latencies) or [float("nan")]
    return {
        "rps": len(latencies) / elapsed,
        "p50": statistics.median(added),
        "p99": added[min(len(added) - 1, int(len(added) * 0.99))],
        "kib_per_thread": max(0, after - before) / conversations,
        "bad": bad,
        "errors": len(errors),
    }


def peak_rate(waits: list[list[float]], window: float = 0.5) -> float:
    """The most requests/s the schedule sends in any ``window`` seconds (at zero added
    latency): where its tail comes from."""
    sent = []
    for conversation in waits:
        at = 0.0
        for wait in conversation:
            at += wait
            sent.append(at)
            at += LATENCY
    sent.sort()
    most, first = 0, 0
    for last, t in enumerate(sent):
        while t - sent[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most / window


def print_table(
    args: argparse.Namespace,
    think: float,
    start: str,
    waits: list[list[float]],
    results: dict[str, list[Row]],
) -> bool:
    """Print one load's table; whether any thread lost or duplicated a message."""
    offered = args.conversations / (think + LATENCY)
    span = max(sum(w) for w in waits) + args.turns * LATENCY
    spread = (
        ""
        if not think
        else f" ({len(waits) * args.turns / span:,.0f} over the whole schedule, peak "
        f"{peak_rate(waits):,.0f} in 0.5 s)"
    )
    how = (
        f"think {think:g} s mean, starts {start}"
        if think
        else "back to back (think 0, capacity test)"
    )
    print(
        f"\n{args.conversations} conversations x {args.turns} turns, {how}, offered "
        f"{offered:,.0f} req/s{spread}; fake model {LATENCY * 1000:.0f} ms, {args.rounds} rounds "
        f"(medians), load {os.getloadavg()[0]:.1f}"
    )
    heads = ("req/s", "p50 +ms", "p99 +ms", "KiB/thread", "lost/dup", "failed")
    print(f"{'configuration':40} " + " ".join(f"{h:>10}" for h in heads))
    lost = False
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        bad = sum(int(r["bad"]) for r in runs)
        lost |= bad > 0
        failures = sum(int(r["errors"]) for r in runs)
        cells = [f"{med['rps']:.0f}", f"{med['p50']:.1f}", f"{med['p99']:.1f}"]
        cells += [f"{med['kib_per_thread']:.1f}", str(bad), str(failures)]
        print(f"{name:40} " + " ".join(f"{c:>10}" for c in cells))
    return lost


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
    parser.add_argument(
        "--think", type=float, default=None, help=f"mean think time, s (default: 0 and {THINK})"
    )
    parser.add_argument(
        "--start",
        choices=[*STARTS, "both"],
        default="both",
        help="how the first turns are spread with think time (default: both, a table each)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the think times' random seed")
    parser.add_argument(
        "--langgraph", type=Path, default=None, metavar="VENV", help="add langgraph dev"
    )
    args = parser.parse_args()
    env = {"PLAIT_FAKE_LATENCY": str(LATENCY)}
    lost = False
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        plait = stack.enter_context(serve_process(folder / "sqlite", token=new_token(), env=env))
        floor = stack.enter_context(floor_process(folder / "floor"))
        servers: dict[str, tuple[ServeProcess, ChatApi]] = {
            "plait serve, SQLite, 1 worker": (plait, PlaitChat(plait.headers())),
            "floor (Starlette + agent.run), SQLite": (floor, FloorChat({})),
        }
        url = os.environ.get("PLAIT_TEST_POSTGRES_URL")
        if url:
            schema = f"bench_{os.getpid()}"
            asyncio.run(_setup(url, schema))
            pg_env = {**env, "PLAIT_TEST_SERVE_STORE": url, "PLAIT_TEST_SERVE_SCHEMA": schema}
            pg = stack.enter_context(
                serve_process(folder / "pg", token=new_token(), workers=2, env=pg_env)
            )
            servers["plait serve, Postgres, 2 workers"] = (pg, PlaitChat(pg.headers()))
        if args.langgraph:
            jobs = args.conversations
            lg = stack.enter_context(langgraph_process(args.langgraph, folder / "lg", jobs))
            servers[f"langgraph dev, in memory, {jobs} jobs"] = (lg, LangGraphRuns(ASSISTANT))
        for name, (server, api) in servers.items():
            # Not measured: a first turn on each connection of a worker pays its imports and
            # caches (the second Postgres worker's first requests took ~1 s).
            asyncio.run(load(server, api, name, "warm", schedule(WARM, 1, 0, 0)))
        thinks = [args.think] if args.think is not None else [0.0, THINK]
        starts = STARTS if args.start == "both" else (args.start,)
        loads = [(t, start) for t in thinks for start in (starts if t else ("steady",))]
        for k, (think, start) in enumerate(loads):
            waits = schedule(args.conversations, args.turns, think, args.seed, start)
            results: dict[str, list[Row]] = {}
            for round_ in range(args.rounds):
                for c, (name, (server, api)) in enumerate(servers.items()):
                    tag = f"k{k}-r{round_}-c{c}"
                    row = asyncio.run(load(server, api, name, tag, waits))
                    results.setdefault(name, []).append(row)
            lost |= print_table(args, think, start, waits, results)
    if not url:
        print("(Postgres with 2 workers: set PLAIT_TEST_POSTGRES_URL to include it)")
    if not args.langgraph:
        print("(langgraph dev: --langgraph VENV, see bench/serve_load_langgraph.py)")
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
