"""An optional semantic ranker: :class:`EmbeddingRanker` embeds each skill with the user's own
text -> vector function and fuses that order with the lexical one (reciprocal-rank fusion).

It implements :class:`~plait.skills.ranking.SkillRanker`, so it plugs in wherever a ranker does
(``SkillsMiddleware(ranker=...)``, ``SkillManager``). It needs numpy (``pip install
'plait[embeddings]'``), imported when the first ranker is made, never by plait otherwise. plait
ships no model: ``embed`` is any callable from a batch of texts to one vector per text (a
sentence-transformers model's ``encode``, an HTTP embedding API, ...); ``examples/
skills_embeddings.py`` wires a sentence-transformers model.

* **What is embedded**: ``"{name}: {description}"`` of each skill (to ``max_text_chars``).
* **Cache**: vectors are kept by the SHA-256 of that text and ``model``, so a refresh embeds only
  new or changed skills; with ``cache_path`` they are also saved to one ``.npz`` file (written
  atomically after an update that embedded something) and read back by the next process, so a
  restart embeds nothing. A cache file for another ``model`` or of another vector size is
  ignored (the size shows at the first ``embed`` call); so is one holding more than
  ``max_cache_vectors`` rows or 16,384 columns (checked from its array headers before reading),
  non-finite values, or anything unreadable (empty, cut short): it is rewritten (only a
  cache). At most ``max_cache_vectors`` vectors are kept: the ones of skills no longer indexed
  go first.
* **Query**: the query's first ``max_query_chars`` characters are embedded (one ``embed`` call
  per :meth:`~EmbeddingRanker.rank`), compared by cosine with every skill, and the best ``depth``
  of that order and of the lexical ranker's are fused: each skill scores
  ``sum(1 / (fusion_k + rank))`` over the orders it appears in (ranks from 1), ties in catalog
  order. A query with no text returns ``[]``.
* **Errors**: an exception raised by ``embed`` propagates unchanged (the turn fails with it, as a
  failing tool would); ``embed`` returning the wrong number of vectors, vectors of different
  sizes, or non-finite values raises :class:`~plait.errors.ConfigurationError`.

``embed`` runs on the caller's thread (the event loop for a turn): keep it fast or local. The
first :meth:`~EmbeddingRanker.update` embeds every skill, in the turn that first ranks: with
all-MiniLM-L6-v2 on a loaded 2-core CPU, 10,000 skills took 15 minutes (``bench/README.md``), so
warm it before serving (``ranker.update(entries)`` once, or a ``cache_path`` filled earlier:
reading it back took 0.4 s).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plait.errors import ConfigurationError
from plait.skills.model import SkillEntry
from plait.skills.ranking import DEFAULT_MAX_QUERY_CHARS, LexicalRanker, SkillRanker

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

__all__ = ["DEFAULT_FUSION_K", "EmbedFunction", "EmbeddingRanker"]

EmbedFunction = Callable[[list[str]], Any]
"""A batch of texts -> one vector per text (a list of float lists or a 2-D array)."""

DEFAULT_FUSION_K = 60
"""Reciprocal-rank fusion's constant (the value of Cormack et al.)."""

_BATCH = 64

_MAX_CACHE_DIMS = 16_384
"""The widest vectors a cache file may hold (the largest common embedding models use 4,096)."""


