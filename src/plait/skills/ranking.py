"""Ranking skills by relevance to a text: the :class:`SkillRanker` protocol and the default
:class:`LexicalRanker` (BM25F over name and description).

A ranker holds an index of the catalog's skills. :meth:`SkillRanker.update` makes the index hold
exactly the given entries and re-indexes only those whose ``(ref, version)`` changed;
:meth:`SkillRanker.rank` returns the best entries for a query, best first. Both disclosure mode
(which skills the prompt lists, ``search_skills``) and managed mode (``list_skills(query=...)``)
use one. Plug in another (embeddings from your own model, a remote index) by implementing the two
methods; ``examples/skills_ranker.py`` shows a toy one.

:class:`LexicalRanker` is a small in-house inverted index. ``bm25s`` was measured first
(``bench/skills_relevance.py --bm25s``): it cannot update one document, so a refresh with one
changed skill re-indexes the whole catalog, and it needs numpy at import; see bench/README.md.

Tokens (:func:`terms`): words split at ``-``, ``_``, ``.``, ``/``, digits-letters and camelCase
boundaries (``pdfForms`` → ``pdf forms``; ``PDFs`` stays one word), case-folded, accents
removed, English stop words dropped and the Snowball stemmer of the ranker's language applied
(``snowballstemmer``: ``merging``/``merges``/``merge`` → ``merg``); runs of Chinese,
Japanese or Korean characters become overlapping character bigrams, so text without spaces
still matches. Every bound is documented on the constructor.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from plait.errors import ConfigurationError
from plait.skills.catalog import SkillCatalog
from plait.skills.model import SkillEntry, SkillRef

__all__ = [
    "DEFAULT_MAX_QUERY_CHARS",
    "CatalogRanking",
    "LexicalRanker",
    "SkillRanker",
    "stemmer",
    "terms",
]

DEFAULT_MAX_QUERY_CHARS = 4_000
"""Characters of a query that are read; the rest is ignored (a pasted file is not a query)."""

_MAX_TEXT_CHARS = 4_000
_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W_0-9A-Za-z]+")
_CJK_RUN = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+)")
_COMBINING = re.compile(r"[\u0300-\u036f]")
_STOP_WORDS = (
    "a about above after again all also an and any are as at be because been before being "
    "both but by can could did do does doing down during each etc few for from further had has "
    "have having he her here hers him his how i if in into is it its itself just let me more "
    "most my myself no nor not now of off on once only or other our ours out over own please "
    "same she should so some such than that the their theirs them then there these they this "
    "those through to too under until up very via was we were what when where which while who "
    "whom why will with would you your yours"
)
_STOP = frozenset(_STOP_WORDS.split())
_STEM_CACHE = 100_000


@functools.cache
def stemmer(language: str = "english") -> Callable[[str], str]:
    """The Snowball stemmer of ``language`` (any of ``snowballstemmer.algorithms()``), with a
    cache of up to 100,000 words (cleared when full). Raises :class:`ConfigurationError` for an
    unknown language."""
    import snowballstemmer  # with the ranker only: never when every skill fits the budget

    try:
        algorithm = snowballstemmer.stemmer(language)
    except KeyError:
        raise ConfigurationError(
            f"No Snowball stemmer for {language[:50]!r}; use one of "
            f"{', '.join(snowballstemmer.algorithms())}."
        ) from None
    stem_word = algorithm.stemWord
    cache: dict[str, str] = {}

    def stem(word: str) -> str:
        found = cache.get(word)
        if found is None:
            found = stem_word(word) if len(word) > 3 and word.isalpha() else word
            if len(cache) >= _STEM_CACHE:
                cache.clear()
            cache[word] = found
        return found

    return stem


def _pieces(word: str) -> Iterator[str]:
    """One word's tokens: camelCase and digit boundaries split, CJK runs as bigrams."""
    for piece in _CAMEL.findall(word):
        if piece.isascii():
            plural_acronym = len(piece) > 2 and piece[-1] == "s" and piece[:-1].isupper()
            yield piece[:-1].lower() if plural_acronym else piece.lower()
            continue
        for index, part in enumerate(_CJK_RUN.split(piece)):
            if not part:
                continue
            if index % 2 == 0:
                yield part.casefold()
            elif len(part) == 1:
                yield part
            else:
                yield from (part[i : i + 2] for i in range(len(part) - 1))


