"""Skills in a folder on disk: a folder of skill folders, or one skill folder.

The scan walks at most ``max_depth`` levels and ``max_dirs`` folders, never descends into a skill
folder (its ``scripts/`` are not skills) nor into ``.git``, ``node_modules`` and the other
:data:`~plait.skills.sources.base.DEFAULT_IGNORED` names, and refuses symlinks that resolve
outside the root. Each SKILL.md is cached with its ``stat`` signature (mtime, size, inode,
ctime), so a rescan re-reads only the files whose signature changed.

Reads are confined to the skill folder with :func:`~plait.paths.confine` (symlinks are resolved
and must stay inside), and the file is then opened with ``O_NOFOLLOW``, so a file replaced by a
symlink between the check and the read is refused. Not defended (pure Python cannot, portably):
a *parent folder* swapped for a symlink in that window by another local process, and hard links
(a hard link inside a skill folder is indistinguishable from a regular file; making one needs
write access to the folder and, with Linux ``protected_hardlinks``, to the target). Keep skill
folders writable only by their owner.

File IO is synchronous inside the async methods: it is local and fast (see
``bench/skills_catalog.py``), and a thread hop per file would cost more than the read.
"""

from __future__ import annotations

import builtins
import errno
import os
import stat as stat_module
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from plait.paths import PathEscapeError, confine, normalize_virtual_path
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.errors import SkillFileNotFound, SkillNotFound, SkillSourceError
from plait.skills.model import DiscoveryItem, DiscoveryProblem, SkillFileStat, content_version
from plait.skills.sources.base import (
    DEFAULT_IGNORED,
    DEFAULT_MAX_FILE_BYTES,
    SKILL_FILE_NAMES,
    assess_skill_md,
    body_bytes,
)
from plait.skills.validator import lowercase_skill_md_warning

__all__ = ["FilesystemSource", "ScanStats"]

_Signature = tuple[int, int, int, int]


@dataclass(slots=True)
class ScanStats:
    """What the last scan did: folders looked at, SKILL.md files found, files (re)parsed."""

    folders: int = 0
    skill_files: int = 0
    parsed: int = 0


@dataclass(frozen=True, slots=True)
class _Cached:
    path: str
    signature: _Signature
    item: DiscoveryItem


@dataclass(slots=True)
class _Scan:
    cache: dict[str, _Cached] = field(default_factory=dict)
    items: list[DiscoveryItem] = field(default_factory=list)
    stats: ScanStats = field(default_factory=ScanStats)
    too_deep: int = 0
    stopped: bool = False


