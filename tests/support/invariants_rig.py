"""The rig of the integration property test: an agent with every battery wired together around
a :class:`~invariants_driver.Driver`, and :func:`scenario`, which runs several turns on it and
checks invariants 3-5 (no managed body stored, typed errors with a valid thread after them, one
result per call) on the thread store after every turn.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from invariants_driver import (
    AGENT_TOOLS,
    CURRENT_DRIVER,
    MARKER,
    SKILLS,
    WINDOW_TOKENS,
    Driver,
    Mode,
    pairing_problems,
    ticket,
)

from plait import (
    Agent,
    AssistantMessage,
    FunctionModel,
    Limits,
    PlaitError,
)
from plait.backends import MemoryBackend
from plait.context import (
    OverflowRecoveryMiddleware,
    ResultEvictionMiddleware,
    SummarizationMiddleware,
)
from plait.guards import LimitsMiddleware, RepetitionDetector, ToolCallValidator
from plait.messages import dump_messages
from plait.middleware import Middleware
from plait.skills import MemorySource, SkillsMiddleware
from plait.skills.disclosure import PinnedSkillNotFound
from plait.skills.managed import SkillManager, allow_all, create_skill_manager
from plait.stores import MemoryThreadStore, SQLiteThreadStore, ThreadStore


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
