"""``search_skills``: keyword search over the skills the budget left out of the prompt.

It is offered only when the catalog did not fit its budget. Every listed skill (hidden ones,
``disable-model-invocation: true``, are never searched) is scored by the query's words: a word
in the name counts three, a word in the description one. Ties keep catalog order, so the same
query always gives the same answer. Results use the catalog's own line format, paths included.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from plait.errors import quoted
from plait.skills.disclosure.snapshot import SkillSnapshot
from plait.skills.render import markdown_line
from plait.tools import FunctionTool, ToolContext

__all__ = ["SEARCH_TOOL_NAME", "build_search_tool", "search_skills"]

SEARCH_TOOL_NAME = "search_skills"
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_RESULTS = 50


def search_skills(snapshot: SkillSnapshot, query: str, limit: int = 10) -> str:
    """The best ``limit`` matches for ``query``, one catalog line each."""
    terms = list(dict.fromkeys(_WORDS.findall(query.lower())))
    if not terms:
        return "Give a few keywords, e.g. search_skills(query='pdf forms')."
    scored: list[tuple[int, int]] = []
    for index, entry in enumerate(snapshot.listed):
        text = snapshot.search_text(index)
        name = entry.name.lower()
        score = sum(3 * (term in name) + (term in text) for term in terms)
        if score:
            scored.append((-score, index))
    if not scored:
        return f"No skill matches {quoted(query)}. Try other or fewer keywords."
    scored.sort()
    best = scored[: max(1, min(limit, _MAX_RESULTS))]
    lines = [markdown_line(snapshot.listed[index]) for _, index in best]
    more = len(scored) - len(best)
    tail = f"\n({more} more match; refine the query to narrow them.)" if more else ""
    noun = "skill matches" if len(scored) == 1 else "skills match"
    return f"{len(scored)} {noun} {quoted(query)}:\n" + "\n".join(lines) + tail


def build_search_tool(snapshot_of: Callable[[ToolContext], SkillSnapshot]) -> FunctionTool:
    """The ``search_skills`` tool; ``snapshot_of`` gives the calling thread's skills."""

    async def search(query: str, limit: int = 10, *, ctx: ToolContext) -> str:
        """Find skills by keywords when the skills list in the instructions is incomplete.
        Returns matching skills with their descriptions and SKILL.md paths; read one with
        read_file before using it."""
        return search_skills(snapshot_of(ctx), query, limit)

    return FunctionTool(search, name=SEARCH_TOOL_NAME)
