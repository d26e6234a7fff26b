"""The quotas of a run through a real ``bwrap``: the workspace (measured, the tree killed at
``workspace_bytes`` / ``workspace_files``), the private ``/tmp`` and ``/dev/shm`` (size-capped
tmpfs), ``/dev`` itself (read-only), and :func:`plait.sandbox.quota.folder_usage`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from plait.sandbox import MIB, BubblewrapSandbox, SandboxCommand, SandboxLimits, SandboxPolicy
from plait.sandbox.quota import WorkspaceWatch, folder_usage

FILL_WORKSPACE = """
import itertools, os
chunk = b"x" * (1024 * 1024)
for n in itertools.count():
    with open(f"f{n}", "wb") as out:  # a new file per MiB: file_size_bytes does not stop it
        out.write(chunk)
"""

MANY_FILES = """
import itertools
for n in itertools.count():
    open(f"e{n}", "w").close()
"""

FILL_MOUNTS = """
import json, os, sys
written = {}
for folder in sys.argv[1:]:
    total, chunk = 0, b"x" * (1024 * 1024)
    try:
        with open(os.path.join(folder, "fill"), "wb", buffering=0) as out:
            while True:
                total += out.write(chunk)
    except OSError as error:
        written[folder] = [total, error.strerror]
try:
    open("/dev/fill", "wb")
    written["/dev"] = "written"
except OSError as error:
    written["/dev"] = error.strerror
print(json.dumps(written))
"""


def run_py(workspace: Path, code: str, *args: str) -> SandboxCommand:
    return SandboxCommand((sys.executable, "-c", code, *args), workspace, 120, 100_000)


async def test_a_script_filling_its_workspace_is_killed_at_the_quota(tmp_path: Path) -> None:
    limits = SandboxLimits(workspace_bytes=16 * MIB, file_size_bytes=4 * MIB)
    run = await BubblewrapSandbox(SandboxPolicy(limits=limits)).run(
        run_py(tmp_path, FILL_WORKSPACE)
    )
    assert run.exit_code != 0 and not run.timed_out
    assert run.limit is not None and run.limit.startswith(f"workspace_bytes={16 * MIB} ")
    assert folder_usage(tmp_path).size > 16 * MIB  # what it held when it was measured


async def test_a_script_making_endless_files_is_killed_at_the_entry_quota(
    tmp_path: Path,
) -> None:
    limits = SandboxLimits(workspace_files=500)
    run = await BubblewrapSandbox(SandboxPolicy(limits=limits)).run(run_py(tmp_path, MANY_FILES))
    assert run.limit is not None and run.limit.startswith("workspace_files=500 ")
    assert run.exit_code != 0 and len(os.listdir(tmp_path)) > 500


async def test_a_run_that_ends_over_the_quota_before_a_poll_is_named_too(tmp_path: Path) -> None:
    # Written and gone within one poll interval, or not: the measure at exit sees it either way.
    code = "for n in range(3): open(f'f{n}', 'wb').write(b'x' * (1024 * 1024))"
    limits = SandboxLimits(workspace_bytes=2 * MIB)
    run = await BubblewrapSandbox(SandboxPolicy(limits=limits)).run(run_py(tmp_path, code))
    assert run.limit is not None and run.limit.startswith(f"workspace_bytes={2 * MIB} ")
    (tmp_path / "small").mkdir()
    under = await BubblewrapSandbox().run(run_py(tmp_path / "small", "print('small')"))
    assert (under.exit_code, under.limit) == (0, None)


async def test_tmp_and_dev_shm_are_capped_and_dev_is_read_only(tmp_path: Path) -> None:
    limits = SandboxLimits(tmp_bytes=8 * MIB, shm_bytes=4 * MIB)
    run = await BubblewrapSandbox(SandboxPolicy(limits=limits)).run(
        run_py(tmp_path, FILL_MOUNTS, "/tmp", "/dev/shm")
    )
    assert run.exit_code == 0, run.output
    written = json.loads(run.output)
    assert written == {
        "/tmp": [8 * MIB, "No space left on device"],
        "/dev/shm": [4 * MIB, "No space left on device"],
        "/dev": "Read-only file system",
    }


def test_folder_usage_counts_sparse_files_at_full_length_and_stops_at_its_bound(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a").write_bytes(b"x" * 1000)
    with open(tmp_path / "sparse", "wb") as out:
        out.truncate(10 * MIB)
    (tmp_path / "link").symlink_to("/usr")  # not followed
    usage = folder_usage(tmp_path)
    assert usage.entries == 4 and not usage.cut
    assert 10 * MIB + 1000 <= usage.size < 10 * MIB + 64 * 1024
    assert folder_usage(tmp_path, max_entries=2).cut
    watch = WorkspaceWatch(tmp_path, max_bytes=MIB, max_files=100)
    assert watch() == f"workspace_bytes={MIB} (the workspace holds {usage.size:,} bytes; " + (
        "the run was killed)"
    )
    assert watch.peak.size == usage.size
