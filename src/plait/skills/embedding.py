"""An optional semantic ranker: :class:`EmbeddingRanker` embeds each skill with the user's own
text -> vector function and combines that with the lexical ranker.

It implements :class:`~plait.skills.ranking.SkillRanker`, so it plugs in wherever a ranker does
(``SkillsMiddleware(ranker=...)``, ``SkillManager``). It needs numpy (``pip install
'plait[embeddings]'``), imported when the first ranker is made, never by plait otherwise. plait
ships no model: ``embed`` is any callable from a batch of texts to one vector per text (a
sentence-transformers model's ``encode``, an HTTP embedding API, ...); ``examples/
skills_embeddings.py`` wires a sentence-transformers model.

* **What is embedded** (each vector scaled to unit length): ``"{name}: {description}"`` of each
  skill (to ``max_text_chars``), and its *clauses*, at most ``clauses`` (8) of them: the name's
  words, then the description's sentences and ``;``-separated groups (:func:`skill_clauses`).
  Near-twin skills differ in one clause, which one vector of the whole text blurs.
* **Query** (its first ``max_query_chars`` characters; one ``embed`` call per
  :meth:`~EmbeddingRanker.rank`): the whole query and up to ``query_pieces`` (16) windows of
  ``query_window`` (3) consecutive words spread over it (:func:`query_pieces`): a request mixes
  several aspects (what to do, to what, where), each a few words long.
* **Order**, in two stages (measured in ``bench/README.md``):

  1. every skill: cosine of the whole query with the whole skill text, combined with the
     lexical ranker's score (its best ``depth``; 0 for the others);
  2. the best ``rescore`` (128) of stage 1 are scored again by *late interaction*: the sum over
     the query and its pieces of (the best cosine with one of the skill's clauses + the cosine
     with its whole text), combined with the lexical score again. They come first, in that
     order; the others follow in stage 1's order.

  ``fusion="score"`` (default) combines as ``weight * z(embedding) + (1 - weight) * z(lexical)``,
  ``z`` being the scores standardised over the skills scored (mean 0, deviation 1; all 0 when
  they are all equal, as with a query no skill's words match), ``weight`` 0.7;
  ``fusion="rank"`` adds reciprocal ranks instead, ``1 / (fusion_k + rank)`` over each order's
  best ``depth``. ``fuse=False`` uses the embedding scores alone. Ties go to catalog
  order. A query with no text returns ``[]``; one the model maps to a zero vector gets the
  lexical order alone (``[]`` with ``fuse=False``).
* **Cache**: vectors are kept by the SHA-256 of ``model`` and the text, so a refresh embeds only
  new or changed texts (clauses shared by many skills are embedded once); with ``cache_path``
  they are also saved to one ``.npz`` file (written atomically by an update once the vectors
  embedded since the last write reach ``save_fraction`` of the cache or ``save_interval``
  passed, and by :meth:`~EmbeddingRanker.flush`; :mod:`plait.skills.vector_cache` says which
  files are ignored: another ``model``, another format, such as files written before skills had
  clauses, too large, unreadable) and read back by the next process, so a restart after a flush
  embeds nothing. A cached vector of another size (an older model of the same name) is dropped
  at the first ``embed`` call that shows it. At most ``max_cache_vectors`` vectors are kept, the
  ones of skills no longer indexed going first (those of indexed skills stay in memory past it;
  the file holds ``max_cache_vectors``, the indexed first, so a larger catalog embeds only the
  rest after a restart).
* **Memory**: ``4 * dims`` bytes a vector, the indexed ones twice (cache and matrices, which
  grow by doubling and keep the holes of removed skills up to half their rows), nothing kept
  per query. 10,000 skills of four sentences (60,000 texts, 384 dimensions) took 250 MB;
  after five refreshes that changed half of them, the cache held 185,000 vectors: 480 MB. The
  cache may grow to ``max_cache_vectors`` (2.4 GB at 3,072 dimensions): lower it for wide
  vectors.
* **Errors**: an exception raised by ``embed`` propagates unchanged (the turn fails with it, as a
  failing tool would); ``embed`` returning the wrong number of vectors, vectors of different
  sizes, or non-finite values raises :class:`~plait.errors.ConfigurationError`, as do bad
  options and a ``cache_path`` that cannot be written (raised once the update itself is done:
  the ranker ranks the new skills). An ``embed`` failing part way through an update leaves the
  previous skills indexed; the batches it embedded before are cached.

``embed`` runs on the caller's thread (the event loop for a turn): keep it fast or local. A
refresh costs a dict lookup per unchanged skill (2 ms at 10,000 skills: ``bench/README.md``)
plus embedding the changed ones. The first :meth:`~EmbeddingRanker.update` embeds every skill,
in the turn that first ranks: with all-MiniLM-L6-v2 on a loaded 2-core CPU, 10,000 skills and
their clauses took 9 minutes (``bench/README.md``), so warm it before serving
(``ranker.update(entries)`` once, or a ``cache_path`` filled earlier: reading it back took 0.7
s). With a static model (model2vec), late interaction did worse than whole texts: pass
``clauses=0, query_pieces=0, rescore=0``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from plait.errors import ConfigurationError
from plait.skills.embedding_index import SkillVectors
from plait.skills.model import SkillEntry
from plait.skills.ranking import DEFAULT_MAX_QUERY_CHARS, LexicalRanker, SkillRanker
from plait.skills.vector_cache import VectorCache, unit_rows

if TYPE_CHECKING:
    import os

    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]
    Indices = npt.NDArray[np.intp]

__all__ = [
    "DEFAULT_CLAUSES",
    "DEFAULT_DEPTH",
    "DEFAULT_FUSION_K",
    "DEFAULT_QUERY_PIECES",
    "DEFAULT_QUERY_WINDOW",
    "DEFAULT_RESCORE",
    "DEFAULT_WEIGHT",
    "EmbedFunction",
    "EmbeddingRanker",
    "Fusion",
    "query_pieces",
    "skill_clauses",
]

EmbedFunction = Callable[[list[str]], Any]
"""A batch of texts -> one vector per text (a list of float lists or a 2-D array)."""

Fusion = Literal["score", "rank"]
"""How embedding and lexical scores combine: standardised scores or reciprocal ranks."""

DEFAULT_FUSION_K = 60
"""Reciprocal-rank fusion's constant (the value of Cormack et al.)."""

