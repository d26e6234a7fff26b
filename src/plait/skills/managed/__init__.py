"""Managed skill mode: a :class:`SkillManager` with a lifecycle (load, unload, refresh, dispose)
and four pipeline hooks that project its skills onto every turn. See ``README.md`` here.

::

    manager = await create_skill_manager(sources=[FilesystemSource("skills")], gate=my_gate)
    agent = Agent(model, middleware=[*manager.middleware, *other_middleware])
    ...
    await manager.dispose()
"""

from __future__ import annotations

from plait.skills.managed.errors import (
    ErrorCode,
    InvalidSkillsConfig,
    ManagedSkillNotFound,
    SkillAlreadyLoaded,
    SkillGateDenied,
    SkillLoadFailed,
    SkillManagerDisposed,
    SkillManagerError,
    SkillNotLoaded,
    SkillRefreshFailed,
    SkillSandboxUnavailable,
    SkillScriptFailed,
    SkillScriptRejected,
    SkillScriptTimeout,
    SkillToolCollision,
    SkillToolInvalid,
    render_error,
)
from plait.skills.managed.hooks import (
    SkillMiddlewareSet,
    SkillsDispatchInput,
    SkillsDispatchOutput,
    SkillsTurnInput,
    SkillsTurnOutput,
    create_skill_middleware_set,
    skills_dispatch_input_middleware,
    skills_dispatch_output_middleware,
    skills_turn_input_middleware,
    skills_turn_output_middleware,
)
from plait.skills.managed.manager import SkillManager, create_skill_manager
from plait.skills.managed.persistence import (
    LOADED_STATE_KEY,
    RememberLoadedSkills,
    SkillRestoreFailed,
)
from plait.skills.managed.prepare import TOOL_NAME, SkillTools, SkillToolsResolver
from plait.skills.managed.records import (
    META_KEY,
    CatalogEntry,
    CatalogRefresh,
    Channel,
    LoadedSkill,
    LoadResult,
    ProjectedSkill,
    RefreshOutcome,
    SkillLoaded,
    SkillSwapFailed,
    SkillSwapped,
    SkillUnloaded,
    SkillUpdateAvailable,
    placeholder,
)
from plait.skills.managed.scripts import TRUNCATION_MARKER, ScriptConfig, ScriptRun
from plait.skills.managed.tools import (
    LIFECYCLE_TOOL_NAMES,
    Gate,
    SkillOwnedTool,
    allow_all,
)

__all__ = [
    "LIFECYCLE_TOOL_NAMES",
    "LOADED_STATE_KEY",
    "META_KEY",
    "TOOL_NAME",
    "TRUNCATION_MARKER",
    "CatalogEntry",
    "CatalogRefresh",
    "Channel",
    "ErrorCode",
    "Gate",
    "InvalidSkillsConfig",
    "LoadResult",
    "LoadedSkill",
    "ManagedSkillNotFound",
    "ProjectedSkill",
    "RefreshOutcome",
    "RememberLoadedSkills",
    "ScriptConfig",
    "ScriptRun",
    "SkillAlreadyLoaded",
    "SkillGateDenied",
    "SkillLoadFailed",
    "SkillLoaded",
    "SkillManager",
    "SkillManagerDisposed",
    "SkillManagerError",
    "SkillMiddlewareSet",
    "SkillNotLoaded",
    "SkillOwnedTool",
    "SkillRefreshFailed",
    "SkillRestoreFailed",
    "SkillSandboxUnavailable",
    "SkillScriptFailed",
    "SkillScriptRejected",
    "SkillScriptTimeout",
    "SkillSwapFailed",
    "SkillSwapped",
    "SkillToolCollision",
    "SkillToolInvalid",
    "SkillTools",
    "SkillToolsResolver",
    "SkillUnloaded",
    "SkillUpdateAvailable",
    "SkillsDispatchInput",
    "SkillsDispatchOutput",
    "SkillsTurnInput",
    "SkillsTurnOutput",
    "allow_all",
    "create_skill_manager",
    "create_skill_middleware_set",
    "placeholder",
    "render_error",
    "skills_dispatch_input_middleware",
    "skills_dispatch_output_middleware",
    "skills_turn_input_middleware",
    "skills_turn_output_middleware",
]
