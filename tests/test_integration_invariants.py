"""Integration property test: every battery wired together, driven by a randomised model.

A seeded :class:`~plait.FunctionModel` looks at each request (advertised tools, messages) and
picks random actions: valid and invalid tool calls, unknown tools, SKILL.md reads (disclosure)
or ``load_skill`` / ``unload_skill`` / ``read_skill_body`` (managed), skill tools, huge results,
repetition, provider errors and plain answers. The agent has the batteries in the order
``src/plait/middleware/README.md`` documents (limits, overflow recovery, summarization,
eviction, skills) and runs several turns per thread. The invariants of DESIGN.md are checked on
*every* request the model receives and on the thread store after every turn:

1. no request (and no stored thread) holds a tool result without its call or a call without
   its result;
2. a skill tool is advertised only while a read or pin of its skill is in that request
   (disclosure), or while its skill is loaded (managed);
3. the thread store (messages and state) and everything written to the backend never contain
   a managed skill body;
4. every exception out of ``agent.run`` is a ``PlaitError``; the stored thread is still valid
   and the next run on it works;
5. every tool call the model sent gets exactly one result message.

Also exercised: streaming runs, reused call ids (``call_0`` in every response), a tool that
cancels its own turn (as a caller giving up would), results JSON cannot hold, concurrent turns
(two threads, or one thread twice: ``ThreadConflictError``), skill sources changing between
turns (refresh / auto_refresh), a skill list over its budget (``search_skills``), and a
summarization threshold above the real window (overflow recovery does the folding).

Two fixed cases at the end pin down overflow recovery beside skills: a managed skill's body is
never persisted, and a folded SKILL.md read withdraws its tools on the retry.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import random
import tempfile
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait import (
    Agent,
    AssistantMessage,
    FunctionModel,
    Limits,
    Message,
    ModelRequest,
    ModelResponse,
    PlaitError,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.backends import MemoryBackend
from plait.context import (
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
    find_orphans,
)
from plait.errors import ContextOverflowError, ProviderError
from plait.guards import LimitsMiddleware, RepetitionDetector, ToolCallValidator
from plait.messages import dump_messages
from plait.middleware import Middleware
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.disclosure import PinnedSkillNotFound
from plait.skills.managed import SkillManager, allow_all, create_skill_manager
from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadStore

Mode = Literal["disclosure", "managed"]

MARKER = "BODY-MARKER-q7Zx"
"""In every skill body: a managed body must never reach the store or the backend."""

SKILL_TOOL = "ticket"
TICKETS = "/skills/tickets/SKILL.md"
NOTES = "/skills/notes/SKILL.md"
_BODY_LINES = "\n".join(f"{MARKER} step {i}: follow the procedure carefully." for i in range(60))


def _skill_md(name: str, description: str, extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n# {name}\n{_BODY_LINES}\n"


SKILLS: dict[str, dict[str, str]] = {
    "tickets": {
        "SKILL.md": _skill_md(
            "tickets",
            "File bug tickets. Use when the user reports a bug.",
            f"metadata:\n  include_tools: {SKILL_TOOL}\n",
        ),
        "reference.md": "Ticket fields: title, severity.\n",
    },
    "notes": {"SKILL.md": _skill_md("notes", "Take notes. Use when asked to remember.")},
    # Its body alone is most of the window: reading it twice (or with other big results)
    # makes overflow recovery evict it.
    "manual": {
        "SKILL.md": _skill_md("manual", "The whole operations manual. Use for operations.")
        + "\n".join(f"{MARKER} manual section {i}: " + "m" * 120 for i in range(300))
    },
}
SKILL_NAMES = ("tickets", "tickets", "notes", "manual", "ghost")

WINDOW_CHARS = 60_000
"""The simulated provider's context window, in characters of the request."""
WINDOW_TOKENS = WINDOW_CHARS // 4


