"""The evaluation set of ``bench/skills_relevance.py``: generated skills and user requests.

Skills are ``action x object x context`` combinations (25 actions, 60 objects, 40 contexts; each
action-object pair comes in several contexts), so many skills share words: ~170 mention "pdf",
~400 "extract", each pair has 6-7 near-twins that differ only in their context. Descriptions
follow eight templates with filler words every skill uses ("files", "report", "use when").

Descriptions also end with the author's keywords for the action, object and context
(``Keywords: spreadsheets, .xlsx, sheets and cells; ...``), as good skill descriptions do.
Requests are written from a separate vocabulary: each action, object and context has a list of
phrasings a user would type, and 12 request templates. The vocabulary is in
``bench/relevance_vocab.txt``. Some phrasings share a stem
with the description ("extract" / "extracting"), many do not ("pull the numbers out of",
"fillable PDFs", "in our amazon account"): a lexical ranker can only find those through the other
words of the request. The synonyms were written for this file, not copied from descriptions; the
request never contains the skill's name. Seeded: the same set every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

VOCABULARY = Path(__file__).with_name("relevance_vocab.txt")


@dataclass(frozen=True, slots=True)
class Term:
    """One action, object or context: its slug (in skill names), the phrase and the author's
    keywords that descriptions use, and the phrasings requests use."""

    slug: str
    phrase: str
    keywords: str
    asks: tuple[str, ...]


def _sections(path: Path) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        else:
            current.append(line)
    return sections


def _terms(lines: list[str]) -> list[Term]:
    out = []
    for line in lines:
        slug, phrase, keywords, asks = (part.strip() for part in line.split("|"))
        out.append(Term(slug, phrase, keywords, tuple(a.strip() for a in asks.split(";"))))
    return out


_VOCAB = _sections(VOCABULARY)
ACTIONS = _terms(_VOCAB["actions"])
OBJECTS = _terms(_VOCAB["objects"])
CONTEXTS = _terms(_VOCAB["contexts"])
DESCRIPTIONS = _VOCAB["descriptions"]
REQUESTS = _VOCAB["requests"]

CONTEXTS_PER_PAIR = (6, 7)
_DOUBLED = [
    (f"{w} {d} ", f"{d} ")
    for w in ("the", "some", "my", "these", "all our", "our")
    for d in ("the", "our", "my")
]  # "help me clean the our message bus" -> "... clean our message bus"


@dataclass(frozen=True, slots=True)
class Case:
    skill: str
    request: str


def skill_name(action: str, obj: str, context: str) -> str:
    return f"{obj}-{action}-{context}"


def generate_skills(count: int, seed: int = 7) -> list[tuple[str, str]]:
    """``count`` ``(name, description)`` pairs; the first ``count`` of one fixed sequence, so a
    smaller catalog is a prefix of a larger one (shuffled so prefixes mix every domain)."""
    rng = random.Random(seed)
    triples: list[tuple[Term, Term, Term]] = []
    for action in ACTIONS:
        for obj in OBJECTS:
            contexts = rng.sample(CONTEXTS, rng.randint(*CONTEXTS_PER_PAIR))
            triples.extend((action, obj, context) for context in contexts)
    rng.shuffle(triples)
    out = []
    for action, obj, context in triples[:count]:
        verb = action.phrase.split(" ")[0]
        text = rng.choice(DESCRIPTIONS).format(
            Action=action.phrase,
            action=verb.lower() + action.phrase[len(verb) :],
            object=obj.phrase,
            context=context.phrase,
        )
        keywords = f" Keywords: {obj.keywords}; {action.keywords}; {context.keywords}."
        out.append((skill_name(action.slug, obj.slug, context.slug), text + keywords))
    return out


def generate_cases(names: list[str], count: int, seed: int = 11) -> list[Case]:
    """``count`` requests, each for one generated skill among ``names``, from the user
    phrasings of its action, object and context and one of the request templates."""
    rng = random.Random(seed)
    by_slug = {t.slug: t for t in ACTIONS}
    objects = {t.slug: t for t in OBJECTS}
    contexts = {t.slug: t for t in CONTEXTS}
    cases = []
    for name in rng.sample(names, count):
        action, obj, context = _parse(name, by_slug, objects, contexts)
        request = rng.choice(REQUESTS).format(
            act=rng.choice(action.asks), obj=rng.choice(obj.asks), ctx=rng.choice(context.asks)
        )
        for doubled, single in _DOUBLED:
            request = request.replace(doubled, single)
        cases.append(Case(name, request[0].upper() + request[1:]))
    return cases


def _parse(
    name: str, actions: dict[str, Term], objects: dict[str, Term], contexts: dict[str, Term]
) -> tuple[Term, Term, Term]:
    for slug, action in actions.items():
        marker = f"-{slug}-"
        if marker in name:
            obj, context = name.split(marker, 1)
            if obj in objects and context in contexts:
                return action, objects[obj], contexts[context]
    raise ValueError(name)


# Requests for the bundled example skills (examples/skills), phrased independently.
EXAMPLE_CASES = [
    Case("commit-message", "Write a good message for the changes I staged"),
    Case("commit-message", "what should I put as the git commit summary for this diff?"),
    Case("csv-insights", "Give me some quick stats about this comma separated export"),
    Case("csv-insights", "what trends are in sales.csv? totals per region please"),
    Case("release-notes", "Draft the changelog for version 2.3 from the merged PRs"),
    Case("release-notes", "we're shipping 1.0 tomorrow, write up what's new for users"),
    Case("skill-authoring", "I want to create a new SKILL.md for our deploy process"),
    Case("skill-authoring", "how should I structure an agent skill folder?"),
]
