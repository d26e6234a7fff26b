"""Which skills the prompt lists when the catalog is over its budget: chosen by relevance.

When every skill fits, the prompt lists them all in catalog order (the snapshot's shared
section) and nothing here runs; :mod:`plait.skills.ranking` is not even imported. Past the
budget, :class:`RankedListing` orders the thread's listed skills for each user turn:

1. **kept**: skills pinned or read in the request's messages (most recent first), then the
   middleware's ``always_listed`` names, then skills whose SKILL.md sets
   ``metadata: {always: "true"}``;
2. **relevant to the newest user message** (up to ``RANK_DEPTH`` by the ranker);
3. **relevant to recent context**: the previous ``CONTEXT_MESSAGES`` user messages and the
   latest assistant text (up to ``RANK_DEPTH``);
4. **the rest** in catalog order.

The budget cuts this order where it stops fitting: the skills are described while they fit in
the budget less the names tier's share (``names_share``; kept skills may use the whole budget),
the next ones are named without descriptions on one line while it fits, and the last line says
how many exist beyond both. The order is computed on the turn's first model call and kept for
the turn (only a new catalog snapshot within the turn, from a reset or ``auto_refresh``
seconds, computes it again), so the system prompt (and a provider's prompt cache of it) does
not change between the model calls of one turn; the same messages and catalog always give the
same list.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

from plait.messages import AssistantMessage, Message, UserMessage
from plait.skills.disclosure.scan import PINNED_SOURCE
from plait.skills.disclosure.snapshot import (
    DEFAULT_NAMES_SHARE,
    NAMES_INTRO,
    OVERFLOW_HINT,
    SkillSnapshot,
)
from plait.skills.model import SkillEntry
from plait.skills.render import PromptFormat, fit_prompt

if TYPE_CHECKING:
    from plait.skills.ranking import SkillRanker

__all__ = ["CONTEXT_CHARS", "CONTEXT_MESSAGES", "RANK_DEPTH", "RankedListing", "turn_queries"]

RANK_DEPTH = 256
"""Skills taken from each ranking: more than a 16k budget describes and names (about 45 + 150 at
the default share). 128 left the names tier's tail to catalog order at 16k (recall named 97.2%
against 97.9% at 10,000 skills); 512 cost 0.5 ms more per turn and listed no more."""

CONTEXT_MESSAGES = 3
"""Earlier user messages that make up the "recent context" query."""

CONTEXT_CHARS = 4_000
"""Characters of each query that are used (the newest message's, the recent context's)."""


def _flag(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


class _Ordered(Sequence[SkillEntry]):
    """``head``, then the other ``listed`` skills in catalog order, produced as they are read:
    the renderer stops where the budget is full, so a 10,000-skill catalog is never copied.
    Every ``head`` entry is one of ``listed``; ``seen`` holds their ids; the first ``kept`` are
    pinned, read or always listed."""

    def __init__(
        self, head: list[SkillEntry], listed: Sequence[SkillEntry], seen: set[int], kept: int
    ) -> None:
        self._head, self._listed, self._seen = head, listed, seen
        self.kept = kept
        self._all: list[SkillEntry] | None = None

    def __len__(self) -> int:
        return len(self._listed)

    def __iter__(self) -> Iterator[SkillEntry]:
        yield from self._head
        seen = self._seen
        yield from (e for e in self._listed if id(e) not in seen)

    @overload
    def __getitem__(self, index: int) -> SkillEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SkillEntry]: ...
    def __getitem__(self, index: int | slice) -> SkillEntry | Sequence[SkillEntry]:
        if self._all is None:
            self._all = list(self)
        return self._all[index]


def turn_queries(messages: Sequence[Message]) -> tuple[str, str]:
    """The newest user message's text and the recent context's, each at most ``CONTEXT_CHARS``.

    Pinned-skill messages are not user text and are skipped; so is every message older than
    the ``CONTEXT_MESSAGES`` user messages before the newest one.
    """
    newest: str | None = None
    context: list[str] = []
    assistant: str | None = None
    users = 0
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            if newest is not None and assistant is None and message.text:
                assistant = message.text[:CONTEXT_CHARS]
            continue
        if not isinstance(message, UserMessage) or message.metadata.get("source") == PINNED_SOURCE:
            continue
        if newest is None:
            newest = message.text[:CONTEXT_CHARS]
            continue
        context.append(message.text[:CONTEXT_CHARS])
        users += 1
        if users >= CONTEXT_MESSAGES:
            break
    if assistant:
        context.insert(0, assistant)
    return newest or "", "\n".join(context)[:CONTEXT_CHARS]


class RankedListing:
    """Orders and renders a snapshot's listed skills by relevance (see the module docstring).

    ``ranker`` holds the index of the newest snapshot (re-indexed incrementally when the
    catalog changes); a thread still on an older snapshot gets that snapshot's entries of the
    same names.
    """

    def __init__(self, ranker: SkillRanker, always_listed: Sequence[str] = ()) -> None:
        self.ranker = ranker
        self.always_listed = tuple(always_listed)
        self._indexed: SkillSnapshot | None = None
        self._flagged: tuple[SkillSnapshot, tuple[SkillEntry, ...]] | None = None

    def index(self, snapshot: SkillSnapshot) -> None:
        """Bring the ranker's index up to ``snapshot`` if it is newer than the indexed one."""
        if self._indexed is None or snapshot.generation > self._indexed.generation:
            self.ranker.update(snapshot.listed)
            self._indexed = snapshot

    def search(self, snapshot: SkillSnapshot, query: str, limit: int) -> list[SkillEntry]:
        """The ranker's best ``limit`` skills for ``query`` among ``snapshot``'s listed ones;
        a query that is a listed skill's exact name (as the names tier shows it, quotes
        allowed) puts that skill first."""
        self.index(snapshot)
        found = self._own(snapshot, self.ranker.rank(query, limit))
        exact = snapshot.by_name.get(query.strip().strip("\"'`"))
        if exact is None or not exact.meta.model_invocable or (found and found[0] is exact):
            return found
        return [exact, *(e for e in found if e is not exact)][: max(limit, 1)]

    def order(
        self, snapshot: SkillSnapshot, messages: Sequence[Message], kept: Sequence[str]
    ) -> _Ordered | None:
        """The listed skills in prompt order, or ``None`` when catalog order stands (nothing
        kept, nothing relevant). ``kept`` are SKILL.md locations disclosed in the messages."""
        self.index(snapshot)
        seen: set[int] = set()
        head: list[SkillEntry] = []

        def take(entries: Sequence[SkillEntry | None]) -> None:
            for entry in entries:
                if entry is not None and id(entry) not in seen and entry.meta.model_invocable:
                    seen.add(id(entry))
                    head.append(entry)

        take([snapshot.by_location.get(location) for location in reversed(kept)])
        take([snapshot.by_name.get(name) for name in self.always_listed])
        take(self._always_flagged(snapshot))
        kept_count = len(head)
        newest, context = turn_queries(messages)
        for query in (newest, context):
            if query:
                take(self._own(snapshot, self.ranker.rank(query, RANK_DEPTH)))
        if not head:
            return None
        return _Ordered(head, snapshot.listed, seen, kept_count)

    def render(
        self,
        snapshot: SkillSnapshot,
        messages: Sequence[Message],
        kept: Sequence[str],
        *,
        format: PromptFormat,
        budget: int | None,
        instructions: str | None,
        names_share: float = DEFAULT_NAMES_SHARE,
    ) -> str:
        """The prompt section for this turn: ``snapshot.section`` with the list re-ordered
        (``snapshot.section`` itself when nothing is kept or relevant), the names tier taking
        ``names_share`` of ``budget`` (give the snapshot's own share)."""
        ordered = self.order(snapshot, messages, kept)
        if ordered is None:
            return snapshot.section
        listing = fit_prompt(
            ordered,
            format,
            budget=budget,
            overflow_hint=OVERFLOW_HINT,
            names_share=names_share,
            names_intro=NAMES_INTRO,
            keep=ordered.kept,
        ).text
        parts = [listing, snapshot.note] if snapshot.note else [listing]
        head = [instructions] if instructions else []
        return "\n\n".join([*head, "\n".join(parts)])

    def _always_flagged(self, snapshot: SkillSnapshot) -> tuple[SkillEntry, ...]:
        """Skills whose SKILL.md says ``metadata: {always: "true"}``, found once per snapshot."""
        cached = self._flagged
        if cached is None or cached[0] is not snapshot:
            flagged = tuple(e for e in snapshot.listed if _flag(e.meta.metadata.get("always")))
            cached = self._flagged = (snapshot, flagged)
        return cached[1]

    @staticmethod
    def _own(snapshot: SkillSnapshot, found: list[SkillEntry]) -> list[SkillEntry]:
        """``found`` (from the indexed snapshot) mapped to ``snapshot``'s entries by name."""
        mapped = [snapshot.by_name.get(entry.name) for entry in found]
        return [e for e in mapped if e is not None and e.meta.model_invocable]
