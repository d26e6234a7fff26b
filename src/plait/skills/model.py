"""The skills data model: what a SKILL.md says (:class:`SkillMeta`), where a source found it
(:class:`SkillEntry`), what it failed to load (:class:`DiscoveryProblem`), and a skill loaded for
use (:class:`Skill`). All are frozen dataclasses; the catalog derives new ones, never mutates."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from plait.skills.diagnostics import Diagnostic, Severity

__all__ = [
    "RESOURCE_KINDS",
    "SPEC_FIELDS",
    "DiscoveryItem",
    "DiscoveryProblem",
    "Skill",
    "SkillEntry",
    "SkillFileStat",
    "SkillMeta",
    "SkillRef",
    "content_version",
]

SPEC_FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
"""The six frontmatter keys the Agent Skills spec defines; every other key goes to ``extra``."""

RESOURCE_KINDS = ("scripts", "references", "assets")
"""The spec's conventional resource folders; files elsewhere are of kind ``other``."""

_VERSION_LENGTH = 16


def content_version(data: bytes) -> str:
    """A skill's version: the first 16 hex digits of the SHA-256 of its SKILL.md bytes."""
    return hashlib.sha256(data).hexdigest()[:_VERSION_LENGTH]


@dataclass(frozen=True, slots=True)
class SkillMeta:
    """The frontmatter of one skill, after lenient recovery.

    ``allowed_tools`` is ``None`` when the field is absent; ``extra`` holds every non-spec key
    with its YAML value (Claude Code's ``disable-model-invocation``, ``argument-hint``, ...).
    """

    name: str
    description: str
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    allowed_tools: tuple[str, ...] | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def model_invocable(self) -> bool:
        """False when the skill sets ``disable-model-invocation: true`` (Claude Code): such a
        skill is for the user to invoke and stays out of the model's catalog."""
        flag = self.extra.get("disable-model-invocation")
        return not (flag is True or (isinstance(flag, str) and flag.lower() == "true"))

    def to_dict(self) -> dict[str, object]:
        """Spec keys as written in SKILL.md (``allowed-tools``), unset ones omitted, then extras."""
        out: dict[str, object] = {"name": self.name, "description": self.description}
        if self.license is not None:
            out["license"] = self.license
        if self.compatibility is not None:
            out["compatibility"] = self.compatibility
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        if self.allowed_tools is not None:
            out["allowed-tools"] = list(self.allowed_tools)
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True)
class SkillRef:
    """A skill's identity: the source that found it and the id that source gave it."""

    source_id: str
    id: str

    def __str__(self) -> str:
        return f"{self.source_id}:{self.id}"


@dataclass(frozen=True, slots=True)
class SkillEntry:
    """A usable skill as a source discovered it.

    ``id`` is source-assigned (a filesystem source uses the folder path relative to its root),
    ``version`` is :func:`content_version` of SKILL.md, ``location`` the absolute path of
    SKILL.md (filesystem) or a virtual path such as ``/skills/<id>/SKILL.md``. ``shadowed_by``
    is set by the catalog when another skill with the same name wins.
    """

    source_id: str
    id: str
    version: str
    location: str
    meta: SkillMeta
    diagnostics: tuple[Diagnostic, ...] = ()
    shadowed_by: SkillRef | None = None

    @property
    def ref(self) -> SkillRef:
        return SkillRef(self.source_id, self.id)

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def description(self) -> str:
        return self.meta.description

    @property
    def shadowed(self) -> bool:
        return self.shadowed_by is not None

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity is Severity.WARNING)


@dataclass(frozen=True, slots=True)
class DiscoveryProblem:
    """Something a source found but could not load.

    With an ``id`` it is a skill that was skipped (no usable name or description, unreadable,
    too large, escaping the root); without one it is about the source itself (a scan limit).
    ``diagnostics`` always holds at least one entry saying why.
    """

    source_id: str
    id: str | None
    location: str | None
    diagnostics: tuple[Diagnostic, ...]
    version: str | None = None


DiscoveryItem = SkillEntry | DiscoveryProblem
"""What :meth:`SkillSource.discover` yields."""


@dataclass(frozen=True, slots=True)
class SkillFileStat:
    """Size in bytes and content version of a skill's body (no path) or of one of its files."""

    size: int
    version: str


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill loaded for use: its entry, the SKILL.md body (no frontmatter) and the relative
    paths of its other files, listed but not read."""

    entry: SkillEntry
    body: str
    resources: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def meta(self) -> SkillMeta:
        return self.entry.meta

    def resources_by_kind(self) -> dict[str, list[str]]:
        """Resources grouped as ``scripts``, ``references``, ``assets`` and ``other``."""
        groups: dict[str, list[str]] = {kind: [] for kind in (*RESOURCE_KINDS, "other")}
        for path in self.resources:
            head = path.split("/", 1)[0]
            groups[head if head in RESOURCE_KINDS and "/" in path else "other"].append(path)
        return groups
