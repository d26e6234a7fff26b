"""Agent Skills (SKILL.md folders): parse, validate, discover, catalog and render.

Layers, bottom up:

* :mod:`.parser` splits SKILL.md into frontmatter text and body; :mod:`.frontmatter` reads the
  YAML; :mod:`.validator` checks it ``strict`` (``skills-ref``'s diagnostics) or ``lenient``
  (:mod:`.lenient`: recover what can honestly be recovered, warn about the rest).
* :mod:`.sources` find skills: :class:`FilesystemSource`, :class:`MemorySource`,
  :class:`BackendSource`, all behind the async :class:`SkillSource` protocol.
* :class:`SkillCatalog` orders sources, resolves name collisions, keeps diagnostics and
  refreshes incrementally; :mod:`.render` turns it into a prompt section.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.skills.catalog import Precedence, RefreshResult, SkillCatalog
    from plait.skills.diagnostics import Code, Diagnostic, Severity
    from plait.skills.disclosure import (
        PinnedSkillNotFound,
        SkillLoadProblem,
        SkillPathError,
        SkillPinned,
        SkillsLoaded,
        SkillsMiddleware,
        SkillSnapshot,
        SkillToolResolver,
        SkillToolsDisclosed,
        SkillToolsWithdrawn,
        SkillToolUnresolved,
    )
    from plait.skills.errors import SkillError, SkillFileNotFound, SkillNotFound, SkillSourceError
    from plait.skills.lenient import first_paragraph, split_allowed_tools
    from plait.skills.managed import (
        ScriptConfig,
        SkillManager,
        SkillManagerError,
        SkillMiddlewareSet,
        create_skill_manager,
    )
    from plait.skills.model import (
        SPEC_FIELDS,
        DiscoveryItem,
        DiscoveryProblem,
        Skill,
        SkillEntry,
        SkillFileStat,
        SkillMeta,
        SkillRef,
        content_version,
    )
    from plait.skills.parser import SkillMarkdown, split_skill_md
    from plait.skills.render import (
        DEFAULT_OVERFLOW_HINT,
        PromptFormat,
        render_markdown,
        render_prompt,
        render_xml,
    )
    from plait.skills.sources import (
        BackendSource,
        FilesystemSource,
        MemorySource,
        ScanStats,
        SkillSource,
    )
    from plait.skills.validator import (
        SkillCheck,
        ValidationMode,
        check_skill_md,
        find_skill_md,
        validate_skill_dir,
    )

__all__ = [
    "DEFAULT_OVERFLOW_HINT",
    "SPEC_FIELDS",
    "BackendSource",
    "Code",
    "Diagnostic",
    "DiscoveryItem",
    "DiscoveryProblem",
    "FilesystemSource",
    "MemorySource",
    "Precedence",
    "PromptFormat",
    "RefreshResult",
    "ScanStats",
    "Severity",
    "Skill",
    "SkillCatalog",
    "SkillCheck",
    "SkillEntry",
    "SkillError",
    "SkillFileNotFound",
    "SkillFileStat",
    "SkillMarkdown",
    "SkillMeta",
    "SkillNotFound",
    "SkillRef",
    "SkillSource",
    "SkillSourceError",
    "ValidationMode",
    "check_skill_md",
    "content_version",
    "find_skill_md",
    "first_paragraph",
    "render_markdown",
    "render_prompt",
    "render_xml",
    "split_allowed_tools",
    "split_skill_md",
    "validate_skill_dir",
]

__all__ += [
    "PinnedSkillNotFound",
    "SkillLoadProblem",
    "SkillPathError",
    "SkillPinned",
    "SkillSnapshot",
    "SkillToolResolver",
    "SkillToolUnresolved",
    "SkillToolsDisclosed",
    "SkillToolsWithdrawn",
    "SkillsLoaded",
    "SkillsMiddleware",
]

__all__ += [
    "ScriptConfig",
    "SkillManager",
    "SkillManagerError",
    "SkillMiddlewareSet",
    "create_skill_manager",
]

# Hidden from type checkers, which then check every name against the imports above.
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.skills.catalog": (
                "Precedence",
                "RefreshResult",
                "SkillCatalog",
            ),
            "plait.skills.diagnostics": (
                "Code",
                "Diagnostic",
                "Severity",
            ),
            "plait.skills.errors": (
                "SkillError",
                "SkillFileNotFound",
                "SkillNotFound",
                "SkillSourceError",
            ),
            "plait.skills.lenient": (
                "first_paragraph",
                "split_allowed_tools",
            ),
            "plait.skills.model": (
                "SPEC_FIELDS",
                "DiscoveryItem",
                "DiscoveryProblem",
                "Skill",
                "SkillEntry",
                "SkillFileStat",
                "SkillMeta",
                "SkillRef",
                "content_version",
            ),
            "plait.skills.parser": (
                "SkillMarkdown",
                "split_skill_md",
            ),
            "plait.skills.render": (
                "DEFAULT_OVERFLOW_HINT",
                "PromptFormat",
                "render_markdown",
                "render_prompt",
                "render_xml",
            ),
            "plait.skills.sources": (
                "BackendSource",
                "FilesystemSource",
                "MemorySource",
                "ScanStats",
                "SkillSource",
            ),
            "plait.skills.validator": (
                "SkillCheck",
                "ValidationMode",
                "check_skill_md",
                "find_skill_md",
                "validate_skill_dir",
            ),
            "plait.skills.disclosure": (
                "PinnedSkillNotFound",
                "SkillLoadProblem",
                "SkillPathError",
                "SkillPinned",
                "SkillsLoaded",
                "SkillsMiddleware",
                "SkillSnapshot",
                "SkillToolResolver",
                "SkillToolsDisclosed",
                "SkillToolsWithdrawn",
                "SkillToolUnresolved",
            ),
            "plait.skills.managed": (
                "ScriptConfig",
                "SkillManager",
                "SkillManagerError",
                "SkillMiddlewareSet",
                "create_skill_manager",
            ),
        },
    )
