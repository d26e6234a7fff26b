"""The randomised model of the integration property test (tests/test_integration_invariants.py).

Skills, tools and the :class:`Driver`: a seeded function of each request that picks random actions
and checks invariants 1 (call/result pairing) and 2 (skill tools advertised only while disclosed or
loaded) on every request it receives. ``tests/test_integration_overflow_skills.py`` reuses the
skills, tools and helpers.
"""

from __future__ import annotations

import asyncio
import json
import posixpath
import random
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from plait import (
    AssistantMessage,
    Message,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from plait.context import (
    find_orphans,
)
from plait.errors import ContextOverflowError, ProviderError
from plait.skills.managed import SkillManager

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
