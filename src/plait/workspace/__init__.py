"""The workspace toolset: file and shell tools confined to one folder (see ``README.md``).

::

    from plait.workspace import Workspace

    workspace = Workspace(".", allow=["write"])  # shell calls ask `approve`, or are refused
    agent = Agent(model, tools=workspace.tools())
"""

from __future__ import annotations

from plait.lazy import lazy_exports

TYPE_CHECKING = False

if TYPE_CHECKING:
    from plait.workspace.events import ProjectContextLoaded, ProjectFile
    from plait.workspace.files import WorkspaceError
    from plait.workspace.paths import WorkspaceRoot
    from plait.workspace.project import ProjectContext
    from plait.workspace.toolset import ACTIONS, Approver, Workspace, WorkspaceDenied

__all__ = [
    "ACTIONS",
    "Approver",
    "ProjectContext",
    "ProjectContextLoaded",
    "ProjectFile",
    "Workspace",
    "WorkspaceDenied",
    "WorkspaceError",
    "WorkspaceRoot",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "plait.workspace.files": ("WorkspaceError",),
            "plait.workspace.paths": ("WorkspaceRoot",),
            "plait.workspace.events": ("ProjectContextLoaded", "ProjectFile"),
            "plait.workspace.project": ("ProjectContext",),
            "plait.workspace.toolset": ("ACTIONS", "Approver", "Workspace", "WorkspaceDenied"),
        },
    )
