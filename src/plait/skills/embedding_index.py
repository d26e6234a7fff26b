"""The vector matrices of :class:`~plait.skills.embedding.EmbeddingRanker`, kept incrementally.

Each indexed skill (keyed by ``(source_id, id, version, name, description)``: an entry whose
text changed without a new version is a new skill) owns a *slot*: a row of the whole-text
matrix and a row of the clause table, whose cells are rows of the distinct clause vectors
(shared by the skills that have the same clause, counted, freed when none has it). A refresh
costs a dict lookup per entry, and for each new or changed skill its texts, keys and rows; a
removed skill leaves a hole that a later skill reuses. When the holes pass half the rows (of
either matrix, at least 64 of them) the matrices are compacted, costing a copy of the live rows.
``order`` maps catalog positions to slots, so scores computed over the slots are put in catalog
order by one gather of the score vector (the matrices are never reordered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.skills.model import SkillEntry

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
    Indices = npt.NDArray[np.intp]

__all__: list[str] = []

Ident = tuple[str, str, str, str, str]

_MIN_HOLES = 64
"""Holes tolerated whatever the fraction (compacting a small index gains nothing)."""


class _Doc:
    __slots__ = ("ident", "keys", "slot")

    def __init__(self, ident: Ident, keys: list[str]) -> None:
        self.ident, self.keys = ident, keys  # the whole text's key, then its clauses'
        self.slot = -1


@dataclass
class Plan:
    """An update computed by :meth:`SkillVectors.plan`: each entry's doc, the doc table, the
    texts by key of the new docs (to embed or find in the cache), the docs to release, and the
    positions that changed (``None``: all may have)."""

    entries: list[SkillEntry]
    catalog: list[_Doc]
    table: dict[Ident, _Doc]
    wanted: dict[str, str]
    removed: list[_Doc]
    moved: list[int] | None

    def new(
        self,
        ident: Ident,
        entry: SkillEntry,
        texts: Callable[[SkillEntry], list[str]],
        key: Callable[[str], str],
    ) -> _Doc:
        group = texts(entry)
        doc = _Doc(ident, [key(t) for t in group])
        self.wanted.update(zip(doc.keys, group, strict=True))
        return doc

    def added(self) -> list[_Doc]:
        return [d for d in self.table.values() if d.slot < 0]


class SkillVectors:
    """Whole-text rows by slot, distinct clause rows, and the catalog order (module docstring).
    ``live`` counts the skills using each key (whole texts and clauses): the cache keeps them.
    """

    def __init__(self, np: Any, clauses: int) -> None:
        self._np, self.clauses = np, clauses
        self.docs: dict[Ident, _Doc] = {}
        self.live: dict[str, int] = {}
        self.clear()

    def clear(self) -> None:
        """Forget every skill (the vectors are of another size)."""
        np = self._np
        self.docs.clear()
        self.live.clear()
        self.whole: Matrix = np.zeros((0, 0), dtype=np.float32)
        self.clause_vectors: Matrix = np.zeros((0, 0), dtype=np.float32)
        self.clause_table: Indices = np.full((0, self.clauses), -1, dtype=np.intp)
        self.order: Indices = np.zeros(0, dtype=np.intp)
        self.entries: list[SkillEntry] = []
        self.catalog: list[_Doc] = []
        self._unique = True
        self._free: list[int] = []
        self._used = 0
        self._clause_row: dict[str, int] = {}
        self._clause_refs: dict[str, int] = {}
        self._free_clauses: list[int] = []
        self._clauses_used = 0

    @property
    def dims(self) -> int:
        return int(self.whole.shape[1])

    def plan(
        self,
        entries: list[SkillEntry],
        texts: Callable[[SkillEntry], list[str]],
        key: Callable[[str], str],
    ) -> Plan:
        """What :meth:`apply` will do to hold ``entries``; changes nothing. When the catalog
        has as many entries as the last one, no two of the same skill, and at most one in 16
        (or 8) are other objects at their position, only those are looked at."""
        old = self.entries
        if self._unique and len(old) == len(entries):
            moved = [i for i, (a, b) in enumerate(zip(entries, old, strict=True)) if a is not b]
            if len(moved) <= max(8, len(entries) // 16):
                plan = self._plan_moved(entries, moved, texts, key)
                if plan is not None:
                    return plan
        docs = self.docs
        made = Plan(entries, [], {}, {}, [], None)
        for entry in entries:
            ident = (entry.source_id, entry.id, entry.version, entry.name, entry.description)
            doc = made.table.get(ident) or docs.get(ident) or made.new(ident, entry, texts, key)
            made.table[ident] = doc
            made.catalog.append(doc)
        made.removed = [d for i, d in docs.items() if made.table.get(i) is not d]
        return made

    def _plan_moved(
        self,
        entries: list[SkillEntry],
        moved: list[int],
        texts: Callable[[SkillEntry], list[str]],
        key: Callable[[str], str],
    ) -> Plan | None:
        """The plan when only the entries at ``moved`` are other objects, or ``None`` when one
        of them is a skill found at another position too (the full plan handles duplicates)."""
        docs, catalog = self.docs, list(self.catalog)
        made = Plan(entries, catalog, dict(docs), {}, [], moved)
        for index in moved:
            del made.table[catalog[index].ident]
        for index in moved:
            entry = entries[index]
            ident = (entry.source_id, entry.id, entry.version, entry.name, entry.description)
            if ident in made.table:
                return None
            doc = docs.get(ident) or made.new(ident, entry, texts, key)
            made.table[ident] = catalog[index] = doc
        made.removed = [
            d for d in (self.catalog[i] for i in moved) if made.table.get(d.ident) is not d
        ]
        return made

    def apply(self, plan: Plan, vectors: dict[str, Matrix]) -> None:
        """Make the index hold ``plan``'s entries; ``vectors`` holds every new doc's keys."""
        np = self._np
        for doc in plan.removed:
            self._release(doc)
        for doc in plan.added():
            self._place(doc, vectors)
        self.docs, self.catalog, self.entries = plan.table, plan.catalog, plan.entries
        self._unique = len(plan.table) == len(plan.catalog)
        if len(self._free) > max(_MIN_HOLES, self._used // 2) or len(self._free_clauses) > max(
            _MIN_HOLES, self._clauses_used // 2
        ):
            self._compact()
        elif plan.moved is not None:
            for index in plan.moved:
                self.order[index] = plan.catalog[index].slot
            return
        self.order = np.fromiter(
            (d.slot for d in plan.catalog), dtype=np.intp, count=len(plan.catalog)
        )

    def _release(self, doc: _Doc) -> None:
        live, refs = self.live, self._clause_refs
        for key in doc.keys:
            if live[key] == 1:
                del live[key]
            else:
                live[key] -= 1
        self._free.append(doc.slot)
        for key in doc.keys[1:]:
            if refs[key] == 1:
                del refs[key]
                self._free_clauses.append(self._clause_row.pop(key))
            else:
                refs[key] -= 1
        self.clause_table[doc.slot] = -1

    def _place(self, doc: _Doc, vectors: dict[str, Matrix]) -> None:
        np, live, refs, rows = self._np, self.live, self._clause_refs, self._clause_row
        first = vectors[doc.keys[0]]
        if not self.whole.shape[1]:
            self.whole = np.zeros((0, len(first)), dtype=np.float32)
            self.clause_vectors = np.zeros((0, len(first)), dtype=np.float32)
        for key in doc.keys:
            live[key] = live.get(key, 0) + 1
        if self._free:
            doc.slot = self._free.pop()
        else:
            doc.slot = self._used
            self._used += 1
            if self._used > len(self.whole):
                self.whole = _grown(np, self.whole, self._used, 0.0)
                self.clause_table = _grown(np, self.clause_table, self._used, -1)
        self.whole[doc.slot] = first
        for column, key in enumerate(doc.keys[1:]):
            row = rows.get(key)
            if row is None:
                row = rows[key] = self._clause_slot()
                self.clause_vectors[row] = vectors[key]
            refs[key] = refs.get(key, 0) + 1
            self.clause_table[doc.slot, column] = row

    def _clause_slot(self) -> int:
        if self._free_clauses:
            return self._free_clauses.pop()
        row = self._clauses_used
        self._clauses_used += 1
        if self._clauses_used > len(self.clause_vectors):
            self.clause_vectors = _grown(self._np, self.clause_vectors, self._clauses_used, 0.0)
        return row

    def _compact(self) -> None:
        """Copy the live rows to new matrices without holes (slots renumbered in table order)."""
        np, docs = self._np, list(self.docs.values())
        slots = np.fromiter((d.slot for d in docs), dtype=np.intp, count=len(docs))
        old_rows = np.fromiter(
            self._clause_row.values(), dtype=np.intp, count=len(self._clause_row)
        )
        remap = np.full(max(len(self.clause_vectors), 1), -1, dtype=np.intp)
        remap[old_rows] = np.arange(len(old_rows))
        table = self.clause_table[slots]
        self.clause_table = np.where(table >= 0, remap[np.maximum(table, 0)], -1)
        self.whole = self.whole[slots]
        self.clause_vectors = self.clause_vectors[old_rows]
        for index, doc in enumerate(docs):
            doc.slot = index
        self._clause_row = dict(zip(self._clause_row, range(len(old_rows)), strict=True))
        self._free, self._used = [], len(docs)
        self._free_clauses, self._clauses_used = [], len(old_rows)


def _grown(np: Any, matrix: Any, needed: int, fill: float) -> Any:
    """``matrix`` with at least ``needed`` rows (doubling), the new ones ``fill``."""
    out = np.full((max(needed, 2 * len(matrix), 16), *matrix.shape[1:]), fill, dtype=matrix.dtype)
    out[: len(matrix)] = matrix
    return out
