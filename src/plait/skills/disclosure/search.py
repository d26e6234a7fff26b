"""``search_skills``: relevance search over the skills the budget left out of the prompt.

It is offered only when the catalog did not fit its budget. The middleware's ranker (BM25F over
name and description by default, see :mod:`plait.skills.ranking`) orders every listed skill
(hidden ones, ``disable-model-invocation: true``, are never searched); the same query over the
same catalog always gives the same answer; a query that is a listed skill's exact name (as the
prompt's names tier shows it) returns that skill first. Results use the catalog's own line
format, paths included, best first.
"""

from __future__ import annotations

from collections.abc import Callable

from plait.errors import quoted
from plait.skills.disclosure.listing import RankedListing
from plait.skills.disclosure.snapshot import SkillSnapshot
from plait.skills.render import markdown_line
from plait.tools import FunctionTool, ToolContext

__all__ = ["MAX_RESULTS", "SEARCH_TOOL_NAME", "build_search_tool", "search_skills"]

SEARCH_TOOL_NAME = "search_skills"

MAX_RESULTS = 50
"""The most results one search returns, whatever ``limit`` asks."""


def search_skills(
    listing: RankedListing, snapshot: SkillSnapshot, query: str, limit: int = 10
) -> str:
    """The best ``limit`` (1 to ``MAX_RESULTS``) skills for ``query``, one line each."""
    if not query.strip():
        return "Give a few keywords, e.g. search_skills(query='pdf forms')."
    best = listing.search(snapshot, query, max(1, min(limit, MAX_RESULTS)))
    if not best:
        return f"No skill matches {quoted(query)}. Try other or fewer keywords."
    lines = [markdown_line(entry) for entry in best]
    return f"Best matches for {quoted(query)}, best first:\n" + "\n".join(lines)


def build_search_tool(
    snapshot_of: Callable[[ToolContext], SkillSnapshot], listing: Callable[[], RankedListing]
) -> FunctionTool:
    """The ``search_skills`` tool; ``snapshot_of`` gives the calling thread's skills and
    ``listing`` the middleware's ranker (created on first use)."""

    async def search(query: str, limit: int = 10, *, ctx: ToolContext) -> str:
        """Find skills by keywords or a description of the task, when the skills list in the
        instructions is incomplete. Returns the best matching skills with their descriptions
        and SKILL.md paths; read one with read_file before using it."""
        return search_skills(listing(), snapshot_of(ctx), query, limit)

    return FunctionTool(search, name=SEARCH_TOOL_NAME)