class EmbeddingRanker:
    """Embedding similarity fused with a lexical ranker; see the module docstring.

    ``embed`` maps a list of texts to their vectors. ``model`` names the model in the cache (change
    it when the model changes). ``lexical`` is the ranker fused with (default a new
    :class:`~plait.skills.ranking.LexicalRanker`; ``None`` is not accepted: pass
    ``fuse=False`` for embeddings only). ``depth`` (128) is how many of each order are fused;
    ``batch_size`` (64) texts go to one ``embed`` call; skill texts are read to
    ``max_text_chars`` (2,000) and queries to ``max_query_chars`` (4,000) characters;
    ``max_cache_vectors`` (200,000) bounds the cache. Not thread-safe: one event loop uses it.
    """

    def __init__(
        self,
        embed: EmbedFunction,
        *,
        model: str = "default",
        lexical: SkillRanker | None = None,
        fuse: bool = True,
        fusion_k: int = DEFAULT_FUSION_K,
        depth: int = 128,
        cache_path: str | os.PathLike[str] | None = None,
        batch_size: int = _BATCH,
        max_text_chars: int = 2_000,
        max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
        max_cache_vectors: int = 200_000,
    ) -> None:
        if fusion_k < 1 or depth < 1 or batch_size < 1 or max_cache_vectors < 1:
            raise ConfigurationError(
                "EmbeddingRanker needs fusion_k, depth, batch_size and max_cache_vectors >= 1."
            )
        if max_text_chars < 1 or max_query_chars < 1:
            raise ConfigurationError("EmbeddingRanker needs max_text_chars, max_query_chars >= 1.")
        import numpy  # the embeddings extra: imported only when an EmbeddingRanker is made

        self._np = numpy
        self.embed, self.model = embed, model
        self.lexical: SkillRanker | None = (lexical or LexicalRanker()) if fuse else None
        self.fusion_k, self.depth, self.batch_size = fusion_k, depth, batch_size
        self.max_text_chars, self.max_query_chars = max_text_chars, max_query_chars
        self.max_cache_vectors = max_cache_vectors
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self._cache: dict[str, Matrix] = {}
        self._dims = 0
        self._dims_from_file = False
        self._entries: list[SkillEntry] = []
        self._position: dict[int, int] = {}
        self._matrix: Matrix = numpy.zeros((0, 0), dtype=numpy.float32)
        self._cache_loaded = False
        self.embedded = 0
        """Skill texts embedded since this ranker was made (not counting queries)."""

    def __len__(self) -> int:
        return len(self._entries)

    def _text(self, entry: SkillEntry) -> str:
        return f"{entry.name}: {entry.description}"[: self.max_text_chars]

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model}\0{text}".encode()).hexdigest()

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """See :meth:`SkillRanker.update`: embeds the skills whose text is not cached yet (in
        batches of ``batch_size``), then rebuilds the similarity matrix and updates ``lexical``."""
        if not self._cache_loaded:
            self._cache_loaded = True
            self._load_cache()
        np = self._np
        entries = list(entries)
        keys = [self._key(self._text(e)) for e in entries]
        pending = self._embed_missing(keys, entries)
        if any(k not in self._cache for k in keys):  # the first embed dropped the cache file's
            pending += self._embed_missing(keys, entries)  # vectors (another vector size)
        self.embedded += len(pending)
        self._entries = entries
        self._position = {id(e): i for i, e in enumerate(entries)}
        rows = [self._cache[k] for k in keys]
        self._matrix = np.stack(rows) if rows else np.zeros((0, self._dims), dtype=np.float32)
        self._trim(set(keys))
        if pending and self.cache_path is not None:
            self._save_cache()
        if self.lexical is not None:
            self.lexical.update(entries)

    def _embed_missing(self, keys: list[str], entries: list[SkillEntry]) -> list[str]:
        missing = {k: self._text(e) for k, e in zip(keys, entries, strict=True)}
        pending = [(k, t) for k, t in missing.items() if k not in self._cache]
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            vectors = self._vectors([text for _, text in batch])
            for (key, _), vector in zip(batch, vectors, strict=True):
                self._cache[key] = vector
        return [k for k, _ in pending]

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """See :meth:`SkillRanker.rank`: the fused order (or the embedding order alone when
        ``fuse=False``)."""
        query = query[: self.max_query_chars]
        if limit < 1 or not self._entries or not query.strip():
            return []
        np = self._np
        vector = self._vectors([query])[0]
        if vector.shape[0] != self._matrix.shape[1]:  # the cache file held another vector size
            self.update(self._entries)
        order: list[int] = []
        if vector.any():  # a query the model maps to zero (no text it knows) has no order
            similarity = self._matrix @ vector
            depth = min(self.depth, len(self._entries))
            best = np.argpartition(-similarity, depth - 1)[:depth]
            order = sorted(best.tolist(), key=lambda i: (-float(similarity[i]), i))
        if self.lexical is None:
            return [self._entries[i] for i in order[:limit]]
        position = self._position
        found = self.lexical.rank(query, self.depth)
        lexical = [position[id(e)] for e in found if id(e) in position]
        fused: dict[int, float] = {}
        for ranking in (order, lexical):
            for rank, index in enumerate(ranking, 1):
                fused[index] = fused.get(index, 0.0) + 1.0 / (self.fusion_k + rank)
        top = heapq.nsmallest(limit, fused.items(), key=lambda kv: (-kv[1], kv[0]))
        return [self._entries[i] for i, _ in top]

    # --- vectors ------------------------------------------------------------------------------

    def _vectors(self, texts: list[str]) -> Matrix:
        """``embed(texts)`` checked and scaled to unit length (a zero vector stays zero)."""
        np = self._np
        try:
            matrix = np.asarray(self.embed(texts), dtype=np.float32)
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
        if self._dims and matrix.shape[1] != self._dims and self._dims_from_file:
            self._cache.clear()  # vectors read from a cache file of another model: drop them
        elif self._dims and matrix.shape[1] != self._dims:
            raise ConfigurationError(
                f"EmbeddingRanker's embed returned {matrix.shape[1]}-dimensional vectors after "
                f"{self._dims}-dimensional ones; use one model (or a new ranker per model)."
            )
        if not np.isfinite(matrix).all():
            raise ConfigurationError("EmbeddingRanker's embed returned NaN or infinite values.")
        self._dims, self._dims_from_file = matrix.shape[1], False
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1.0, norms)  # type: ignore[no-any-return]

    def _trim(self, live: set[str]) -> None:
        extra = len(self._cache) - self.max_cache_vectors
        if extra > 0:
            for key in [k for k in self._cache if k not in live][:extra]:
                del self._cache[key]

    def _load_cache(self) -> None:
        """Read the cache file back, or ignore it (it is only a cache): another ``model``, more
        than ``max_cache_vectors`` rows or ``_MAX_CACHE_DIMS`` columns (checked from the array
        headers before any data is read), non-finite values, or anything unreadable."""
        path = self.cache_path
        if path is None or not path.is_file():
            return
        np = self._np
        try:
            if not self._cache_within_bounds(path):
                return
            with np.load(path, allow_pickle=False) as data:
                if str(data["model"]) != self.model:
                    return
                keys, vectors = data["keys"].tolist(), data["vectors"].astype(np.float32)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return  # only a cache: rebuilt and rewritten by the next update that embeds
        if vectors.ndim != 2 or len(keys) != len(vectors) or not np.isfinite(vectors).all():
            return
        if not all(isinstance(key, str) for key in keys):
            return
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self._dims, self._dims_from_file = vectors.shape[1], True
        self._cache.update(zip(keys, vectors / np.where(norms == 0, 1.0, norms), strict=True))

    def _cache_within_bounds(self, path: Path) -> bool:
        np = self._np
        with zipfile.ZipFile(path) as archive:
            for member in ("keys.npy", "vectors.npy"):
                with archive.open(member) as file:
                    version = np.lib.format.read_magic(file)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape = read_header(file)[0]
                if not shape or shape[0] > self.max_cache_vectors:
                    return False
                if member == "vectors.npy" and (len(shape) != 2 or shape[1] > _MAX_CACHE_DIMS):
                    return False
        return True

    def _save_cache(self) -> None:
        assert self.cache_path is not None
        np = self._np
        keys = list(self._cache)
        path = self.cache_path
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as file:
                np.savez(
                    file,
                    model=np.array(self.model),
                    keys=np.array(keys),
                    vectors=np.stack([self._cache[k] for k in keys]),
                )
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
