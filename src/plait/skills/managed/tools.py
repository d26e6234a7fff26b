"""The tools of the managed mode: the lifecycle tools the model drives the manager with, and
:class:`SkillOwnedTool`, the wrapper every skill-owned tool is registered as.

==================== ========== ====================================================
tool                 gated      what it does
==================== ========== ====================================================
list_skills          no         the catalog (``query`` ranks, ``refresh`` rediscovers)
list_loaded_skills   no         initialized skills, and those projected onto this turn
load_skill           yes, seq.  load a skill: tools callable at once, body projected
unload_skill         yes, seq.  unload: tools unregistered at once, body leaves context
refresh_skills       yes, seq.  swap one (or every) loaded skill to its new version
read_skill_body      no         the body behind a handle (``handle`` channel)
skill tools, scripts yes        a loaded skill's own tools and ``run_<skill>_<script>``
==================== ========== ====================================================

"seq." = ``metadata={"sequential": True}``: the call runs alone and the calls after it in the
same response wait for it, so a tool it registers resolves for them (late binding).

A refusal, an unknown or unloaded skill, a script failure: every
:data:`~plait.skills.managed.errors.ManagerError` reaches the model as the tool's result,
rendered by :func:`~plait.skills.managed.errors.render_error` (``Error (DENIED): …``). Any other
exception a skill tool raises is reported by the runtime as a failed tool call.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from plait.errors import ToolError
from plait.middleware.context import DispatchContext
from plait.sandbox import KILL_GRACE_SECONDS, BubblewrapSandbox, Sandbox, UnsandboxedRunner
from plait.skills.managed.errors import (
    ManagerError,
    SkillGateDenied,
    SkillNotLoaded,
    SkillRefreshFailed,
    SkillScriptFailed,
    render_error,
)
from plait.skills.managed.records import LoadedSkill
from plait.skills.managed.scripts import ScriptConfig, run_script
from plait.tools import FunctionTool, Tool, ToolContext, ToolDefinition

if TYPE_CHECKING:
    from plait.skills.managed.manager import SkillManager

__all__ = [
    "LIFECYCLE_TOOL_NAMES",
    "Gate",
    "SkillOwnedTool",
    "allow_all",
    "call_gate",
    "lifecycle_tools",
    "script_tool",
]

Gate = Callable[[DispatchContext, str, Mapping[str, Any]], bool | Awaitable[bool | None] | None]
"""``gate(ctx, tool_name, args)``, sync or async: raise (or return ``False``) to refuse."""

LIFECYCLE_TOOL_NAMES = (
    "list_skills",
    "list_loaded_skills",
    "load_skill",
    "unload_skill",
    "refresh_skills",
    "read_skill_body",
)

_SEQUENTIAL = {"sequential": True}
_MAX_SEARCH_RESULTS = 50
MAX_LISTED_SKILLS = 200
"""The most skills ``list_skills`` without a query returns (the rest are counted in ``more``)."""


def allow_all(ctx: DispatchContext, tool_name: str, args: Mapping[str, Any]) -> None:
    """A gate that allows everything. Fine for tests and trusted skills; say so explicitly."""
    return None


async def call_gate(
    gate: Gate, ctx: DispatchContext, tool_name: str, args: Mapping[str, Any]
) -> None:
    """Ask ``gate``; raise :class:`SkillGateDenied` if it raised or returned ``False``."""
    try:
        verdict = gate(ctx, tool_name, args)
        if inspect.isawaitable(verdict):
            verdict = await verdict
    except Exception as err:
        reason = str(err) or type(err).__name__
        raise SkillGateDenied(f"{tool_name} was refused by the gate: {reason}") from err
    if verdict is False:
        raise SkillGateDenied(f"{tool_name} was refused by the gate.")


class SkillOwnedTool(Tool):
    """A loaded skill's tool as the registry holds it: the gate runs first, the call is counted
    in flight (so ``aclose`` can wait for it), a retired skill refuses the call. The original
    tool is never mutated; its definition gains ``skill`` and ``skill_version`` metadata."""

    def __init__(self, inner: Tool, record: LoadedSkill, gate: Gate, owner: object) -> None:
        d = inner.definition
        metadata = {**d.metadata, "skill": record.name, "skill_version": record.version}
        super().__init__(ToolDefinition(d.name, d.description, d.parameters, metadata))
        self.inner = inner
        self.timeout = inner.timeout  # the tool's own deadline, not the agent-wide default
        self.requires_approval = inner.requires_approval  # a gated tool stays gated (a pause)
        self.record = record
        self.gate = gate
        self.owner = owner

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return self.inner.validate(args)

    async def invoke(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        try:
            await call_gate(self.gate, ctx.dispatch, self.name, args)
            self.record.enter()
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        try:
            return await self.inner.invoke(args, ctx)
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        finally:
            self.record.exit()


def script_tool(record: LoadedSkill, path: str, config: ScriptConfig, name: str) -> FunctionTool:
    """The tool that runs ``path`` (``scripts/…``) of ``record`` in its workspace."""

    async def run(
        ctx: ToolContext, args: list[str] | None = None, timeout_seconds: float | None = None
    ) -> str:
        template = record.workspace
        if template is None or template.disposed:
            raise SkillNotLoaded(f"Skill not loaded: {record.name}. Its workspace is gone.")
        async with contextlib.AsyncExitStack() as stack:
            try:
                workspace = await stack.enter_async_context(
                    template.thread_copy(
                        ctx.turn.thread_id, config.thread_workspaces, config.thread_workspace_bytes
                    )
                )
            except (OSError, RuntimeError) as err:
                raise SkillScriptFailed(
                    f"Script {path} could not start: copying the skill's workspace for this "
                    f"thread failed ({type(err).__name__}: {err})."
                ) from err
            done = await run_script(
                workspace,
                path,
                args or [],
                config,
                timeout_seconds=timeout_seconds,
                on_start=record.track,
                on_end=record.untrack,
            )
        return done.describe()

    description = (
        f"Run {path} of skill '{record.name}' {_where(config.sandbox)}, in the skill's "
        "workspace: argv only "
        "(no shell), "
        "each string in args is one argument and may not start with '-'. Returns the exit code "
        f"and the combined stdout/stderr (at most {config.max_output_bytes} bytes). "
        f"timeout_seconds defaults to {config.timeout:g} (max {config.max_timeout:g})."
    )
    # The script's own deadline (timeout_seconds, at most max_timeout, then the kill) governs
    # it, so the agent-wide Limits.tool_timeout does not cut a run the model was allowed.
    return FunctionTool(
        run,
        name=name,
        description=description,
        metadata={"sandbox": config.sandbox.name},
        timeout=config.max_timeout + 2 * KILL_GRACE_SECONDS,
    )


_MAX_WRITE_PLACES = 5
"""How many ``write_allow`` folders a script tool's description names (then a count)."""


