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
    SkillAlreadyLoaded,
    SkillGateDenied,
    SkillLoadFailed,
    SkillManagerDisposed,
    SkillManagerError,
    SkillNotLoaded,
    SkillRefreshFailed,
    SkillScriptFailed,
    SkillScriptRejected,
    SkillScriptTimeout,
    SkillToolCollision,
    SkillToolInvalid,
    render_error,
)
from plait.skills.managed.events import (
    SkillLoaded,
    SkillRestoreFailed,
    SkillSwapFailed,
    SkillSwapped,
    SkillUnloaded,
    SkillUpdateFound,
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
from plait.skills.managed.persistence import LOADED_STATE_KEY, RememberLoadedSkills
from plait.skills.managed.prepare import TOOL_NAME, SkillTools, SkillToolsProvider
from plait.skills.managed.records import (
    META_KEY,
    CatalogRefresh,
    Channel,
    LoadedSkill,
    LoadResult,
    ProjectedSkill,
    RefreshOutcome,
    SkillStatus,
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
    "CatalogRefresh",
    "Channel",
    "ErrorCode",
    "Gate",
    "InvalidSkillsConfig",
    "LoadResult",
    "LoadedSkill",
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
    "SkillScriptFailed",
    "SkillScriptRejected",
    "SkillScriptTimeout",
    "SkillStatus",
    "SkillSwapFailed",
    "SkillSwapped",
    "SkillToolCollision",
    "SkillToolInvalid",
    "SkillTools",
    "SkillToolsProvider",
    "SkillUnloaded",
    "SkillUpdateFound",
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
