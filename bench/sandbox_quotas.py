"""What one sandboxed call can write, against the documented quotas (issue 29).

Each round runs, in ``BubblewrapSandbox`` with the default policy (or ``--workspace-mib`` /
``--tmp-mib`` / ``--shm-mib``), a script that writes 1 MiB chunks as fast as it can:

* into its workspace, a new file per MiB (so ``file_size_bytes`` never stops it), until the
  run is killed; the figure is what the workspace holds afterwards (it is kept for the next
  run of the thread), measured on the host;
* into ``/tmp`` and ``/dev/shm`` until the write fails; the figure is what the script wrote
  (tmpfs: memory), and the error it got; and it tries ``/dev`` itself.

Target: every figure at most its quota, plus, for the workspace (measured every
``WORKSPACE_POLL_SECONDS``), what a script writes in one poll interval.

Run: ``python bench/sandbox_quotas.py [rounds]`` (default 5). Needs ``bwrap``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from plait.sandbox import (
    MIB,
    WORKSPACE_POLL_SECONDS,
    BubblewrapSandbox,
    SandboxCommand,
    SandboxLimits,
    SandboxPolicy,
)
from plait.sandbox.quota import folder_usage

FILL_WORKSPACE = """
import itertools
chunk = b"x" * (1024 * 1024)
for n in itertools.count():
    with open(f"f{n}", "wb") as out:
        out.write(chunk)
"""

FILL_MOUNTS = """
import json, os, sys
written = {}
for folder in ("/tmp", "/dev/shm", "/dev"):
    total, chunk = 0, b"x" * (1024 * 1024)
    try:
        with open(os.path.join(folder, "fill"), "wb", buffering=0) as out:
            while True:
                total += out.write(chunk)
    except OSError as error:
        written[folder] = [total, error.strerror]
print(json.dumps(written))
"""


async def one_round(box: BubblewrapSandbox, folder: Path) -> dict[str, tuple[int, str]]:
    workspace = Path(tempfile.mkdtemp(prefix="ws-", dir=folder))
    command = SandboxCommand((sys.executable, "-c", FILL_WORKSPACE), workspace, 300, 10_000)
    start = time.perf_counter()
    run = await box.run(command)
    seconds = time.perf_counter() - start
    held = folder_usage(workspace).size
    rate = held / seconds / MIB
    found = {"workspace": (held, f"{run.limit or 'no limit named'}; {rate:,.0f} MiB/s")}
    fresh = Path(tempfile.mkdtemp(prefix="ws-", dir=folder))  # the first is over its quota
    mounts = SandboxCommand((sys.executable, "-c", FILL_MOUNTS), fresh, 300, 10_000)
    run = await box.run(mounts)
    for name, (total, error) in json.loads(run.output).items():
        found[name] = (total, error)
    return found


async def main(rounds: int, limits: SandboxLimits) -> None:
    box = BubblewrapSandbox(SandboxPolicy(limits=limits))
    await box.check()
    quotas = {
        "workspace": limits.workspace_bytes,
        "/tmp": limits.tmp_bytes,
        "/dev/shm": limits.shm_bytes,
        "/dev": 0,
    }
    seen: dict[str, list[int]] = {name: [] for name in quotas}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="plait-bench-quotas-") as folder:
        for _ in range(rounds):
            for name, (total, note) in (await one_round(box, Path(folder))).items():
                seen[name].append(total)
                notes[name] = note
    print(f"bubblewrap sandbox, {rounds} rounds, poll every {WORKSPACE_POLL_SECONDS:g} s")
    print(f"{'target':<10} {'quota MiB':>10} {'most MiB':>9} {'median':>8} {'over':>7}  last note")
    for name, quota in quotas.items():
        most, median = max(seen[name]), statistics.median(seen[name])
        over = max(0, most - quota) / MIB
        print(
            f"{name:<10} {quota / MIB:>10.0f} {most / MIB:>9.1f} {median / MIB:>8.1f} "
            f"{over:>7.1f}  {notes[name]}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="?", type=int, default=5)
    parser.add_argument("--workspace-mib", type=int, default=None)
    parser.add_argument("--tmp-mib", type=int, default=None)
    parser.add_argument("--shm-mib", type=int, default=None)
    args = parser.parse_args()
    defaults = SandboxLimits()
    chosen = SandboxLimits(
        workspace_bytes=(args.workspace_mib or defaults.workspace_bytes // MIB) * MIB,
        tmp_bytes=(args.tmp_mib or defaults.tmp_bytes // MIB) * MIB,
        shm_bytes=(args.shm_mib or defaults.shm_bytes // MIB) * MIB,
    )
    asyncio.run(main(args.rounds, chosen))