@tool
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@tool
def big() -> str:
    """Return a large result (evicted by ResultEvictionMiddleware)."""
    return "\n".join(f"row {i}: " + "x" * 60 for i in range(400))


@tool
def dump() -> str:
    """Return a huge result that eviction leaves alone (overflows the window)."""
    return "\n".join(f"line {i}: " + "y" * 90 for i in range(800))


@tool
def boom() -> str:
    """Always raises."""
    raise RuntimeError("kaboom")


@tool(name=SKILL_TOOL)
def ticket(title: str) -> str:
    """File a ticket (a skill tool of 'tickets')."""
    return f"ticket filed: {title}"


@tool
def weird() -> Any:
    """Return data JSON cannot hold as it is."""
    return {"nan": float("nan"), "set": {1, 2}, "obj": object(), "bytes": b"\xff", "s": "\ud800"}


@tool
async def hang() -> str:
    """Cancel the running turn, as a caller giving up would, and wait for the cancellation."""
    driver = CURRENT_DRIVER.get()
    if driver is None or driver.turn_task is None:
        return "no turn to cancel"
    driver.turn_task.cancel()
    await asyncio.sleep(60)
    return "not reached"


AGENT_TOOLS = (echo, big, dump, boom, weird, hang)

ACTIONS: dict[str, float] = {
    "valid": 3,
    "invalid": 1,
    "raw": 1,
    "unknown": 1,
    "skill_tool": 1,
    "skill": 4,
    "big": 1,
    "dump": 1,
    "boom": 1,
    "evicted": 1,
    "weird": 1,
    "hang": 0.3,
}
"""What one tool call of the random model does, with its weight."""


def request_chars(request: ModelRequest) -> int:
    """What the fake provider measures against its window."""
    size = len(request.system_prompt) + len(json.dumps([t.name for t in request.tools]))
    for m in request.messages:
        size += len(m.text)
        if isinstance(m, AssistantMessage):
            size += sum(len(json.dumps(c.args)) for c in m.tool_calls)
    return size


def _norm(path: str) -> str:
    return posixpath.normpath("/" + path.strip().replace("\\", "/").lstrip("/"))


def disclosed_in(messages: Sequence[Message], location: str) -> bool:
    """Whether ``messages`` hold a successful read of ``location`` or a pin of its skill."""
    pending: dict[str, bool] = {}  # open call id -> whether it reads ``location``
    for m in messages:
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                path = call.args.get("path") if isinstance(call.args, dict) else None
                reads = isinstance(path, str) and _norm(path) == location
                pending[call.id] = call.name == "read_file" and reads
        elif isinstance(m, ToolMessage):
            if pending.pop(m.tool_call_id, False) and not m.is_error and m.name == "read_file":
                return True
        elif isinstance(m, UserMessage) and m.metadata.get("source") == "pinned_skill":
            skill = m.metadata.get("skill")
            if isinstance(skill, dict) and _norm(str(skill.get("path", ""))) == location:
                return True
    return False


def pairing_problems(messages: Sequence[Message]) -> list[str]:
    """Invariants 1 and 5 on a message list: no orphans, exactly one result per call."""
    problems: list[str] = []
    orphans = find_orphans(messages)
    if orphans:
        problems.append(f"orphans: {orphans}")
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    for call_id in set(calls):
        if results.count(call_id) != calls.count(call_id):
            problems.append(f"call {call_id}: {results.count(call_id)} results")
    return problems