DEFAULT_WEIGHT = 0.7
"""The embedding's share of a ``fusion="score"`` combination (the lexical one has the rest)."""

DEFAULT_CLAUSES = 8
"""Clauses embedded per skill (name, sentences, ``;`` groups); 0: the whole text only."""

DEFAULT_QUERY_WINDOW = 3
"""Words per query piece."""

DEFAULT_QUERY_PIECES = 16
"""Query pieces embedded per query, besides the whole query; 0: the whole query only."""

DEFAULT_DEPTH = 512
"""How much of each order is combined (the lexical scores past it count as 0)."""

DEFAULT_RESCORE = 128
"""Skills of the first stage scored again by late interaction; 0: no second stage."""

_BATCH = 64
_CLAUSE_BREAK = re.compile(r"(?<=[.!?])\s+|;\s*|\n+")
_NAME_BREAK = re.compile(r"[-_]+")
_WORD = re.compile(r"\S+")


def skill_clauses(name: str, description: str, limit: int) -> list[str]:
    """The first ``limit`` distinct clauses of a skill: its name with ``-`` and ``_`` as spaces,
    then its description's sentences (ended by ``.``, ``!`` or ``?`` and a space), lines and
    ``;``-separated groups, each stripped of spaces and of ``.!?;:,`` at its end; empty ones
    are skipped. A ``limit`` below 1 gives none."""
    out: list[str] = []
    if limit < 1:
        return out
    for part in [_NAME_BREAK.sub(" ", name), *_CLAUSE_BREAK.split(description)]:
        clause = part.strip().rstrip(".!?;:,").strip()
        if clause and clause not in out:
            out.append(clause)
            if len(out) >= limit:
                break
    return out


