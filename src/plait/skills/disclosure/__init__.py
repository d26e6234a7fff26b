"""Disclosure mode: Agent Skills as progressive disclosure (the deepagents seed).

::

    skills = SkillsMiddleware(sources=["skills/base", "skills/project"], tools=[create_ticket])
    agent = Agent(model, middleware=[SummarizationMiddleware(100_000), skills])
    await agent.run("/write-tests for auth.py", state={"pinned_skills": ["write-tests"]})

* **Catalog.** Before every model call the thread's skills (name, description, SKILL.md path)
  follow the system prompt, within ``budget`` characters; past it, the skills relevant to the
  conversation are described, the next ones named without descriptions (``names_share`` of the
  budget), and ``search_skills`` finds the rest. A skill that could not be loaded is named in
  one bounded note, and reported as :class:`SkillProblemFound` events. No skills: no catalog
  and no skill tools at all.
* **Reading.** The model reads a skill with ``read_file`` (the middleware's, unless the agent has
  its own): the whole file by default, pages only for huge files, confined to skill folders.
* **Loading.** Once per thread, kept in the thread state under ``skills_metadata`` as a small
  summary. Set it to ``None`` (in the run input, or from any hook, mid-run included) and the next
  model call reloads every source. ``auto_refresh`` refreshes incrementally instead.
* **Pins.** ``pinned_skills`` names become user messages holding the SKILL.md body, tagged
  ``metadata={"source": "pinned_skill", "skill": {...}}``.
* **Skill tools.** ``metadata.include_tools`` names become visible only while a read or pin of
  the skill is in the request; before that (or after compaction drops it) a call fails with the
  standard unknown-tool error. Agent tools win over skill tools; a deferred agent tool is
  disclosed early and stays deferred.

Place it after ``SummarizationMiddleware`` so it sees the compacted messages.

**Not a security boundary.** This controls what is in the model's context, nothing more: the
model can read any SKILL.md at any time, an agent tool of the same name is always callable, and
``read_file`` confinement keeps reads inside skill folders but is no sandbox for untrusted skills.
Gate dangerous tools with a guard or ``before_tool_call`` middleware, not with skill disclosure.
"""

from __future__ import annotations

from plait.skills.disclosure.events import (
    SkillCatalogLoaded,
    SkillPinned,
    SkillProblemFound,
    SkillToolsDisclosed,
    SkillToolsWithdrawn,
    SkillToolUnresolved,
)
from plait.skills.disclosure.middleware import STATE_KEY, SkillsMiddleware
from plait.skills.disclosure.pins import PINNED_KEY, PinnedSkillNotFound
from plait.skills.disclosure.read_file import SkillPathError
from plait.skills.disclosure.skill_tools import ResolvedTools, ToolNameResolver
from plait.skills.disclosure.snapshot import DEFAULT_INSTRUCTIONS

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "PINNED_KEY",
    "STATE_KEY",
    "PinnedSkillNotFound",
    "ResolvedTools",
    "SkillCatalogLoaded",
    "SkillPathError",
    "SkillPinned",
    "SkillProblemFound",
    "SkillToolUnresolved",
    "SkillToolsDisclosed",
    "SkillToolsWithdrawn",
    "SkillsMiddleware",
    "ToolNameResolver",
]