class FilesystemSource:
    """A :class:`~plait.skills.sources.base.SkillSource` over a folder.

    ``root`` is a folder of skill folders, a single skill folder (it has a SKILL.md), or a
    SKILL.md file (its folder is the skill). Skill ids are folder paths relative to the root
    (``pdf``, ``team/pdf``); a single skill's id is its folder name. ``source_id`` defaults to
    the root as given.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        source_id: str | None = None,
        max_depth: int = 6,
        max_dirs: int = 10_000,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_resources: int = 1_000,
        ignore: frozenset[str] = DEFAULT_IGNORED,
    ) -> None:
        given = Path(root)
        if given.name in SKILL_FILE_NAMES and given.is_file():
            given = given.parent
        self._given = given
        self._root = given.resolve()
        self._id = source_id if source_id is not None else str(root)
        self.max_depth = max_depth
        self.max_dirs = max_dirs
        self.max_file_bytes = max_file_bytes
        self.max_resources = max_resources
        self.ignore = ignore
        self._cache: dict[str, _Cached] = {}
        self._single = False
        self.last_scan = ScanStats()

    @property
    def id(self) -> str:
        return self._id

    @property
    def root(self) -> Path:
        """The resolved root folder."""
        return self._root

    async def discover(self) -> AsyncIterator[DiscoveryItem]:
        for item in self.scan():
            yield item

    def scan(self) -> builtins.list[DiscoveryItem]:
        """The synchronous scan behind :meth:`discover`.

        Raises :class:`SkillSourceError` when the root is missing or not a folder.
        """
        if not self._root.is_dir():
            state = "is not a folder" if self._root.exists() else "does not exist"
            raise SkillSourceError(
                f"Skill folder {str(self._given)!r} {state}. Create it, or remove it from the "
                "skill sources."
            )
        scan = _Scan()
        single = self._skill_file(str(self._root), self._root.name, scan)
        self._single = single is not None
        if single is not None:
            self._load(self._root.name, self._root.name, single, scan)
        else:
            self._walk(scan)
        self._cache = scan.cache
        self.last_scan = scan.stats
        return scan.items

    def _walk(self, scan: _Scan) -> None:
        stack: builtins.list[tuple[str, str, int]] = [(str(self._root), "", 0)]
        seen_links: set[str] = set()
        while stack and not scan.stopped:
            folder, rel, depth = stack.pop()
            children = self._scan_folder(folder, rel, depth, scan, seen_links)
            stack.extend(reversed(children))
        if scan.stopped:
            scan.items.append(
                self._notice(
                    Severity.WARNING,
                    Code.SCAN_LIMIT,
                    f"Stopped scanning after {self.max_dirs} folders; skills beyond them were not "
                    "loaded. Point the source at a narrower folder or raise max_dirs.",
                )
            )
        if scan.too_deep:
            scan.items.append(
                self._notice(
                    Severity.INFO,
                    Code.DEPTH_LIMIT,
                    f"{scan.too_deep} folder(s) at depth {self.max_depth} were not scanned for "
                    "skills; raise max_depth if skills live deeper.",
                )
            )

    def _scan_folder(
        self, folder: str, rel: str, depth: int, scan: _Scan, seen_links: set[str]
    ) -> builtins.list[tuple[str, str, int]]:
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as err:
            message = f"Cannot list folder {folder}: {err.strerror}; skipped it."
            scan.items.append(self._notice(Severity.WARNING, Code.UNREADABLE, message, folder))
            return []
        children: builtins.list[tuple[str, str, int]] = []
        for entry in entries:
            if entry.name in self.ignore or not _is_dir(entry):
                continue
            child_rel = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_symlink() and not self._symlink_ok(child_rel, entry.path, scan, seen_links):
                continue
            scan.stats.folders += 1
            if scan.stats.folders > self.max_dirs:
                scan.stopped = True
                return []
            skill_file = self._skill_file(entry.path, child_rel, scan)
            if skill_file is not None:
                self._load(child_rel, entry.name, skill_file, scan)
            elif depth + 1 < self.max_depth:
                children.append((entry.path, child_rel, depth + 1))
            else:
                scan.too_deep += 1
        return children

    def _symlink_ok(self, rel: str, path: str, scan: _Scan, seen_links: set[str]) -> bool:
        try:
            real = confine(self._root, rel)
        except PathEscapeError as err:
            scan.items.append(self._escape_problem(rel, path, err))
            return False
        key = str(real)
        if key in seen_links or Path(path).parent.resolve().is_relative_to(real):
            return False
        seen_links.add(key)
        return True

    def _skill_file(
        self, folder: str, skill_id: str, scan: _Scan
    ) -> tuple[str, os.stat_result] | None:
        """The skill file in ``folder`` with its stat, or None. A SKILL.md symlink that leaves
        its skill folder is reported (and the folder counts as a skipped skill): reads are
        confined to the skill folder, so such a skill could never be read."""
        for name in SKILL_FILE_NAMES:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
                if stat_module.S_ISLNK(info.st_mode):
                    try:
                        confine(Path(folder), name)
                        info = os.stat(path)
                    except PathEscapeError as err:
                        scan.items.append(self._escape_problem(skill_id, path, err, "skill folder"))
                        return None
                    except (OSError, RuntimeError) as err:  # dangling, or a loop (3.11: Runtime)
                        reason = getattr(err, "strerror", None) or str(err)
                        message = (
                            f"{path} is a symlink that cannot be followed ({reason}); skipped."
                        )
                        scan.items.append(self._problem(skill_id, path, Code.UNREADABLE, message))
                        return None
            except OSError:
                continue
            if stat_module.S_ISREG(info.st_mode):
                return path, info
        return None

    def _load(
        self, skill_id: str, folder_name: str, found: tuple[str, os.stat_result], scan: _Scan
    ) -> None:
        path, info = found
        scan.stats.skill_files += 1
        signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
        cached = self._cache.get(skill_id)
        if cached is not None and cached.signature == signature and cached.path == path:
            item = cached.item
        else:
            scan.stats.parsed += 1
            item = self._read_item(skill_id, folder_name, path, info.st_size)
        scan.cache[skill_id] = _Cached(path, signature, item)
        scan.items.append(item)

    def _read_item(self, skill_id: str, folder_name: str, path: str, size: int) -> DiscoveryItem:
        if size > self.max_file_bytes:
            return self._problem(
                skill_id,
                path,
                Code.FILE_TOO_LARGE,
                f"SKILL.md is {size} bytes, over the {self.max_file_bytes}-byte limit; skipped. "
                "Move long material into references/ files.",
            )
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as err:
            return self._problem(
                skill_id, path, Code.UNREADABLE, f"Cannot read SKILL.md: {err.strerror}; skipped."
            )
        extra = () if path.endswith("SKILL.md") else (lowercase_skill_md_warning(path),)
        return assess_skill_md(
            data,
            source_id=self._id,
            skill_id=skill_id,
            folder_name=folder_name,
            location=path,
            extra_diagnostics=extra,
        )

    def _problem(self, skill_id: str, path: str, code: Code, message: str) -> DiscoveryProblem:
        diagnostic = Diagnostic(Severity.ERROR, code, message, path)
        return DiscoveryProblem(self._id, skill_id, path, (diagnostic,))

    def _escape_problem(
        self, skill_id: str, path: str, err: PathEscapeError, bound: str = "source root"
    ) -> DiscoveryProblem:
        where = f"the {bound} {str(self._root)!r}" if bound == "source root" else f"its {bound}"
        return self._problem(
            skill_id,
            path,
            Code.PATH_ESCAPE,
            f"{path} is a symlink that resolves outside {where}; skipped it ({err.reason}).",
        )

    def _notice(
        self, severity: Severity, code: Code, message: str, file: str | None = None
    ) -> DiscoveryProblem:
        where = file or str(self._root)
        diagnostic = Diagnostic(severity, code, message, where)
        return DiscoveryProblem(self._id, None, where, (diagnostic,))

    # --- reading -------------------------------------------------------------------------------

    def _known_ids(self) -> builtins.list[str]:
        return sorted(self._cache)

    def _folder(self, ref: str) -> Path:
        """The resolved folder of discovered skill ``ref``, confined to the root.

        Only folders the last scan loaded a SKILL.md from are served (the first read scans);
        a ``..`` in ``ref`` raises :class:`PathEscapeError`.
        """
        if not self._cache:
            self.scan()
        if ref not in self._cache:
            normalize_virtual_path(ref)
            raise SkillNotFound(ref, self._known_ids(), where=str(self._given))
        if self._single:
            return self._root
        return confine(self._root, ref)

    def _skill_md_bytes(self, folder: Path) -> bytes:
        for name in SKILL_FILE_NAMES:
            path = confine(folder, name)
            if path.is_file():
                return _read_regular(path, name)
        raise SkillNotFound(folder.name, self._known_ids(), where=str(self._given))

    async def read(self, ref: str, path: str | None = None) -> bytes:
        folder = self._folder(ref)
        if path is None:
            return body_bytes(self._skill_md_bytes(folder))
        target = confine(folder, path)
        if not target.is_file():
            raise SkillFileNotFound(ref, path, self._list_files(folder))
        return _read_regular(target, path)

    async def stat(self, ref: str, path: str | None = None) -> SkillFileStat:
        folder = self._folder(ref)
        if path is None:
            data = self._skill_md_bytes(folder)
            return SkillFileStat(len(body_bytes(data)), content_version(data))
        data = await self.read(ref, path)
        return SkillFileStat(len(data), content_version(data))

    async def list(self, ref: str) -> builtins.list[str]:
        return self._list_files(self._folder(ref))

    def _list_files(self, folder: Path) -> builtins.list[str]:
        found: builtins.list[str] = []
        for current, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in self.ignore)
            rel_dir = os.path.relpath(current, folder).replace(os.sep, "/")
            for name in files:
                rel = name if rel_dir == "." else f"{rel_dir}/{name}"
                if rel in SKILL_FILE_NAMES:
                    continue
                try:
                    confine(folder, rel)
                except PathEscapeError:
                    continue
                found.append(rel)
                if len(found) >= self.max_resources:
                    return sorted(found)
        return sorted(found)


_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_regular(target: Path, path: str) -> bytes:
    """Read ``target`` (a path :func:`confine` resolved) without following a symlink put in
    its place since, and only if it is still a regular file (a FIFO swapped in would block)."""
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise PathEscapeError(path, "it became a symlink while it was being read") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat_module.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PathEscapeError(path, "it is no longer a regular file")
        return handle.read()


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
