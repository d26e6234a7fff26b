"""``UnsandboxedRunner``: no isolation at all, chosen only explicitly (``--sandbox none``).

The process runs as the agent's user, in its own session with the command's environment and
working folder, output capped, killed with its process group at the deadline. It can read and
write whatever that user can, reach the network, use any amount of memory, and a child that
leaves the process group (``setsid``, a double fork) survives the kill. Every result and event
names it ``"unsandboxed"``. Use it for skills you wrote yourself, or inside a container that is
already the sandbox.
"""

from __future__ import annotations

from plait.sandbox.base import SandboxCommand
from plait.sandbox.process import Launch, ProcessSandbox, kill_group

__all__ = ["UnsandboxedRunner"]


class UnsandboxedRunner(ProcessSandbox):
    """Runs commands directly (see the module docstring); ``check()`` always succeeds."""

    name = "unsandboxed"

    def launch(self, command: SandboxCommand) -> Launch:
        return Launch(argv=command.argv, kill_tree=kill_group, after_exit=kill_group)

    def __repr__(self) -> str:
        return "UnsandboxedRunner()"
