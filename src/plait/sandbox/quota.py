"""The workspace quota: measure a folder, and the watcher a run polls against its limits.

A workspace is a host folder bound into the sandbox, and what a script leaves there is kept
for the thread's next run, so a size-capped tmpfs (gone with the run) cannot hold it and a
loop mount needs root. The quota is accounting instead: :class:`WorkspaceWatch` measures the
workspace every :data:`~plait.sandbox.policy.WORKSPACE_POLL_SECONDS` and once more at exit, and
the run's tree is killed when it holds more than ``SandboxLimits.workspace_bytes`` or
``workspace_files``. Each file is also capped by ``file_size_bytes`` (RLIMIT_FSIZE), so one
interval adds at most what the script writes in it. A file's size is the larger of its length
and its allocated blocks (a sparse file counts at full length); a file unlinked while still
open is not seen (its blocks are freed when the run ends).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FolderUsage", "WorkspaceWatch", "folder_usage"]


@dataclass(frozen=True, slots=True)
class FolderUsage:
    """What a folder holds: ``size`` in bytes, ``entries`` (files, folders, links; the folder
    itself not counted); ``cut`` when the walk stopped at its ``max_entries``."""

    size: int
    entries: int
    cut: bool = False


def folder_usage(root: Path | str, max_entries: int | None = None) -> FolderUsage:
    """Walk ``root`` (no symlink followed, other file systems included) and add up what it
    holds; stop past ``max_entries``. Entries that vanish during the walk are skipped."""
    size = entries = 0
    stack = [os.fspath(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                for entry in scan:
                    entries += 1
                    if max_entries is not None and entries > max_entries:
                        return FolderUsage(size, entries, cut=True)
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    size += max(info.st_size, info.st_blocks * 512)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return FolderUsage(size, entries)


class WorkspaceWatch:
    """Polled by a run (off the event loop): :meth:`__call__` names the quota ``root`` is
    over, or returns None."""

    def __init__(self, root: Path, max_bytes: int, max_files: int) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.peak = FolderUsage(0, 0)

    def __call__(self) -> str | None:
        usage = folder_usage(self.root, self.max_files)
        if usage.size > self.peak.size or usage.entries > self.peak.entries:
            self.peak = FolderUsage(
                max(usage.size, self.peak.size), max(usage.entries, self.peak.entries)
            )
        if usage.cut:
            return (
                f"workspace_files={self.max_files} (the workspace holds more entries; "
                "the run was killed)"
            )
        if usage.size > self.max_bytes:
            return (
                f"workspace_bytes={self.max_bytes} (the workspace holds {usage.size:,} bytes; "
                "the run was killed)"
            )
        return None