def query_pieces(query: str, window: int, limit: int) -> list[str]:
    """Windows of ``window`` consecutive words (split at white space) of ``query``: every one
    when there are at most ``limit``, else ``limit`` spread evenly from the first to the last.
    A query of at most ``window`` words has none (its whole text is embedded anyway)."""
    words = _WORD.findall(query)
    count = len(words) - window + 1
    if window < 1 or limit < 1 or count < 2:
        return []
    if count <= limit:
        starts: Sequence[int] = range(count)
    elif limit == 1:
        starts = [0]
    else:
        starts = sorted({round(i * (count - 1) / (limit - 1)) for i in range(limit)})
    return [" ".join(words[start : start + window]) for start in starts]


class EmbeddingRanker:
    """Embedding similarity combined with a lexical ranker; see the module docstring.

    ``embed`` maps a list of texts to their vectors. ``model`` names the model in the cache
    (change it when the model changes). ``lexical`` is the ranker combined with (default a new
    :class:`~plait.skills.ranking.LexicalRanker`, whose scores ``fusion="score"`` uses; another
    ranker's order counts as the scores ``1 / (fusion_k + rank)``; ``None``, the default, means
    that new one, not no ranker: pass ``fuse=False`` for embeddings only). ``fusion``,
    ``weight`` (0.7, between 0 and 1), ``fusion_k`` (60), ``clauses`` (8), ``query_window`` (3),
    ``query_pieces`` (16) and ``rescore`` (128) are explained in the module docstring; ``depth``
    (512) is how much of the lexical order is used; ``batch_size`` (64) texts go to one
    ``embed`` call; skill texts are read to ``max_text_chars`` (2,000) and queries to
    ``max_query_chars`` (4,000) characters; ``max_cache_vectors`` (200,000) bounds the cache;
    ``save_fraction`` (0.05) and ``save_interval`` (300 s) say when an update writes the cache
    file (:meth:`flush`; 0 and 0: after every update that embedded something).
    Not thread-safe: one event loop uses it.
    """

    def __init__(
        self,
        embed: EmbedFunction,
        *,
        model: str = "default",
        lexical: SkillRanker | None = None,
        fuse: bool = True,
        fusion: Fusion = "score",
        weight: float = DEFAULT_WEIGHT,
        fusion_k: int = DEFAULT_FUSION_K,
        depth: int = DEFAULT_DEPTH,
        clauses: int = DEFAULT_CLAUSES,
        query_window: int = DEFAULT_QUERY_WINDOW,
        query_pieces: int = DEFAULT_QUERY_PIECES,
        rescore: int = DEFAULT_RESCORE,
        cache_path: str | os.PathLike[str] | None = None,
        batch_size: int = _BATCH,
        max_text_chars: int = 2_000,
        max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
        max_cache_vectors: int = 200_000,
        save_fraction: float = 0.05,
        save_interval: float = 300.0,
    ) -> None:
        if fusion_k < 1 or depth < 1 or batch_size < 1 or max_cache_vectors < 1:
            raise ConfigurationError(
                "EmbeddingRanker needs fusion_k, depth, batch_size and max_cache_vectors >= 1."
            )
        if not (save_fraction >= 0.0 and 0.0 <= save_interval < math.inf):
            raise ConfigurationError(
                "EmbeddingRanker needs save_fraction >= 0 and a finite save_interval >= 0 "
                f"(got {save_fraction}, {save_interval})."
            )
        if max_text_chars < 1 or max_query_chars < 1:
            raise ConfigurationError("EmbeddingRanker needs max_text_chars, max_query_chars >= 1.")
        if fusion not in ("score", "rank"):
            raise ConfigurationError(
                f"EmbeddingRanker's fusion is 'score' or 'rank', not {str(fusion)[:40]!r}."
            )
        if not 0.0 <= weight <= 1.0:
            raise ConfigurationError(f"EmbeddingRanker needs 0 <= weight <= 1 (got {weight}).")
        if min(clauses, query_pieces, rescore) < 0 or query_window < 1:
            raise ConfigurationError(
                "EmbeddingRanker needs clauses, query_pieces and rescore >= 0 (0 turns each "
                "off) and query_window >= 1."
            )
        import numpy  # the embeddings extra: imported only when an EmbeddingRanker is made

        self._np = numpy
        self.embed, self.model = embed, model
        if not fuse:  # an empty LexicalRanker is falsy (len 0): test for None, not truth
            self.lexical: SkillRanker | None = None
        else:
            self.lexical = lexical if lexical is not None else LexicalRanker()
        self.fusion, self.weight, self.fusion_k, self.depth = fusion, weight, fusion_k, depth
        self.clauses, self.query_window, self.query_pieces = clauses, query_window, query_pieces
        self.rescore, self.batch_size = rescore, batch_size
        self.max_text_chars, self.max_query_chars = max_text_chars, max_query_chars
        self.max_cache_vectors = max_cache_vectors
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._cache = VectorCache(model, self.cache_path, max_cache_vectors)
        self._entries: list[SkillEntry] = []
        self._position: dict[int, int] = {}
        self._index = SkillVectors(numpy, clauses)
        self.save_fraction, self.save_interval = save_fraction, save_interval
        self._unsaved, self._saved_at = 0, time.monotonic()
        self._cache_loaded = False
        self.embedded = 0
        """Skill texts and clauses embedded since this ranker was made (not counting queries)."""

    def __len__(self) -> int:
        return len(self._entries)

    def _text(self, entry: SkillEntry) -> str:
        return f"{entry.name}: {entry.description}"[: self.max_text_chars]

    def _key(self, text: str) -> str:
        return self._cache.key(text)

    def _texts(self, entry: SkillEntry) -> list[str]:
        """The skill's whole text, then its clauses (none when ``clauses`` is 0)."""
        text = self._text(entry)
        if not self.clauses:
            return [text]
        return [text, *skill_clauses(entry.name, text[len(entry.name) + 2 :], self.clauses)]

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """See :meth:`SkillRanker.update`: a dict lookup per unchanged skill; the texts (whole
        and clauses) of new or changed ones not cached yet are embedded (in batches of
        ``batch_size``) and their rows replaced (:mod:`plait.skills.embedding_index`); then
        ``lexical`` is updated and the cache file written if due (see :meth:`flush`)."""
        if not self._cache_loaded:
            self._cache_loaded = True
            self._cache.load()
        entries = list(entries)
        index = self._index
        plan = index.plan(entries, self._texts, self._key)
        wanted = plan.wanted
        embedded = len(self._embed_missing(wanted))
        if any(k not in self._cache.vectors for k in wanted):  # the first embed dropped the
            embedded += len(self._embed_missing(wanted))  # file's (another vector size)
        self._unsaved += embedded
        if index.docs and index.dims != self._cache.dims:  # indexed from those dropped vectors
            index.clear()
            self.update(entries)
            return
        index.apply(plan, self._cache.vectors)
        if plan.moved is None:
            self._position = {id(e): i for i, e in enumerate(entries)}
        else:  # only these positions hold other objects
            for i in plan.moved:
                del self._position[id(self._entries[i])]
            self._position.update((id(entries[i]), i) for i in plan.moved)
        self._entries = entries
        self._cache.trim(index.live)
        if self.lexical is not None:
            self.lexical.update(entries)
        if embedded and (  # last: a file that cannot be written leaves the ranker updated
            self._unsaved >= self.save_fraction * len(self._cache.vectors)
            or time.monotonic() - self._saved_at >= self.save_interval
        ):
            self.flush()

    def flush(self) -> None:
        """Write the cache file now if vectors were embedded since it was last written (nothing
        without ``cache_path``). :meth:`update` writes it itself when the unsaved vectors
        reach ``save_fraction`` (5%) of the cache or ``save_interval`` (300 s) passed since the
        last write (checked by updates that embed something; one that fails is tried again by
        the next), so one new skill in a large catalog does not rewrite the whole file (90 MB
        at 10,000 skills, 0.2 to 0.7 s); call it before the process exits: a process that
        did not embeds again, after a restart, only the vectors it had not written. Raises
        :class:`~plait.errors.ConfigurationError` when the file cannot be written."""
        if self._unsaved:
            self._cache.save(self._index.live)
            self._unsaved, self._saved_at = 0, time.monotonic()

    def _embed_missing(self, wanted: dict[str, str]) -> list[str]:
        vectors = self._cache.vectors
        pending = [(k, t) for k, t in wanted.items() if k not in vectors]
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            for (key, _), vector in zip(batch, self._vectors([t for _, t in batch]), strict=True):
                vectors[key] = vector
            self.embedded += len(batch)  # counted as they come: an exception keeps them
        return [k for k, _ in pending]

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """See :meth:`SkillRanker.rank`: the two-stage order of the module docstring."""
        query = query[: self.max_query_chars]
        if limit < 1 or not self._entries or not query.strip():
            return []
        np = self._np
        pieces = query_pieces(query, self.query_window, self.query_pieces)
        vectors = self._vectors([query, *pieces])
        if vectors.shape[1] != self._index.dims:  # the cache file held another vector size
            self._index.clear()
            self.update(self._entries)
        lexical = self._lexical_scores(query)
        if not vectors[0].any():  # a query the model maps to zero (no text it knows)
            if lexical is None:
                return []
            found = np.flatnonzero(lexical)
            return self._take(found, lexical[found], limit)
        whole = np.einsum("nd,d->n", self._index.whole, vectors[0])[self._index.order]
        first = self._combine(whole, lexical)
        count = len(self._entries)
        if not self.rescore:
            return self._take(np.arange(count), first, limit)
        candidates = self._best(first, min(self.rescore, count))
        late = self._late(candidates, vectors)
        second = self._combine(late, None if lexical is None else lexical[candidates])
        order = self._take(candidates, second, len(candidates))
        if limit > len(order):
            rest = np.ones(count, dtype=bool)
            rest[candidates] = False
            others = np.flatnonzero(rest)
            order += self._take(others, first[others], limit - len(order))
        return order[:limit]

    # --- scores -------------------------------------------------------------------------------

    def _lexical_scores(self, query: str) -> Matrix | None:
        """The lexical ranker's scores of every skill (0 past its best ``depth``), or ``None``
        without one. A ranker without ``scored`` (not a LexicalRanker) gives reciprocal ranks."""
        if self.lexical is None:
            return None
        np, position = self._np, self._position
        scored = getattr(self.lexical, "scored", None)
        pairs: list[tuple[SkillEntry, float]]
        if self.fusion == "score" and callable(scored):
            pairs = scored(query, self.depth)
        else:
            found = self.lexical.rank(query, self.depth)
            pairs = [(e, 1.0 / (self.fusion_k + r)) for r, e in enumerate(found, 1)]
        out: Matrix = np.zeros(len(self._entries), dtype=np.float32)
        for entry, score in pairs:
            index = position.get(id(entry))
            if index is not None:
                out[index] = score
        return out

    def _combine(self, embedding: Matrix, lexical: Matrix | None) -> Matrix:
        """One score per skill from the embedding's and the lexical ranker's (module docstring)."""
        np = self._np
        if lexical is None:
            return embedding
        if self.fusion == "score":
            return self.weight * _standard(np, embedding) + (1 - self.weight) * _standard(
                np, lexical
            )
        fused: Matrix = np.zeros(len(embedding), dtype=np.float32)
        for scores in (embedding, lexical):
            best = self._best(scores, min(self.depth, len(scores)))
            if scores is lexical:
                best = best[scores[best] > 0]
            fused[best] += 1.0 / (self.fusion_k + np.arange(1, len(best) + 1))
        return fused

    def _late(self, candidates: Indices, queries: Matrix) -> Matrix:
        """Late interaction: per candidate, the sum over the query vectors of (the best cosine
        with one of its clauses + the cosine with its whole text).

        Products go through ``einsum`` (numpy's own loop), not BLAS (``@``): these are small,
        and on a busy machine a multi-threaded BLAS waking its threads for each one took 10 to
        15 ms instead of 1 (``bench/README.md``)."""
        np, index = self._np, self._index
        slots = index.order[candidates]
        score: Matrix = np.einsum("nd,pd->n", index.whole[slots], queries)
        if self.clauses and index.clause_vectors.shape[1]:
            rows = index.clause_table[slots]
            count, width = rows.shape
            gathered = index.clause_vectors[np.maximum(rows, 0)].reshape(count * width, -1)
            cosines = np.einsum("nd,pd->np", gathered, queries).reshape(count, width, -1)
            cosines = np.where((rows >= 0)[:, :, None], cosines, -np.inf)
            best = cosines.max(axis=1)
            score = score + np.where(np.isfinite(best), best, 0.0).sum(axis=1)
        return score

    def _best(self, scores: Matrix, count: int) -> Indices:
        """The indices of the ``count`` highest scores, best first, ties in catalog order."""
        np = self._np
        if count < len(scores):
            threshold = np.partition(scores, len(scores) - count)[len(scores) - count]
            pool = np.flatnonzero(scores >= threshold)
        else:
            pool = np.arange(len(scores))
        ordered = pool[np.lexsort((pool, -scores[pool]))]
        return ordered[:count]  # type: ignore[no-any-return]

    def _take(self, indices: Indices, scores: Matrix, limit: int) -> list[SkillEntry]:
        """The entries at ``indices`` ordered by ``scores`` (parallel to them), the best
        ``limit``, ties in catalog order."""
        order = self._np.lexsort((indices, -scores))[:limit]
        return [self._entries[int(indices[i])] for i in order]

    # --- vectors ------------------------------------------------------------------------------

    def _vectors(self, texts: list[str]) -> Matrix:
        """``embed(texts)`` checked and scaled to unit length (a zero vector stays zero), in
        batches of ``batch_size``."""
        np = self._np
        if len(texts) > self.batch_size:  # a query and its pieces
            return np.concatenate(  # type: ignore[no-any-return]
                [
                    self._vectors(texts[start : start + self.batch_size])
                    for start in range(0, len(texts), self.batch_size)
                ]
            )
        returned = self.embed(texts)  # its own exceptions propagate unchanged
        try:
            matrix = np.asarray(returned, dtype=np.float32)
        except (TypeError, ValueError) as error:
            raise ConfigurationError(
                f"EmbeddingRanker's embed returned something that is not one vector per text "
                f"({error}); return a list of float lists or a 2-D array."
            ) from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or matrix.shape[1] < 1:
            raise ConfigurationError(
                f"EmbeddingRanker's embed returned shape {matrix.shape} for {len(texts)} texts; "
                "it must return one non-empty vector per text."
            )
        if self._cache.dims and matrix.shape[1] != self._cache.dims and self._cache.from_file:
            self._cache.vectors.clear()  # read from a cache file of another model: drop them
        elif self._cache.dims and matrix.shape[1] != self._cache.dims:
            raise ConfigurationError(
                f"EmbeddingRanker's embed returned {matrix.shape[1]}-dimensional vectors after "
                f"{self._cache.dims}-dimensional ones; use one model (or a new ranker per model)."
            )
        if not np.isfinite(matrix).all():
            raise ConfigurationError("EmbeddingRanker's embed returned NaN or infinite values.")
        self._cache.dims, self._cache.from_file = matrix.shape[1], False
        return unit_rows(np, matrix)


def _standard(np: Any, scores: Matrix) -> Matrix:
    """``scores`` less their mean, over their standard deviation (all 0 when that is 0)."""
    deviation = float(scores.std())
    if deviation == 0.0:
        return np.zeros_like(scores)  # type: ignore[no-any-return]
    return (scores - scores.mean()) / deviation  # type: ignore[no-any-return]