def _where(sandbox: Sandbox) -> str:
    """How a script tool's description names the sandbox (the model should know)."""
    if isinstance(sandbox, UnsandboxedRunner):
        return "UNSANDBOXED (as the agent's user)"
    if isinstance(sandbox, BubblewrapSandbox):
        policy = sandbox.policy
        network = "no network" if policy.network == "off" else "network on"
        places = ["a private /tmp"] if policy.private_tmp else []
        places += list(policy.write_allow[:_MAX_WRITE_PLACES])
        if len(policy.write_allow) > _MAX_WRITE_PLACES:
            places.append(f"{len(policy.write_allow) - _MAX_WRITE_PLACES} more host folders")
        if not places:
            writes = "writes only in the workspace"
        elif policy.write_allow:
            writes = f"writes in the workspace, {', '.join(places[:-1])} and {places[-1]}"
        else:
            writes = f"writes only in the workspace and {places[0]}"
        return f"in the bubblewrap sandbox ({writes}, {network})"
    return f"in the {sandbox.name} sandbox"


def lifecycle_tools(manager: SkillManager) -> tuple[Tool, ...]:
    """The six tools bound to ``manager`` (see the module table)."""

    async def list_skills(query: str | None = None, refresh: bool = False, limit: int = 20) -> Any:
        """List the skills you can load, with whether each is loaded. With a query (keywords
        or a description of the task) only the best matches, best first, at most limit;
        without one, the first 200 (in source order) and how many more there are. refresh=true
        rediscovers the sources first."""
        try:
            if refresh:
                await manager.refresh()
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        if query and query.strip():
            found = manager.search(query, max(1, min(limit, _MAX_SEARCH_RESULTS)))
        else:
            found = [s for s in manager.catalog() if s.model_invocable and s.shadowed_by is None]
        more = len(found) - MAX_LISTED_SKILLS
        shown = []
        for entry in found[:MAX_LISTED_SKILLS]:
            item: dict[str, Any] = {
                "name": entry.name,
                "id": str(entry.ref),
                "description": entry.description,
                "version": entry.version,
                "loaded": entry.loaded,
            }
            if entry.update_available:
                item["update_available"] = True
            shown.append(item)
        if more <= 0:
            return {"skills": shown}
        note = f"{more} more skills not listed; pass a query to find the one you need."
        return {"skills": shown, "more": more, "note": note}

    def list_loaded_skills(ctx: ToolContext) -> Any:
        """List the loaded skills: initialized (kept across turns) and projected (callable in
        this turn), with their tools and handles."""
        projected = manager.projected(ctx.turn)
        return {
            "initialized": manager.loaded(),
            "projected": [
                {"skill": p.skill, "version": p.version, "handle": p.handle, "tools": list(p.tools)}
                for p in projected
            ],
        }

    async def load_skill(skill: str, ctx: ToolContext) -> Any:
        """Load a skill by name: its tools can be called right away (even later in this same
        response) and its instructions join the conversation."""
        try:
            await call_gate(manager.gate, ctx.dispatch, "load_skill", {"skill": skill})
            result = await manager.load(skill, ctx.dispatch, invoked_by_model=True)
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        return result.describe()

    async def unload_skill(skill: str, ctx: ToolContext) -> Any:
        """Unload a skill: its tools stop resolving at once and its instructions leave."""
        try:
            await call_gate(manager.gate, ctx.dispatch, "unload_skill", {"skill": skill})
            name = await manager.unload(skill, ctx.dispatch)
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        return {"skill": name, "unloaded": True}

    async def refresh_skills(ctx: ToolContext, skill: str | None = None) -> Any:
        """Refresh one named skill and replace its loaded version in this dispatch, or omit
        skill to refresh all loaded skills. A version that fails to load is not swapped in."""
        try:
            await call_gate(manager.gate, ctx.dispatch, "refresh_skills", {"skill": skill})
            outcomes = await manager.refresh_and_project(ctx.dispatch, skill)
        except ManagerError as err:
            raise ToolError(render_error(err)) from None
        if skill is not None and len(outcomes) == 1 and outcomes[0].error is not None:
            failed = SkillRefreshFailed(f"{outcomes[0].error} The old version stays loaded.")
            raise ToolError(render_error(failed)) from None
        return {"refreshed": [o.describe() for o in outcomes]}

    def read_skill_body(handle: str, ctx: ToolContext) -> Any:
        """Read the instructions (SKILL.md body) of a loaded skill, by the handle load_skill
        gave (or the skill's name). They stay in context for this turn only."""
        try:
            return manager.read_body(handle, ctx)
        except ManagerError as err:
            raise ToolError(render_error(err)) from None

    return (
        FunctionTool(list_skills),
        FunctionTool(list_loaded_skills),
        FunctionTool(load_skill, metadata=_SEQUENTIAL),
        FunctionTool(unload_skill, metadata=_SEQUENTIAL),
        FunctionTool(refresh_skills, metadata=_SEQUENTIAL),
        FunctionTool(read_skill_body),
    )
