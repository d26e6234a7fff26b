"""``create_skill_manager``: check a managed-mode configuration, discover every source, and
build the :class:`~plait.skills.managed.manager.SkillManager`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from plait.errors import ConfigurationError
from plait.skills.catalog import Precedence, SkillCatalog
from plait.skills.diagnostics import Code
from plait.skills.managed.errors import InvalidSkillsConfig
from plait.skills.managed.manager import SkillManager
from plait.skills.managed.prepare import SkillTools
from plait.skills.managed.records import Channel
from plait.skills.managed.scripts import ScriptConfig
from plait.skills.managed.tools import Gate
from plait.skills.sources.base import SkillSource

if TYPE_CHECKING:
    from plait.skills.ranking import SkillRanker

__all__ = ["create_skill_manager"]

_CHANNELS = ("handle", "inline")
_RANKER = ("update", "rank")  # the SkillRanker protocol's methods


async def create_skill_manager(
    *,
    sources: Sequence[SkillSource],
    gate: Gate,
    default_channel: Channel = "handle",
    scripts: ScriptConfig | None = None,
    auto_refresh: bool = False,
    skill_tools: SkillTools | None = None,
    precedence: Precedence = Precedence.FIRST_WINS,
    close_timeout: float | None = None,
    ranker: SkillRanker | None = None,
) -> SkillManager:
    """Check the configuration, discover every source, and return a manager.

    ``sources`` are ordered (earlier wins a name collision with ``FIRST_WINS``); ``gate`` is
    required (``gate(ctx, tool_name, args)``, sync or async, raise to refuse; see
    :func:`~plait.skills.managed.tools.allow_all`). ``skill_tools`` gives skills Python tools
    (``{skill_name: [Tool, …]}`` or a resolver). ``scripts`` turns ``scripts/`` files into tools.
    ``ranker`` orders ``list_skills(query=...)`` (:meth:`SkillManager.search`).
    Raises :class:`InvalidSkillsConfig` for a bad configuration or a source that fails.
    """
    if not sources:
        raise InvalidSkillsConfig("sources is empty; give at least one skill source.")
    if gate is None or not callable(gate):
        raise InvalidSkillsConfig(
            "gate is required: a callable (ctx, tool_name, args) that raises to refuse. "
            "Pass plait.skills.managed.allow_all to allow everything."
        )
    if default_channel not in _CHANNELS:
        raise InvalidSkillsConfig(
            f"default_channel must be 'handle' or 'inline', not {default_channel!r}."
        )
    if skill_tools is not None and not (callable(skill_tools) or isinstance(skill_tools, Mapping)):
        raise InvalidSkillsConfig(
            "skill_tools must be a mapping {skill_name: [Tool, …]} or a resolver."
        )
    if scripts is not None:
        scripts.check()
    if ranker is not None and not all(callable(getattr(ranker, m, None)) for m in _RANKER):
        raise InvalidSkillsConfig("ranker needs update(entries) and rank(query, limit) methods.")
    if close_timeout is not None and close_timeout < 0:
        raise InvalidSkillsConfig("close_timeout must be >= 0 seconds.")
    try:
        catalog = SkillCatalog(sources, precedence=precedence)
    except ConfigurationError as err:
        raise InvalidSkillsConfig(str(err)) from err
    await catalog.load()
    failures = catalog.diagnostics(code=Code.SOURCE_UNAVAILABLE)
    if failures:
        raise InvalidSkillsConfig(" ".join(d.message for d in failures))
    if close_timeout is None:
        close_timeout = scripts.timeout if scripts is not None else 5.0
    return SkillManager(
        catalog,
        gate=gate,
        default_channel=default_channel,
        scripts=scripts,
        auto_refresh=auto_refresh,
        skill_tools=skill_tools,
        close_timeout=close_timeout,
        ranker=ranker,
    )
