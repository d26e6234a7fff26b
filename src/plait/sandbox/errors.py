"""Typed errors of the sandbox layer; every message says what to do next."""

from __future__ import annotations

from plait.errors import ConfigurationError, PlaitError

__all__ = ["SandboxClosed", "SandboxError", "SandboxPolicyInvalid", "SandboxUnavailable"]


class SandboxError(PlaitError):
    """Base class of the sandbox layer's errors."""


class SandboxPolicyInvalid(SandboxError, ConfigurationError):
    """A :class:`~plait.sandbox.SandboxPolicy` that cannot work (a bad limit, a relative path,
    a ``write_allow`` path that does not exist), or a ``SandboxCommand`` that cannot run (no
    argv, no finite timeout)."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot run on this machine. ``cause`` names why (``bwrap-missing``,
    ``prlimit-missing``, ``user-namespaces-blocked``, ``apparmor-userns``, ``proc-mount-refused``,
    ``mount-propagation-refused``, ``seccomp-unsupported``, ``seccomp-refused``,
    ``probe-timeout``, ``bwrap-failed``); the message gives the fix.
    Nothing ever falls back to running unsandboxed because of it."""

    def __init__(self, cause: str, message: str) -> None:
        self.cause = cause
        super().__init__(message)


class SandboxClosed(SandboxError):
    """``run`` after ``aclose()``: build a new sandbox."""
