"""Run untrusted programs (skill scripts) in an OS sandbox.

A layer of its own, below the batteries: it imports only :mod:`plait.errors`, so the skills
battery (and later MCP servers or others) can use it. See ``README.md`` in this folder.

================================ ===========================================================
name                             what it is
================================ ===========================================================
:class:`Sandbox`                 the seam (a protocol): ``check``, ``run``, ``aclose``
:class:`BubblewrapSandbox`       the default: ``bwrap`` + ``prlimit``, PID/net namespaces
:class:`UnsandboxedRunner`       no isolation; only when chosen explicitly
:class:`SandboxPolicy`           read_deny, write_allow, write_deny, network, user namespaces,
                                 limits
:class:`SandboxLimits`           wall time, CPU seconds, memory, open files, file size, procs,
                                 the workspace quota, the /tmp and /dev/shm sizes
:class:`SandboxUnavailable`      bwrap does not work here: ``cause`` and the fix
================================ ===========================================================
"""

from __future__ import annotations

from plait.sandbox.base import (
    KILL_GRACE_SECONDS,
    TRUNCATION_MARKER,
    RunningProcess,
    Sandbox,
    SandboxCommand,
    SandboxRun,
)
from plait.sandbox.bubblewrap import BubblewrapSandbox
from plait.sandbox.errors import (
    SandboxClosed,
    SandboxError,
    SandboxPolicyInvalid,
    SandboxUnavailable,
)
from plait.sandbox.policy import (
    DEFAULT_READ_DENY,
    GIB,
    HOME_SECRETS,
    MAX_DENY_MATCHES,
    MIB,
    WORKSPACE_POLL_SECONDS,
    SandboxLimits,
    SandboxPolicy,
)
from plait.sandbox.probe import PROBE_TIMEOUT_SECONDS
from plait.sandbox.unsandboxed import UnsandboxedRunner

__all__ = [
    "DEFAULT_READ_DENY",
    "GIB",
    "HOME_SECRETS",
    "KILL_GRACE_SECONDS",
    "MAX_DENY_MATCHES",
    "MIB",
    "PROBE_TIMEOUT_SECONDS",
    "TRUNCATION_MARKER",
    "WORKSPACE_POLL_SECONDS",
    "BubblewrapSandbox",
    "RunningProcess",
    "Sandbox",
    "SandboxClosed",
    "SandboxCommand",
    "SandboxError",
    "SandboxLimits",
    "SandboxPolicy",
    "SandboxPolicyInvalid",
    "SandboxRun",
    "SandboxUnavailable",
    "UnsandboxedRunner",
]
