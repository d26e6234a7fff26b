"""Typed errors of the managed skill mode, each with a stable ``code``.

The model reads them through :func:`render_error` (``Error (NOT_FOUND): Skill 'x' not found.
…``); application code catches the classes. Every class but :class:`SkillNotFound` (the
skills package's own, raised by both modes) derives from :class:`SkillManagerError`; both derive
from :class:`~plait.skills.errors.SkillError`. :data:`ManagerError` catches all of them.

===================  ==========================  ===============================================
code                 class                       raised when
===================  ==========================  ===============================================
INVALID_CONFIG       InvalidSkillsConfig         ``create_skill_manager`` is misconfigured
NOT_FOUND            SkillNotFound               no (model-visible) skill has that name (the
                                                 skills package's error, shared by both modes)
ALREADY_LOADED       SkillAlreadyLoaded          ``load`` of a skill that is loaded
NOT_LOADED           SkillNotLoaded              ``unload``/``refresh``/a read of a skill that
                                                 is not loaded
LOAD_FAILED          SkillLoadFailed             reading the body, resolving tools or building the
                                                 workspace failed (nothing was loaded)
TOOL_COLLISION       SkillToolCollision          a skill tool's name is taken (another skill, a
                                                 lifecycle tool, an agent or middleware tool)
TOOL_INVALID         SkillToolInvalid            a tool name breaks the naming rule, or one skill
                                                 has two tools with one name
DENIED               SkillGateDenied             the gate refused a gated tool call
SCRIPT_REJECTED      SkillScriptRejected         a script argument starts with ``-`` or has a NUL
SCRIPT_TIMEOUT       SkillScriptTimeout          a script ran past its timeout (it was killed)
SCRIPT_FAILED        SkillScriptFailed           a script exited non-zero (or could not start)
SANDBOX_UNAVAILABLE  SkillSandboxUnavailable     a skill with scripts, but the script sandbox does
                                                 not work here (``cause``: why; message: the fix)
REFRESH_FAILED       SkillRefreshFailed          preparing a new version failed; the old one stays
DISPOSED             SkillManagerDisposed        the manager was disposed
===================  ==========================  ===============================================
"""

from __future__ import annotations

from enum import StrEnum

from plait.errors import ConfigurationError
from plait.skills.errors import SkillError, SkillNotFound

__all__ = [
    "ErrorCode",
    "InvalidSkillsConfig",
    "ManagerError",
    "SkillAlreadyLoaded",
    "SkillGateDenied",
    "SkillLoadFailed",
    "SkillManagerDisposed",
    "SkillManagerError",
    "SkillNotLoaded",
    "SkillRefreshFailed",
    "SkillSandboxUnavailable",
    "SkillScriptFailed",
    "SkillScriptRejected",
    "SkillScriptTimeout",
    "SkillToolCollision",
    "SkillToolInvalid",
    "error_code",
    "render_error",
]


class ErrorCode(StrEnum):
    INVALID_CONFIG = "INVALID_CONFIG"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_LOADED = "ALREADY_LOADED"
    NOT_LOADED = "NOT_LOADED"
    LOAD_FAILED = "LOAD_FAILED"
    TOOL_COLLISION = "TOOL_COLLISION"
    TOOL_INVALID = "TOOL_INVALID"
    DENIED = "DENIED"
    SCRIPT_REJECTED = "SCRIPT_REJECTED"
    SCRIPT_TIMEOUT = "SCRIPT_TIMEOUT"
    SCRIPT_FAILED = "SCRIPT_FAILED"
    SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"
    REFRESH_FAILED = "REFRESH_FAILED"
    DISPOSED = "DISPOSED"


class SkillManagerError(SkillError):
    """Base class; ``code`` is one of :class:`ErrorCode`, ``message`` the text without it."""

    code: ErrorCode = ErrorCode.LOAD_FAILED

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class InvalidSkillsConfig(SkillManagerError, ConfigurationError):
    code = ErrorCode.INVALID_CONFIG


class SkillAlreadyLoaded(SkillManagerError):
    code = ErrorCode.ALREADY_LOADED


class SkillNotLoaded(SkillManagerError):
    code = ErrorCode.NOT_LOADED


class SkillLoadFailed(SkillManagerError):
    code = ErrorCode.LOAD_FAILED


class SkillToolCollision(SkillManagerError):
    code = ErrorCode.TOOL_COLLISION


class SkillToolInvalid(SkillManagerError):
    code = ErrorCode.TOOL_INVALID


class SkillGateDenied(SkillManagerError):
    code = ErrorCode.DENIED


class SkillScriptRejected(SkillManagerError):
    code = ErrorCode.SCRIPT_REJECTED


class SkillScriptTimeout(SkillManagerError):
    code = ErrorCode.SCRIPT_TIMEOUT


class SkillScriptFailed(SkillManagerError):
    code = ErrorCode.SCRIPT_FAILED


class SkillSandboxUnavailable(SkillManagerError):
    """Loading a skill with scripts failed because the sandbox does not work on this machine;
    ``cause`` is :attr:`plait.sandbox.SandboxUnavailable.cause`. Nothing was loaded, and
    nothing falls back to running unsandboxed."""

    code = ErrorCode.SANDBOX_UNAVAILABLE

    def __init__(self, message: str, cause: str = "unknown") -> None:
        self.cause = cause
        super().__init__(message)


class SkillRefreshFailed(SkillManagerError):
    code = ErrorCode.REFRESH_FAILED


class SkillManagerDisposed(SkillManagerError):
    code = ErrorCode.DISPOSED


ManagerError = (SkillManagerError, SkillNotFound)
"""What the manager raises on purpose: catch this tuple to render every one for the model."""


def error_code(err: SkillManagerError | SkillNotFound) -> ErrorCode:
    """The stable code of ``err`` (``NOT_FOUND`` for :class:`SkillNotFound`)."""
    return ErrorCode.NOT_FOUND if isinstance(err, SkillNotFound) else err.code


def render_error(err: SkillManagerError | SkillNotFound) -> str:
    """The text a model reads for ``err``: ``Error (NOT_FOUND): Skill 'x' not found. …``."""
    return f"Error ({error_code(err)}): {err}"
