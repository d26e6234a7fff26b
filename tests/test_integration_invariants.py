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

The model (:class:`Driver`, skills, tools) lives in ``tests/support/invariants_driver.py``, the
agent and the turn loop that checks the store (:func:`scenario`) in
``tests/support/invariants_rig.py``. Fixed cases of overflow recovery beside skills are in
``test_integration_overflow_skills.py``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from invariants_driver import Mode
from invariants_rig import (
    make_store,
    scenario,
)

from plait.stores import MemoryThreadStore


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


@pytest.mark.slow
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