def terms(text: str, *, language: str = "english", max_chars: int = _MAX_TEXT_CHARS) -> list[str]:
    """The index terms of ``text`` (its first ``max_chars`` characters), in order, repeats kept,
    stemmed for ``language`` (see :func:`stemmer`).

    ``"Fill PDF-forms via fillPdfForm"`` → ``["fill", "pdf", "form", "fill", "pdf", "form"]``.
    """
    stem = stemmer(language)
    text = text[:max_chars]
    if not text.isascii():
        text = unicodedata.normalize("NFC", _COMBINING.sub("", unicodedata.normalize("NFKD", text)))
    out: list[str] = []
    for word in _WORD.findall(text):
        plain = word.isascii() and word.isalpha() and word.islower()
        for piece in (word,) if plain else _pieces(word):
            if piece not in _STOP and (len(piece) > 1 or not piece.isascii()):
                out.append(stem(piece))
    return out


@runtime_checkable
class SkillRanker(Protocol):
    """Ranks a catalog's skills by relevance to a query. Implementations must be deterministic:
    the same entries and query give the same list."""

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """Make the index hold exactly ``entries`` (catalog order); re-index only the ones whose
        ``(ref, version)`` is new. Called whenever the catalog changed."""
        ...

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """At most ``limit`` indexed entries relevant to ``query``, best first; ties in catalog
        order; ``[]`` when nothing is relevant (an empty or stop-word-only query)."""
        ...


@dataclass(slots=True)
class _Doc:
    key: int
    entry: SkillEntry
    terms: dict[str, float]
    length: float