@dataclass
class Driver:
    """The model: a seeded function of the request. Checks invariants 1 and 2 on every request."""

    rng: random.Random
    mode: Mode
    manager: SkillManager | None = None
    recovering: bool = False
    provider_errors: bool = True
    violations: list[str] = field(default_factory=list)
    responses: list[list[str]] = field(default_factory=list)
    _last_calls: list[ToolCall] = field(default_factory=list)
    turn_task: asyncio.Future[Any] | None = None
    """The running ``agent.run``, for the ``hang`` tool to cancel."""
    channel: Literal["handle", "inline"] = "handle"
    allow_hang: bool = True
    reuse_ids: bool = False
    """Number calls ``call_0``, ``call_1``… in every response, as some providers do."""
    _ids: int = 0
    _stuck: int = 0
    _in_response: int = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.check(request)
        if request_chars(request) > WINDOW_CHARS:
            raise ContextOverflowError(
                f"request of {request_chars(request)} chars > {WINDOW_CHARS}", provider="fake"
            )
        if self.provider_errors and self.rng.random() < 0.03:
            raise ProviderError("fake provider: 503", provider="fake", status=503)
        response = self.respond(request)
        self.responses.append([c.id for c in response.tool_calls])
        if response.tool_calls:
            self._last_calls = list(response.tool_calls)
        return response

    # --- invariants on the request ------------------------------------------------------------

    def check(self, request: ModelRequest) -> None:
        where = f"request {len(self.responses)}"
        for problem in pairing_problems(request.messages):
            self.violations.append(f"{where}: {problem}")
        names = [t.name for t in request.tools]
        if len(names) != len(set(names)):
            self.violations.append(f"{where}: duplicate tool definitions {names}")
        advertised = SKILL_TOOL in names
        if self.mode == "disclosure":
            shown = disclosed_in(request.messages, TICKETS)
            if advertised != shown:
                self.violations.append(
                    f"{where}: {SKILL_TOOL} advertised={advertised}, read={shown}"
                )
        else:
            assert self.manager is not None
            loaded = "tickets" in self.manager.loaded()
            if advertised != loaded:
                self.violations.append(
                    f"{where}: {SKILL_TOOL} advertised={advertised}, loaded={loaded}"
                )
            if MARKER in request.system_prompt:
                self.violations.append(f"{where}: body in the system prompt")

    # --- actions ------------------------------------------------------------------------------

    def _id(self) -> str:
        self._ids += 1
        self._in_response += 1
        return f"call_{self._in_response - 1}" if self.reuse_ids else f"c{self._ids}"

    def respond(self, request: ModelRequest) -> ModelResponse:
        rng = self.rng
        self._in_response = 0
        if self.recovering:
            return ModelResponse(content="Recovered.")
        if self._stuck > 0 and self._last_calls:  # a model in a loop: call repetition
            self._stuck -= 1
            return ModelResponse(
                tool_calls=[
                    ToolCall(self._id(), c.name, c.args, c.raw_args) for c in self._last_calls
                ]
            )
        roll = rng.random()
        if roll < 0.05:
            self._stuck = rng.randint(2, 4)
        if roll < 0.2:
            return ModelResponse(content=f"Answer {rng.randrange(10**6)}.")
        if roll < 0.27:  # the same long answer every time: text repetition across turns
            return ModelResponse(content="I keep giving exactly this same long answer again.")
        if roll < 0.37 and self._last_calls:  # the same calls again: call repetition
            return ModelResponse(
                tool_calls=[
                    ToolCall(self._id(), c.name, c.args, c.raw_args) for c in self._last_calls
                ]
            )
        calls = [self.action(request) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
        return ModelResponse(tool_calls=calls)

    def action(self, request: ModelRequest) -> ToolCall:
        rng = self.rng
        advertised = [t.name for t in request.tools]
        kind = rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
        if kind == "valid" and advertised:
            name = rng.choice(advertised)
            return ToolCall(self._id(), name, self.valid_args(name, request))
        if kind == "invalid" and advertised:
            return ToolCall(self._id(), rng.choice(advertised), {"bogus": [1, 2]})
        if kind == "raw":
            raw = rng.choice(["{not json", "{'text': 'hi',}", "[1, 2]", '{"text": 3'])
            return ToolCall(self._id(), "echo", {}, raw_args=raw)
        if kind == "unknown":
            return ToolCall(self._id(), "no_such_tool", {"x": 1})
        if kind == "skill_tool":
            return ToolCall(self._id(), SKILL_TOOL, {"title": "crash on save"})
        if kind == "skill":
            return self.skill_action()
        if kind == "hang" and not self.allow_hang:
            kind = "boom"
        if kind in ("big", "dump", "boom", "weird", "hang"):
            return ToolCall(self._id(), kind, {})
        if kind == "evicted":
            return ToolCall(
                self._id(), "read_evicted_result", self.valid_args("read_evicted_result", request)
            )
        return ToolCall(self._id(), "echo", {"text": "hello"})

    def skill_action(self) -> ToolCall:
        rng = self.rng
        if self.mode == "disclosure":
            path = rng.choice(
                [
                    TICKETS,
                    TICKETS,
                    NOTES,
                    "/skills/manual/SKILL.md",
                    "skills/tickets/SKILL.md",
                    "/skills/tickets/reference.md",
                    "/skills/../etc/passwd",
                    "/nowhere/SKILL.md",
                    "/skills/tickets",
                ]
            )
            return ToolCall(self._id(), "read_file", {"path": path})
        name = rng.choice(["load_skill", "load_skill", "unload_skill", "read_skill_body",
                           "read_skill_body", "list_loaded_skills", "refresh_skills"])  # fmt: skip
        skill = rng.choice(SKILL_NAMES)
        if skill == "manual" and self.channel == "inline":
            # By design, not tested: an inline body is in every request while its skill is
            # loaded, and overflow recovery cannot unload it. "manual" is most of the window,
            # so with it loaded a thread can overflow beyond recovery until the application
            # unloads the skill (the model never gets a request through to do it).
            skill = "notes"
        if name == "read_skill_body":
            return ToolCall(self._id(), name, {"handle": skill})
        if name in ("list_loaded_skills", "refresh_skills"):
            return ToolCall(self._id(), name, {})
        return ToolCall(self._id(), name, {"skill": skill})

    def valid_args(self, name: str, request: ModelRequest) -> dict[str, Any]:
        if name == "echo":
            return {"text": "hello"}
        if name == SKILL_TOOL:
            return {"title": "crash on save"}
        if name == "read_file":
            return {"path": self.rng.choice([TICKETS, NOTES])}
        if name in ("load_skill", "unload_skill"):
            return {"skill": self.rng.choice(["tickets", "notes"])}
        if name == "read_skill_body":
            return {"handle": self.rng.choice(["tickets", "notes"])}
        if name == "search_skills":
            return {"query": "tickets"}
        if name == "read_evicted_result":
            paths = [
                m.data["full_result_path"]
                for m in request.messages
                if isinstance(m, ToolMessage)
                and isinstance(m.data, dict)
                and isinstance(m.data.get("full_result_path"), str)
            ]
            return {"path": self.rng.choice(paths) if paths else "large_tool_results/x/y"}
        return {}


CURRENT_DRIVER: ContextVar[Driver | None] = ContextVar("CURRENT_DRIVER", default=None)
"""The driver of the scenario running in this context (for the ``hang`` tool)."""


@dataclass
class Rig:
    agent: Agent
    driver: Driver
    store: ThreadStore
    backend: MemoryBackend
    summary: SummarizationMiddleware
    manager: SkillManager | None
    source: MemorySource


async def build(
    mode: Mode,
    seed: int,
    store: ThreadStore,
    *,
    policy: Literal["note", "error"] = "note",
    agent_call_limit: int = 6,
    model_calls_per_turn: int | None = None,
    tool_calls_total: int | None = None,
    channel: Literal["handle", "inline"] = "handle",
    auto_refresh: bool = False,
    budget: int | None = 8000,
    summary_tokens: int = 3000,
) -> Rig:
    """An agent with every battery, in the order ``src/plait/middleware/README.md`` gives."""
    backend = MemoryBackend()
    source = MemorySource(SKILLS)
    summary = SummarizationMiddleware(summary_tokens, keep_messages=4, backend=backend)
    excluded = ["read_file", "read_skill_body", "dump"]
    eviction = ResultEvictionMiddleware(1000, backend=backend, excluded_tools=excluded)
    middleware: list[Middleware] = [
        LimitsMiddleware(
            model_calls_per_turn=model_calls_per_turn, tool_calls_total=tool_calls_total
        ),
        OverflowRecoveryMiddleware(
            summarization=summary, eviction=eviction, max_input_tokens=WINDOW_TOKENS
        ),
        summary,
        eviction,
    ]
    manager: SkillManager | None = None
    if mode == "disclosure":
        middleware.append(
            SkillsMiddleware([source], tools=[ticket], auto_refresh=auto_refresh, budget=budget)
        )
    else:
        manager = await create_skill_manager(
            sources=[source],
            gate=allow_all,
            skill_tools={"tickets": [ticket]},
            default_channel=channel,
            auto_refresh=auto_refresh,
        )
        middleware.extend(manager.middleware)
    driver = Driver(random.Random(seed), mode, manager, channel=channel)
    agent = Agent(
        FunctionModel(driver),
        tools=AGENT_TOOLS,
        middleware=middleware,
        system_prompt="You are a test agent.",
        store=store,
        limits=Limits(model_calls_per_turn=agent_call_limit),
        default_guards=False,
        model_hooks=[ToolCallValidator(), RepetitionDetector(policy=policy)],
    )
    return Rig(agent, driver, store, backend, summary, manager, source)


async def check_store(rig: Rig, thread: str, where: str) -> list[str]:
    """Invariants 1, 3 and 5 on what the store and the backend hold."""
    problems: list[str] = []
    snapshot = await rig.store.load(thread)
    problems += [f"{where}: store {p}" for p in pairing_problems(snapshot.messages)]
    if rig.manager is not None:
        await rig.summary.drain()
        if MARKER in dump_messages(snapshot.messages):
            problems.append(f"{where}: a skill body is in the stored messages")
        if MARKER in json.dumps(snapshot.state):
            problems.append(f"{where}: a skill body is in the stored state")
        for path in await rig.backend.ls():
            if MARKER in await rig.backend.read(path):
                problems.append(f"{where}: a skill body was written to the backend at {path}")
    return problems


async def run_turn(
    rig: Rig, thread: str, text: str, state: dict[str, Any] | None, *, stream: bool = False
) -> BaseException | None:
    """One ``agent.run`` (or ``agent.stream``); returns the error it raised (asserting it is a
    ``PlaitError``)."""
    first = len(rig.driver.responses)
    before = len((await rig.store.load(thread)).messages) + 1  # + the user input

    async def run() -> None:
        if stream:
            async for _ in rig.agent.stream(text, thread_id=thread, state=state):
                pass
        else:
            await rig.agent.run(text, thread_id=thread, state=state)

    CURRENT_DRIVER.set(rig.driver)
    task = rig.driver.turn_task = asyncio.ensure_future(run())
    error: BaseException | None
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        # The caller cancelled the turn (the ``hang`` tool): not an error of the loop, but
        # what was persisted must still be valid, and the next run must work.
        error = asyncio.CancelledError()
    except PlaitError as exc:
        error = exc
    except Exception as exc:  # invariant 4: never untyped
        raise AssertionError(f"untyped {type(exc).__name__} escaped agent.run: {exc}") from exc
    else:
        error = None
    finally:
        rig.driver.turn_task = None
    # Invariant 5 against what the model sent: every response of this run is stored, in order,
    # with its calls (each with one result: ``check_store``), except that the last response of
    # a failed run may be missing (a failed dispatch is stored whole or not at all).
    stored = (await rig.store.load(thread)).messages[before:]
    kept = [[c.id for c in m.tool_calls] for m in stored if isinstance(m, AssistantMessage)]
    sent = rig.driver.responses[first:]
    if kept != sent and not (error is not None and kept == sent[:-1]):
        rig.driver.violations.append(f"{text}: sent {sent}, stored {kept}")
    return error


async def recover(
    rig: Rig, thread: str, error: BaseException, where: str, stream: bool
) -> list[str]:
    """Invariant 4: after a typed error (or a cancelled turn) the next run on the thread
    works, and the thread is still valid."""
    rig.driver.recovering = True
    rig.driver.provider_errors = False
    # An unknown pin stays in the state until dropped, as its error message says.
    fix: dict[str, list[str]] | None = (
        {"pinned_skills": []} if isinstance(error, PinnedSkillNotFound) else None
    )
    problems: list[str] = []
    again = await run_turn(rig, thread, f"after {type(error).__name__}", fix, stream=stream)
    if again is not None:
        problems.append(
            f"{where}: the run after {type(error).__name__}: {error} failed with "
            f"{type(again).__name__}: {again}"
        )
    problems += await check_store(rig, thread, f"after {where}")
    rig.driver.recovering = False
    rig.driver.provider_errors = True
    return problems


async def scenario(
    mode: Mode,
    seed: int,
    store: ThreadStore,
    *,
    turns: int,
    policy: Literal["note", "error"],
    agent_call_limit: int,
    model_calls_per_turn: int | None,
    tool_calls_total: int | None,
    channel: Literal["handle", "inline"],
) -> list[str]:
    rng = random.Random(seed ^ 0x5EED)
    rig = await build(
        mode,
        seed,
        store,
        policy=policy,
        agent_call_limit=agent_call_limit,
        model_calls_per_turn=model_calls_per_turn,
        tool_calls_total=tool_calls_total,
        channel=channel,
        auto_refresh=rng.random() < 0.3,
        budget=rng.choice([8000, None, 120]),  # 120: the list overflows, search_skills shows
        # 20,000: above the real window (as when estimates run low), so overflow recovery's
        # forced summary does the folding.
        summary_tokens=rng.choice([3000, 20_000]),
    )
    rig.driver.reuse_ids = rng.random() < 0.25
    # Disclosure keeps per-thread state: interleave two threads. A skill manager serves one
    # conversation (by design), so managed mode has one thread.
    threads = [f"t-{mode}-{seed}-{n}" for n in range(2 if mode == "disclosure" else 1)]
    problems: list[str] = []
    try:
        for turn in range(turns):
            thread = rng.choice(threads)
            stream = rng.random() < 0.3
            state: dict[str, Any] | None = None
            roll = rng.random()
            if mode == "disclosure":
                if roll < 0.15:
                    state = {"pinned_skills": [rng.choice(["tickets", "notes"])]}
                elif roll < 0.2:
                    state = {"pinned_skills": ["ghost"]}
                elif roll < 0.25:
                    state = {"skills_metadata": None}
            if roll > 0.85:  # a new version of a skill: refresh_skills / reset swaps it in
                files = dict(SKILLS["tickets"])
                files["SKILL.md"] += f"\nRevision {turn}: {MARKER}.\n"
                rig.source.put("tickets", files)
            if mode == "disclosure" and rng.random() < 0.15:
                # Two turns at once, on both threads or twice on one (one of those then
                # fails with ThreadConflictError): no cancelling tool, no per-run bookkeeping.
                pair = [thread, rng.choice(threads)]
                rig.driver.allow_hang = False
                outcomes = await asyncio.gather(
                    *(rig.agent.run(f"turn {turn}", thread_id=t) for t in pair),
                    return_exceptions=True,
                )
                rig.driver.allow_hang = True
                for t, outcome in zip(pair, outcomes, strict=True):
                    if isinstance(outcome, BaseException) and not isinstance(outcome, PlaitError):
                        raise AssertionError(f"untyped {outcome!r} escaped agent.run") from outcome
                    problems += await check_store(rig, t, f"turn {turn} (concurrent)")
                    if isinstance(outcome, PlaitError):
                        problems += await recover(rig, t, outcome, f"turn {turn}", stream)
                continue
            error = await run_turn(rig, thread, f"turn {turn}", state, stream=stream)
            problems += await check_store(rig, thread, f"turn {turn}")
            if error is not None:
                problems += await recover(rig, thread, error, f"turn {turn}", stream)
    finally:
        await rig.summary.drain()
        if rig.manager is not None:
            await rig.manager.aclose()
    return problems + rig.driver.violations


_TMP = tempfile.TemporaryDirectory(prefix="plait-invariants-")


def make_store(kind: str, name: str) -> ThreadStore:
    if kind == "sqlite":
        return SQLiteThreadStore(Path(_TMP.name) / f"{name}.db")
    return MemoryThreadStore()


@settings(max_examples=40, deadline=None)
@given(
    mode=st.sampled_from(["disclosure", "managed"]),
    seed=st.integers(0, 2**32 - 1),
    store_kind=st.sampled_from(["memory", "sqlite"]),
    turns=st.integers(2, 5),
    policy=st.sampled_from(["note", "error"]),
    agent_call_limit=st.integers(2, 8),
    model_calls_per_turn=st.one_of(st.none(), st.integers(2, 8)),
    tool_calls_total=st.one_of(st.none(), st.integers(2, 12)),
    channel=st.sampled_from(["handle", "inline"]),
)
def test_invariants_hold_for_random_agents(
    mode: Mode,
    seed: int,
    store_kind: str,
    turns: int,
    policy: Literal["note", "error"],
    agent_call_limit: int,
    model_calls_per_turn: int | None,
    tool_calls_total: int | None,
    channel: Literal["handle", "inline"],
) -> None:
    store = make_store(store_kind, f"{mode}-{seed}-{turns}")
    problems = asyncio.run(
        scenario(
            mode,
            seed,
            store,
            turns=turns,
            policy=policy,
            agent_call_limit=agent_call_limit,
            model_calls_per_turn=model_calls_per_turn,
            tool_calls_total=tool_calls_total,
            channel=channel,
        )
    )
    assert problems == []


SEEDS = 300


@pytest.mark.parametrize("mode", ["disclosure", "managed"])
async def test_invariants_hold_for_seeded_agents(mode: Mode) -> None:
    """The same property over fixed seeds (deterministic in CI): each seed also draws the
    limits, the repetition policy and the body channel."""
    failures: dict[int, list[str]] = {}
    for seed in range(SEEDS):
        draw = random.Random(seed)
        problems = await scenario(
            mode,
            seed,
            MemoryThreadStore(),
            turns=draw.randint(2, 6),
            policy=draw.choice(["note", "error"]),
            agent_call_limit=draw.randint(2, 8),
            model_calls_per_turn=draw.choice([None, draw.randint(2, 8)]),
            tool_calls_total=draw.choice([None, draw.randint(2, 12)]),
            channel=draw.choice(["handle", "inline"]),
        )
        if problems:
            failures[seed] = problems[:3]
    assert failures == {}


# --- fixed cases: overflow recovery beside skills ----------------------------------------------


def _scripted_with_window(script: list[ModelResponse | str]) -> FunctionModel:
    """Answers from ``script`` in order, but first overflows like a provider whose window is
    ``WINDOW_CHARS`` (the overflowing request does not consume an entry)."""
    entries = list(script)

    def answer(request: ModelRequest) -> ModelResponse | str:
        if request_chars(request) > WINDOW_CHARS:
            raise ContextOverflowError("too long", provider="fake")
        return entries.pop(0)

    return FunctionModel(answer)


async def test_overflow_recovery_never_persists_a_managed_skill_body() -> None:
    """Overflow recovery evicts the largest tool results but leaves projected ones (those a
    persist filter rewrites, like a ``read_skill_body`` result) alone: evicting one would write
    the body to the backend and its preview into the thread state, and so into the store. The
    other big results are enough to fit."""
    manager = await create_skill_manager(sources=[MemorySource(SKILLS)], gate=allow_all)
    backend = MemoryBackend()
    summary = SummarizationMiddleware(3000, keep_messages=4, backend=backend)
    eviction = ResultEvictionMiddleware(
        1000, backend=backend, excluded_tools=["read_skill_body", "dump"]
    )
    model = _scripted_with_window(
        [
            ModelResponse(tool_calls=[ToolCall("c1", "load_skill", {"skill": "manual"})]),
            ModelResponse(tool_calls=[ToolCall("c2", "read_skill_body", {"handle": "manual"})]),
            ModelResponse(tool_calls=[ToolCall("c3", "dump", {})]),
            "done",
        ]
    )
    agent = Agent(
        model,
        tools=AGENT_TOOLS,
        middleware=[
            OverflowRecoveryMiddleware(
                summarization=summary, eviction=eviction, max_input_tokens=WINDOW_TOKENS
            ),
            summary,
            eviction,
            *manager.middleware,
        ],
    )
    result = await agent.run("use the manual", thread_id="t")
    await summary.drain()
    await manager.aclose()
    assert result.output == "done"
    assert any(e.type == "context_overflow_recovered" for e in result.events)
    stored = await agent.store.load("t")
    assert MARKER not in dump_messages(stored.messages)
    assert MARKER not in json.dumps(stored.state)
    for path in await backend.ls():
        assert MARKER not in await backend.read(path), path


async def test_overflow_retry_withdraws_skill_tools_of_a_folded_read() -> None:
    """Overflow recovery compacts the request *inside* ``wrap_model_call``, after
    ``SkillsMiddleware`` chose the tools in ``before_model_call``. When the forced summary folds
    the SKILL.md read, the retry no longer advertises (or registers) the skill's tool: a tool is
    sent only while a read or pin of its skill is in the request."""
    summary = SummarizationMiddleware(10**6, keep_messages=2)
    seen: list[ModelRequest] = []
    script: list[ModelResponse] = [
        ModelResponse(tool_calls=[ToolCall("c1", "read_file", {"path": TICKETS})]),
        ModelResponse(tool_calls=[ToolCall("c2", "echo", {"text": "a"})]),
        ModelResponse(tool_calls=[ToolCall("c3", "dump", {})]),
        ModelResponse(tool_calls=[ToolCall("c4", SKILL_TOOL, {"title": "x"})]),
        ModelResponse(content="done"),
    ]

    def answer(request: ModelRequest) -> ModelResponse:
        if request_chars(request) > WINDOW_CHARS:
            raise ContextOverflowError("too long", provider="fake")
        seen.append(request)
        return script.pop(0)

    agent = Agent(
        FunctionModel(answer),
        tools=AGENT_TOOLS,
        middleware=[
            OverflowRecoveryMiddleware(summarization=summary, max_input_tokens=WINDOW_TOKENS),
            summary,
            SkillsMiddleware([MemorySource(SKILLS)], tools=[ticket]),
        ],
    )
    result = await agent.run("file a ticket", thread_id="t")
    assert any(e.type == "context_overflow_recovered" for e in result.events)
    for request in seen:
        advertised = SKILL_TOOL in {t.name for t in request.tools}
        assert advertised == disclosed_in(request.messages, TICKETS)
    # The withdrawn tool is unregistered too: the call fails as an unknown tool.
    (reply,) = [
        m for m in result.new_messages if isinstance(m, ToolMessage) and m.name == SKILL_TOOL
    ]
    assert reply.is_error and "Unknown tool" in str(reply.data)
