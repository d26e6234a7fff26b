"""Managed skill mode: a :class:`SkillManager` with a lifecycle (load, unload, refresh, aclose)
and four pipeline hooks that project its skills onto every turn. See ``README.md`` here.

::

    manager = await create_skill_manager(sources=[FilesystemSource("skills")], gate=my_gate)
    agent = Agent(model, middleware=[*manager.middleware, *other_middleware])
    ...
    await manager.aclose()

``__all__`` holds the manager, its configuration and results, the seed's hook factories, the
typed errors and the events; internals (projection placeholders, tool wrappers, key and marker
constants) stay importable from their modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plait.lazy import lazy_exports

if TYPE_CHECKING:
    from plait.skills.managed.create import create_skill_manager
    from plait.skills.managed.errors import (
        ErrorCode,
        InvalidSkillsConfig,
        ManagerError,
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
        create_skill_middleware_set,
        skills_dispatch_input_middleware,
        skills_dispatch_output_middleware,
        skills_turn_input_middleware,
        skills_turn_output_middleware,
    )
    from plait.skills.managed.manager import SkillManager
    from plait.skills.managed.persistence import RememberLoadedSkills
    from plait.skills.managed.prepare import SkillTools, SkillToolsProvider
    from plait.skills.managed.records import (
        CatalogRefresh,
        Channel,
        LoadedSkill,
        LoadResult,
        ProjectedSkill,
        RefreshOutcome,
        SkillStatus,
    )
    from plait.skills.managed.scripts import ScriptConfig
    from plait.skills.managed.tools import Gate, allow_all

__all__ = [
    "CatalogRefresh",
    "Channel",
    "ErrorCode",
    "Gate",
    "InvalidSkillsConfig",
    "LoadResult",
    "LoadedSkill",
    "ManagerError",
    "ProjectedSkill",
    "RefreshOutcome",
    "RememberLoadedSkills",
    "ScriptConfig",
    "SkillAlreadyLoaded",
    "SkillGateDenied",
    "SkillLoadFailed",
    "SkillLoaded",
    "SkillManager",
    "SkillManagerDisposed",
    "SkillManagerError",
    "SkillMiddlewareSet",
    "SkillNotLoaded",
    "SkillRefreshFailed",
    "SkillRestoreFailed",
    "SkillSandboxUnavailable",
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
    "allow_all",
    "create_skill_manager",
    "create_skill_middleware_set",
    "render_error",
    "skills_dispatch_input_middleware",
    "skills_dispatch_output_middleware",
    "skills_turn_input_middleware",
    "skills_turn_output_middleware",
]

if not TYPE_CHECKING:  # a visible __getattr__ would make mypy accept any attribute
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.skills.managed.create": ("create_skill_manager",),
            "plait.skills.managed.errors": (
                "ErrorCode",
                "InvalidSkillsConfig",
                "ManagerError",
                "SkillAlreadyLoaded",
                "SkillGateDenied",
                "SkillLoadFailed",
                "SkillManagerDisposed",
                "SkillManagerError",
                "SkillNotLoaded",
                "SkillRefreshFailed",
                "SkillSandboxUnavailable",
                "SkillScriptFailed",
                "SkillScriptRejected",
                "SkillScriptTimeout",
                "SkillToolCollision",
                "SkillToolInvalid",
                "render_error",
            ),
            "plait.skills.managed.events": (
                "SkillLoaded",
                "SkillRestoreFailed",
                "SkillSwapFailed",
                "SkillSwapped",
                "SkillUnloaded",
                "SkillUpdateFound",
            ),
            "plait.skills.managed.hooks": (
                "SkillMiddlewareSet",
                "create_skill_middleware_set",
                "skills_dispatch_input_middleware",
                "skills_dispatch_output_middleware",
                "skills_turn_input_middleware",
                "skills_turn_output_middleware",
            ),
            "plait.skills.managed.manager": ("SkillManager",),
            "plait.skills.managed.persistence": ("RememberLoadedSkills",),
            "plait.skills.managed.prepare": (
                "SkillTools",
                "SkillToolsProvider",
            ),
            "plait.skills.managed.records": (
                "CatalogRefresh",
                "Channel",
                "LoadedSkill",
                "LoadResult",
                "ProjectedSkill",
                "RefreshOutcome",
                "SkillStatus",
            ),
            "plait.skills.managed.scripts": ("ScriptConfig",),
            "plait.skills.managed.tools": (
                "Gate",
                "allow_all",
            ),
        },
    )
