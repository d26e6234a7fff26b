"""Agent Skills (SKILL.md folders): parse, validate, discover, catalog and render.

Layers, bottom up:

* :mod:`.parser` splits SKILL.md into frontmatter text and body; :mod:`.frontmatter` reads the
  YAML; :mod:`.validator` checks it ``strict`` (``skills-ref``'s diagnostics) or ``lenient``
  (:mod:`.lenient`: recover what can honestly be recovered, warn about the rest).
* :mod:`.sources` find skills: :class:`FilesystemSource`, :class:`MemorySource`,
  :class:`BackendSource`, all behind the async :class:`SkillSource` protocol (a custom source
  yields :class:`SkillEntry` or :class:`DiscoveryProblem` items and answers ``stat`` with
  :class:`SkillFileStat`).
* :class:`SkillCatalog` orders sources, resolves name collisions, keeps diagnostics and
  refreshes incrementally; :func:`render_prompt` turns it into a prompt section.
* :mod:`.ranking`: :class:`SkillRanker` orders skills by relevance to a text (the default
  :class:`LexicalRanker` is BM25F), for catalogs larger than their prompt budget;
  :class:`EmbeddingRanker` (:mod:`.embedding`, the ``embeddings`` extra) fuses it with your own
  embedding model.
* Two modes on top: :class:`SkillsMiddleware` (disclosure, :mod:`.disclosure`) and
  :class:`SkillManager` (managed, :mod:`.managed`, whose full surface lives there).

``__all__`` is what an application needs; helpers (the parser's pieces, the renderers per
format, version hashing) stay importable from their modules.
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False  # not typing's: importing this package must not import typing

if TYPE_CHECKING:
    from plait.skills.catalog import Precedence, RefreshResult, SkillCatalog
    from plait.skills.diagnostics import Code, Diagnostic, Severity
    from plait.skills.disclosure import (
        PinnedSkillNotFound,
        SkillCatalogLoaded,
        SkillPathError,
        SkillPinned,
        SkillProblemFound,
        SkillsMiddleware,
        SkillToolsDisclosed,
        SkillToolsWithdrawn,
        SkillToolUnresolved,
        ToolNameResolver,
    )
    from plait.skills.embedding import EmbeddingRanker
    from plait.skills.errors import (
        SkillError,
        SkillFileNotFound,
        SkillFileTooLarge,
        SkillFileUnreadable,
        SkillNotFound,
        SkillSourceError,
    )
    from plait.skills.managed import (
        ScriptConfig,
        SkillManager,
        SkillManagerError,
        create_skill_manager,
    )
    from plait.skills.model import (
        DiscoveryItem,
        DiscoveryProblem,
        Skill,
        SkillEntry,
        SkillFileStat,
        SkillMeta,
        SkillRef,
    )
    from plait.skills.ranking import LexicalRanker, SkillRanker
    from plait.skills.render import PromptFormat, render_prompt
    from plait.skills.sources import BackendSource, FilesystemSource, MemorySource, SkillSource
    from plait.skills.validator import (
        SkillCheck,
        ValidationMode,
        check_skill_md,
        validate_skill_dir,
    )

__all__ = [
    "BackendSource",
    "Code",
    "Diagnostic",
    "DiscoveryItem",
    "DiscoveryProblem",
    "EmbeddingRanker",
    "FilesystemSource",
    "LexicalRanker",
    "MemorySource",
    "PinnedSkillNotFound",
    "Precedence",
    "PromptFormat",
    "RefreshResult",
    "ScriptConfig",
    "Severity",
    "Skill",
    "SkillCatalog",
    "SkillCatalogLoaded",
    "SkillCheck",
    "SkillEntry",
    "SkillError",
    "SkillFileNotFound",
    "SkillFileStat",
    "SkillFileTooLarge",
    "SkillFileUnreadable",
    "SkillManager",
    "SkillManagerError",
    "SkillMeta",
    "SkillNotFound",
    "SkillPathError",
    "SkillPinned",
    "SkillProblemFound",
    "SkillRanker",
    "SkillRef",
    "SkillSource",
    "SkillSourceError",
    "SkillToolUnresolved",
    "SkillToolsDisclosed",
    "SkillToolsWithdrawn",
    "SkillsMiddleware",
    "ToolNameResolver",
    "ValidationMode",
    "check_skill_md",
    "create_skill_manager",
    "render_prompt",
    "validate_skill_dir",
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
            "plait.skills.disclosure": (
                "PinnedSkillNotFound",
                "SkillCatalogLoaded",
                "SkillPathError",
                "SkillPinned",
                "SkillProblemFound",
                "SkillsMiddleware",
                "SkillToolsDisclosed",
                "SkillToolsWithdrawn",
                "SkillToolUnresolved",
                "ToolNameResolver",
            ),
            "plait.skills.errors": (
                "SkillError",
                "SkillFileNotFound",
                "SkillFileTooLarge",
                "SkillFileUnreadable",
                "SkillNotFound",
                "SkillSourceError",
            ),
            "plait.skills.embedding": ("EmbeddingRanker",),
            "plait.skills.managed": (
                "ScriptConfig",
                "SkillManager",
                "SkillManagerError",
                "create_skill_manager",
            ),
            "plait.skills.model": (
                "DiscoveryItem",
                "DiscoveryProblem",
                "Skill",
                "SkillEntry",
                "SkillFileStat",
                "SkillMeta",
                "SkillRef",
            ),
            "plait.skills.ranking": (
                "LexicalRanker",
                "SkillRanker",
            ),
            "plait.skills.render": (
                "PromptFormat",
                "render_prompt",
            ),
            "plait.skills.sources": (
                "BackendSource",
                "FilesystemSource",
                "MemorySource",
                "SkillSource",
            ),
            "plait.skills.validator": (
                "SkillCheck",
                "ValidationMode",
                "check_skill_md",
                "validate_skill_dir",
            ),
        },
    )
