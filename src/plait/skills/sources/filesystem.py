"""Skills in a folder on disk: a folder of skill folders, or one skill folder.

The scan walks the whole tree within ``max_dirs`` folders, ``scan_seconds`` and ``max_depth``
levels (defaults 50,000, 30 s, 32), skipping ``.git``, ``node_modules`` and the other
:data:`~plait.skills.sources.base.DEFAULT_IGNORED` names, and refuses symlinks that resolve
outside the root. It looks inside skill folders too, only to report a SKILL.md there
(``nested-skill``: a sample or template, not a skill). Each SKILL.md is cached with its ``stat``
signature (mtime, size, inode, ctime), so a rescan re-reads only the files whose signature
changed.

Reads are confined to the skill folder with :func:`~plait.paths.confine` (symlinks are resolved
and must stay inside), and the file is then opened with ``O_NOFOLLOW``, so a file replaced by a
symlink between the check and the read is refused. Not defended (pure Python cannot, portably):
a *parent folder* swapped for a symlink in that window by another local process, and hard links
(a hard link inside a skill folder is indistinguishable from a regular file; making one needs
write access to the folder and, with Linux ``protected_hardlinks``, to the target). Keep skill
folders writable only by their owner.

File IO is synchronous inside the async read methods: it is local and fast (see
``bench/skills_catalog.py``), and a thread hop per file would cost more than the read. A
discovery (the whole walk) runs in one worker thread, so a refresh never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import builtins
import operator
import os
import stat as stat_module
import time
from collections.abc import AsyncIterator
from pathlib import Path

from plait.paths import PathEscapeError, confine, normalize_virtual_path
from plait.skills.diagnostics import Code, Diagnostic, Severity
from plait.skills.errors import (
    SkillFileNotFound,
    SkillFileTooLarge,
    SkillFileUnreadable,
    SkillNotFound,
    SkillSourceError,
)
from plait.skills.model import DiscoveryItem, DiscoveryProblem, SkillFileStat, content_version
from plait.skills.skill_file import (
    is_skill_file_name,
    pick_skill_file,
    resolve_text_link,
    skill_file_name_warning,
    text_link_followed,
    text_link_refused,
    text_link_target,
)
from plait.skills.sources.base import (
    DEFAULT_IGNORED,
    DEFAULT_MAX_FILE_BYTES,
    assess_skill_md,
    body_bytes,
)
from plait.skills.sources.reading import LinePage, file_kind, read_line_page, read_regular
from plait.skills.sources.scanning import (
    UNSCANNED_SHOWN,
    CachedSkill,
    ScanState,
    ScanStats,
    Visit,
    is_dir,
    names_shown,
)

__all__ = ["FilesystemSource", "ScanStats"]

_entry_name = operator.attrgetter("name")


class FilesystemSource:
    """A :class:`~plait.skills.sources.base.SkillSource` over a folder.

    ``root`` is a folder of skill folders, a single skill folder (it has a SKILL.md), or a
    SKILL.md file (its folder is the skill). Skill ids are folder paths relative to the root
    (``pdf``, ``team/pdf``); a single skill's id is its folder name. ``source_id`` defaults to
    the root as given.

    Discovery order is path order (depth first, names sorted), which decides name clashes
    within the source. Scan bounds (each stop is a ``scan-limit``/``depth-limit`` *warning*
    naming the first folders left unscanned; ``plait skills validate`` fails on it):
    ``max_dirs`` folders
    (default 50 000), ``scan_seconds`` of wall time (default 30), ``max_depth`` levels below the
    root (default 32, deeper than real collections nest; it stops symlink mazes).
    ``max_file_bytes`` caps SKILL.md and every file :meth:`read` returns (default 5 MiB).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        source_id: str | None = None,
        max_depth: int = 32,
        max_dirs: int = 50_000,
        scan_seconds: float = 30.0,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_resources: int = 1_000,
        ignore: frozenset[str] = DEFAULT_IGNORED,
    ) -> None:
        given = Path(root)
        if is_skill_file_name(given.name) and given.is_file():
            given = given.parent
        self._given = given
        self._root = given.resolve()
        self._id = source_id if source_id is not None else str(root)
        self.max_depth = max_depth
        self.max_dirs = max_dirs
        self.scan_seconds = scan_seconds
        self.max_file_bytes = max_file_bytes
        self.max_resources = max_resources
        self.ignore = ignore
        self._cache: dict[str, CachedSkill] = {}
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
        """:meth:`scan` in a worker thread: a refresh never blocks the event loop's turns."""
        for item in await asyncio.to_thread(self.scan):
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
        scan = ScanState(deadline=time.monotonic() + self.scan_seconds)
        root = str(self._root)
        try:
            names = os.listdir(root)
        except OSError:
            names = []
        single = self._skill_file(root, names, self._root.name, scan)
        self._single = single is not None
        if single is not None:
            self._load(self._root.name, self._root.name, single, scan)
        self._walk(scan, Visit(root, "", 0, self._root.name if single else None))
        self._cache = scan.cache
        self.last_scan = scan.stats
        return scan.items

    def _walk(self, scan: ScanState, start: Visit) -> None:
        """Depth-first over the folders: each is listed once, loaded as a skill when it holds a
        skill file, and reported when that file lies inside another skill's folder."""
        stack = [start]
        seen_links: set[str] = set()
        while stack:
            scan.stopped_by = self._over_limit(scan)
            if scan.stopped_by is not None:
                scan.unscanned = [v.path for v in reversed(stack[-UNSCANNED_SHOWN:])]
                break
            visit = stack.pop()
            scan.stats.folders += visit.depth > 0
            stack.extend(reversed(self._visit(visit, scan, seen_links)))
        if scan.stopped_by is not None:
            message = (
                f"Stopped scanning {scan.stopped_by}; skills beyond were not loaded. First "
                f"folders not scanned: {names_shown(scan.unscanned)}. Point the source at a "
                "narrower folder or raise the limit."
            )
            scan.items.append(self._notice(Severity.WARNING, Code.SCAN_LIMIT, message))
        if scan.too_deep:
            message = (
                f"{len(scan.too_deep)} folder(s) deeper than max_depth={self.max_depth} were not "
                f"scanned for skills: {names_shown(scan.too_deep)}. Raise max_depth if skills live "
                "there."
            )
            scan.items.append(self._notice(Severity.WARNING, Code.DEPTH_LIMIT, message))

    def _over_limit(self, scan: ScanState) -> str | None:
        if scan.stats.folders >= self.max_dirs:
            return f"after {self.max_dirs} folders (max_dirs)"
        if time.monotonic() > scan.deadline:
            return f"after {self.scan_seconds:g} s (scan_seconds)"
        return None

    def _visit(self, visit: Visit, scan: ScanState, seen_links: set[str]) -> builtins.list[Visit]:
        """List ``visit`` once: load or report its skill file, return its child folders."""
        try:
            with os.scandir(visit.path) as it:
                entries = sorted(it, key=_entry_name)
        except OSError as err:
            message = f"Cannot list folder {visit.path}: {err.strerror}; skipped it."
            scan.items.append(self._notice(Severity.WARNING, Code.UNREADABLE, message, visit.path))
            return []
        if visit.depth > 0:  # the root's own skill file was handled by scan()
            names = [e.name for e in entries]
            skill_file = self._skill_file(visit.path, names, visit.rel, scan)
            if skill_file is not None and visit.owner is not None:
                scan.items.append(self._nested_notice(visit, skill_file[0]))
            elif skill_file is not None:
                self._load(visit.rel, os.path.basename(visit.path), skill_file, scan)
                visit.owner = visit.rel
        children: builtins.list[Visit] = []
        for entry in entries:
            if entry.name in self.ignore or not is_dir(entry):
                continue
            rel = f"{visit.rel}/{entry.name}" if visit.rel else entry.name
            if entry.is_symlink() and not self._symlink_ok(rel, entry.path, scan, seen_links):
                continue
            if visit.depth + 1 > self.max_depth:
                if len(scan.too_deep) < 10_000:
                    scan.too_deep.append(entry.path)
                continue
            children.append(Visit(entry.path, rel, visit.depth + 1, visit.owner))
        return children

    def _nested_notice(self, child: Visit, path: str) -> DiscoveryProblem:
        owner = child.owner or ""
        inside = self._root if self._single else self._root / owner
        message = (
            f"{path} was not loaded as a skill: it lies inside the folder of skill {owner!r} "
            f"({inside}), whose files (samples, templates) are not skills. Move it out of "
            "that folder to make it a skill."
        )
        return self._notice(Severity.WARNING, Code.NESTED_SKILL, message, path)

    def _symlink_ok(self, rel: str, path: str, scan: ScanState, seen_links: set[str]) -> bool:
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
        self, folder: str, names: builtins.list[str], skill_id: str, scan: ScanState
    ) -> tuple[str, os.stat_result] | None:
        """The skill file among ``folder``'s ``names`` (any case) with its stat, or None. A
        SKILL.md symlink that leaves its skill folder is reported (and the folder counts as a
        skipped skill): reads are confined to the skill folder, so it could never be read."""
        name = pick_skill_file(names)
        if name is None:
            return None
        path = os.path.join(folder, name)
        try:
            info = os.lstat(path)
            if stat_module.S_ISLNK(info.st_mode):
                confine(Path(folder), name)
                info = os.stat(path)
        except PathEscapeError as err:
            scan.items.append(self._escape_problem(skill_id, path, err, "skill folder"))
            return None
        except (OSError, RuntimeError) as err:  # dangling, or a loop (3.11: RuntimeError)
            reason = getattr(err, "strerror", None) or str(err)
            message = f"{path} cannot be read ({reason}); skipped."
            scan.items.append(self._problem(skill_id, path, Code.UNREADABLE, message))
            return None
        if stat_module.S_ISREG(info.st_mode):
            return path, info
        if not stat_module.S_ISDIR(info.st_mode):
            message = f"{path} is not a regular file (a FIFO, socket or device); skipped."
            scan.items.append(self._problem(skill_id, path, Code.UNREADABLE, message))
        return None

    def _load(
        self, skill_id: str, folder_name: str, found: tuple[str, os.stat_result], scan: ScanState
    ) -> None:
        path, info = found
        scan.stats.skill_files += 1
        signature = (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)
        cached = self._cache.get(skill_id)
        if (
            cached is None
            or cached.signature != signature
            or cached.path != path
            or cached.text_link  # the target may have changed, appeared or gone
        ):
            scan.stats.parsed += 1
            item, real, linked = self._read_item(skill_id, folder_name, path, info.st_size)
            if cached is not None and cached.item == item:
                item = cached.item  # unchanged: the same object, as for a cache hit
            cached = CachedSkill(path, signature, item, os.path.dirname(real), linked)
        scan.cache[skill_id] = cached
        scan.items.append(cached.item)

    def _read_item(
        self, skill_id: str, folder_name: str, path: str, size: int
    ) -> tuple[DiscoveryItem, str, bool]:
        """The skill or problem for ``path``, the SKILL.md actually read (a text link's
        target, or ``path``), and whether ``path`` was a text link."""
        try:
            # a SKILL.md symlink was confined to its folder by _skill_file; read its target
            target = os.path.realpath(path) if os.path.islink(path) else path
            data = read_regular(target, path, self.max_file_bytes)
        except SkillFileTooLarge:
            message = (
                f"SKILL.md is {size} bytes, over the {self.max_file_bytes}-byte limit "
                "(max_file_bytes); skipped. Move long material into references/ files."
            )
            return self._problem(skill_id, path, Code.FILE_TOO_LARGE, message), path, False
        except (OSError, PathEscapeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            message = f"Cannot read SKILL.md: {reason}; skipped."
            return self._problem(skill_id, path, Code.UNREADABLE, message), path, False
        extra: tuple[Diagnostic, ...] = ()
        if os.path.basename(path) != "SKILL.md":
            extra = (skill_file_name_warning(path),)
        link = text_link_target(data)
        real = path
        if link is not None:
            followed = self._follow_text_link(skill_id, path, link)
            if isinstance(followed, DiscoveryProblem):
                return followed, path, True
            data, note, real = followed
            extra += (note,)
        item = assess_skill_md(
            data,
            source_id=self._id,
            skill_id=skill_id,
            folder_name=folder_name,
            location=path,
            extra_diagnostics=extra,
        )
        return item, real, link is not None

    def _follow_text_link(
        self, skill_id: str, path: str, link: str
    ) -> tuple[bytes, Diagnostic, str] | DiscoveryProblem:
        """Read the SKILL.md that ``path``'s text ``link`` names, if it lies inside the root."""
        try:
            target = resolve_text_link(Path(path), link, self._root)
            data = read_regular(target, link, self.max_file_bytes)
        except PathEscapeError:
            reason = "lies outside the source root"
        except (OSError, SkillFileTooLarge) as err:
            reason = f"cannot be read ({getattr(err, 'strerror', None) or err})"
        else:
            if text_link_target(data) is None:
                return data, text_link_followed(path, link, target), str(target)
            reason = "is again only a path"
        diagnostic = text_link_refused(path, link, reason)
        return DiscoveryProblem(self._id, skill_id, path, (diagnostic,))

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
        a ``..`` in ``ref`` raises :class:`PathEscapeError`. For a SKILL.md that was a text
        link, the folder is the target's.
        """
        if not self._cache:
            self.scan()
        cached = self._cache.get(ref)
        if cached is None:
            normalize_virtual_path(ref)
            raise SkillNotFound(ref, self._known_ids(), where=str(self._given))
        if self._single:
            return self._root
        return confine(self._root, os.path.relpath(cached.folder, self._root))

    def _skill_md_bytes(self, folder: Path) -> bytes:
        try:
            name = pick_skill_file(os.listdir(folder))
        except OSError:
            name = None
        if name is None:
            raise SkillNotFound(folder.name, self._known_ids(), where=str(self._given))
        return read_regular(confine(folder, name), name, self.max_file_bytes)

    def _file(self, ref: str, folder: Path, path: str) -> Path:
        """``path`` in ``folder`` as a regular file, or the typed error saying what it is."""
        target = confine(folder, path)
        try:
            mode = target.stat().st_mode
        except OSError:
            raise SkillFileNotFound(ref, path, self._list_files(folder)) from None
        kind = file_kind(mode)
        if kind is not None:
            raise SkillFileUnreadable(ref, path, kind)
        if stat_module.S_ISDIR(mode):
            raise SkillFileNotFound(ref, path, self._list_files(folder))
        return target

    async def read(self, ref: str, path: str | None = None) -> bytes:
        """The SKILL.md body, or the bytes of ``path``; files over ``max_file_bytes`` raise
        :class:`SkillFileTooLarge`, FIFOs and devices :class:`SkillFileUnreadable`."""
        folder = self._folder(ref)
        if path is None:
            return body_bytes(self._skill_md_bytes(folder))
        return read_regular(self._file(ref, folder, path), path, self.max_file_bytes)

    async def read_lines(
        self, ref: str, path: str, offset: int, limit: int | None, max_chars: int, start: int = 0
    ) -> LinePage:
        """Lines ``offset``.. of ``path`` streamed from disk: at most ``limit`` lines and
        ``max_chars`` characters are kept, whatever the file's size (no ``max_file_bytes``
        cap applies: nothing is loaded whole)."""
        target = self._file(ref, self._folder(ref), path)
        return read_line_page(target, offset, limit, max_chars, start)

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
                if rel_dir == "." and is_skill_file_name(name):
                    continue
                try:
                    if not confine(folder, rel).is_file():
                        continue  # FIFOs, sockets, devices: never served, so never listed
                except PathEscapeError:
                    continue
                found.append(rel)
                if len(found) >= self.max_resources:
                    return sorted(found)
        return sorted(found)