class LexicalRanker:
    """BM25F over each skill's name (weighted ``name_weight``) and description.

    ``k1`` and ``b`` are the BM25 parameters (defaults 1.2 and 0.75). A query reads its first
    ``max_query_chars`` characters and at most ``max_query_terms`` distinct terms (the first
    ones); a skill's name and description are read to 4,000 characters each. ``language`` picks
    the Snowball stemmer (``"english"``; ``"german"``, ``"russian"``, ... for catalogs written in
    another language). Not thread-safe: one event loop uses it.
    """

    def __init__(
        self,
        *,
        name_weight: float = 3.0,
        k1: float = 1.2,
        b: float = 0.75,
        max_query_chars: int = DEFAULT_MAX_QUERY_CHARS,
        max_query_terms: int = 64,
        language: str = "english",
    ) -> None:
        if name_weight <= 0 or k1 < 0 or not 0 <= b <= 1 or max_query_chars < 1:
            raise ConfigurationError(
                "LexicalRanker needs name_weight > 0, k1 >= 0, 0 <= b <= 1 and "
                "max_query_chars >= 1."
            )
        if max_query_terms < 1:
            raise ConfigurationError("LexicalRanker needs max_query_terms >= 1.")
        self.name_weight, self.k1, self.b = name_weight, k1, b
        self.max_query_chars, self.max_query_terms = max_query_chars, max_query_terms
        stemmer(language)  # an unknown language fails here, not at the first query
        self.language = language
        self._docs: dict[tuple[SkillRef, str], _Doc] = {}
        self._by_key: dict[int, _Doc] = {}
        self._order: dict[int, int] = {}
        self._postings: dict[str, dict[int, float]] = {}
        self._total_length = 0.0
        self._norm_avg = 0.0
        self._next_key = 0
        self.indexed = 0
        """Entries (re)indexed since this ranker was made: a refresh adds only the changed."""

    def __len__(self) -> int:
        return len(self._docs)

    def update(self, entries: Sequence[SkillEntry]) -> None:
        """See :meth:`SkillRanker.update`. Cost: one dict lookup per entry, plus indexing the
        new or changed ones (and a pass over the index when the mean length drifts by 10%)."""
        keep: dict[tuple[SkillRef, str], _Doc] = {}
        added: list[_Doc] = []
        for entry in entries:
            ident = (entry.ref, entry.version)
            doc = self._docs.get(ident) or keep.get(ident)
            if doc is None:
                doc = self._new_doc(entry)
                added.append(doc)
            elif doc.entry is not entry:
                doc.entry = entry
            keep[ident] = doc
        for ident, doc in self._docs.items():
            if ident not in keep:
                self._remove(doc)
        self._docs = keep
        for doc in added:
            self._add(doc)
        self._order = {doc.key: i for i, doc in enumerate(keep.values())}
        mean = self._total_length / len(keep) if keep else 0.0
        if not self._norm_avg or abs(mean - self._norm_avg) > 0.1 * self._norm_avg:
            self._reweight(mean)

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """See :meth:`SkillRanker.rank`. Cost: the postings of the query's distinct terms."""
        if limit < 1 or not self._docs:
            return []
        wanted = list(
            dict.fromkeys(terms(query, language=self.language, max_chars=self.max_query_chars))
        )
        count = len(self._docs)
        scores: dict[int, float] = {}
        get = scores.get
        for term in wanted[: self.max_query_terms]:
            postings = self._postings.get(term)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
            for key, weight in postings.items():
                scores[key] = get(key, 0.0) + idf * weight
        order = self._order
        best = heapq.nsmallest(limit, scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
        return [self._by_key[key].entry for key, _ in best]

    # --- index maintenance --------------------------------------------------------------------

    def _new_doc(self, entry: SkillEntry) -> _Doc:
        weights: dict[str, float] = {}
        for term in terms(entry.name, language=self.language):
            weights[term] = weights.get(term, 0.0) + self.name_weight
        for term in terms(entry.description, language=self.language):
            weights[term] = weights.get(term, 0.0) + 1.0
        self._next_key += 1
        self.indexed += 1
        return _Doc(self._next_key, entry, weights, sum(weights.values()))

    def _bm25(self, tf: float, length: float) -> float:
        norm = self.k1 * (1.0 - self.b + self.b * length / (self._norm_avg or length or 1.0))
        return tf * (self.k1 + 1.0) / (tf + norm)

    def _add(self, doc: _Doc) -> None:
        self._by_key[doc.key] = doc
        self._total_length += doc.length
        for term, tf in doc.terms.items():
            self._postings.setdefault(term, {})[doc.key] = self._bm25(tf, doc.length)

    def _remove(self, doc: _Doc) -> None:
        del self._by_key[doc.key]
        self._total_length -= doc.length
        for term in doc.terms:
            postings = self._postings[term]
            del postings[doc.key]
            if not postings:
                del self._postings[term]

    def _reweight(self, mean: float) -> None:
        """Recompute every posting's BM25 term weight for the new mean length."""
        self._norm_avg = mean
        for doc in self._by_key.values():
            for term, tf in doc.terms.items():
                self._postings[term][doc.key] = self._bm25(tf, doc.length)


class CatalogRanking:
    """A ranker kept in step with a catalog's active, model-invocable skills: re-indexed
    (incrementally, see :meth:`SkillRanker.update`) whenever the catalog's generation moved."""

    def __init__(self, catalog: SkillCatalog, ranker: SkillRanker | None = None) -> None:
        self.catalog = catalog
        self.ranker: SkillRanker = ranker if ranker is not None else LexicalRanker()
        self._generation = -1

    def rank(self, query: str, limit: int) -> list[SkillEntry]:
        """The best ``limit`` active skills for ``query`` (see :meth:`SkillRanker.rank`)."""
        if self._generation != self.catalog.generation:
            self.ranker.update([e for e in self.catalog.active() if e.meta.model_invocable])
            self._generation = self.catalog.generation
        return self.ranker.rank(query, limit)
