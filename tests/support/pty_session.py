"""A spawned ``plait`` on a pseudo-terminal, as a person uses it: read what it shows until a text
appears (with a deadline), type keys, end it.

::

    with PtySession("chat", "--model", spec, home=tmp_path) as chat:
        chat.expect("you> ")
        chat.send("hi\\r")
        chat.expect("Hello.")
        assert chat.end() == 0  # Ctrl-D at the prompt, then the exit status

The child gets a clean environment (:func:`clean_env`: no ``*_API_KEY``, no ``PLAIT_MODEL`` or
``NO_COLOR``, its own ``HOME`` and ``PLAIT_HOME``, ``TERM=xterm``, a fixed width) and the pty as
standard output and error, and as standard input unless ``stdin`` says otherwise. What it shows
is kept in :attr:`PtySession.seen` with ANSI escape codes removed. Every wait ends by
:data:`DEADLINE` (a failed assertion quoting the end of the screen); leaving the ``with`` block
kills a child that is still running, so a failing test leaves no process behind.
"""

from __future__ import annotations

import codecs
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO

__all__ = ["ANSI", "DEADLINE", "ENTRY_POINT", "PtySession", "clean_env"]

DEADLINE = 60.0
"""Seconds a spawned ``plait`` may take to show what a test waits for, or to end."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""An ANSI escape code (colour, cursor movement, bracketed-paste mode)."""

ENTRY_POINT = Path(sys.executable).parent / "plait"
"""The venv's ``plait`` console script, as a person runs it."""

_MODULE = [
    sys.executable,
    "-c",
    # Ctrl-C as at a terminal: a test run started in the background (nohup, ``cmd &`` in a
    # script, some CI runners) ignores SIGINT, and a child inherits that; Python then installs
    # no KeyboardInterrupt handler and asyncio.Runner none of its own.
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from plait.cli import main; main()",
]
_SHOWN = 3000


def clean_env(
    home: Path, *, columns: int = 120, extra: dict[str, str] | None = None
) -> dict[str, str]:
    """This process's environment for a child ``plait`` in ``home``: no provider keys, no
    default model, colour allowed, ``HOME``/``PLAIT_HOME`` under ``home``; ``extra`` is added
    before those (a test's ``ANTHROPIC_API_KEY``)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(extra or {})
    env.update(HOME=str(home), PLAIT_HOME=str(home / "plait"), COLUMNS=str(columns), TERM="xterm")
    env.pop("PLAIT_MODEL", None)
    env.pop("NO_COLOR", None)
    return env


class PtySession:
    """``plait ARGS`` spawned with a pseudo-terminal as its terminal.

    ``entry_point`` runs the venv's console script (:data:`ENTRY_POINT`) instead of
    ``python -c "from plait.cli import main; main()"`` (which, unlike the console script,
    takes Ctrl-C as a person's terminal does even when the tests run with SIGINT ignored);
    ``stdin`` is the pty unless given (e.g. :data:`subprocess.DEVNULL` for a run that must not
    read the keyboard); ``cwd`` defaults to ``home``.
    """

    def __init__(
        self,
        *args: str,
        home: Path,
        cwd: Path | None = None,
        columns: int = 120,
        extra_env: dict[str, str] | None = None,
        entry_point: bool = False,
        stdin: int | IO[bytes] | None = None,
        deadline: float = DEADLINE,
    ) -> None:
        if entry_point:
            assert ENTRY_POINT.exists(), f"no plait entry point next to {sys.executable}"
        command = [str(ENTRY_POINT)] if entry_point else list(_MODULE)
        self.deadline = deadline
        self.primary, secondary = pty.openpty()
        try:
            self.process = subprocess.Popen(
                [*command, *args],
                stdin=secondary if stdin is None else stdin,
                stdout=secondary,
                stderr=secondary,
                env=clean_env(home, columns=columns, extra=extra_env),
                cwd=cwd or home,
            )
        except BaseException:
            os.close(self.primary)
            raise
        finally:
            os.close(secondary)
        self.seen = ""
        """Everything shown so far, ANSI codes removed."""
        self._position = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._closed = False
        self._ended = False

    def __enter__(self) -> PtySession:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if not self._closed:
            self.close(kill=True)

    def _read(self, until: float, waiting_for: str) -> bool:
        """One chunk into :attr:`seen`; False once the child closed the terminal."""
        left = until - time.monotonic()
        assert left > 0, f"never saw {waiting_for}; saw:\n{self.seen[-_SHOWN:]}"
        ready, _, _ = select.select([self.primary], [], [], left)
        if not ready:
            return True
        try:
            data = os.read(self.primary, 65536)
        except OSError:  # EIO: every copy of the terminal's other side is closed
            data = b""
        if not data:
            self._ended = True
            self.seen = ANSI.sub("", self.seen + self._decoder.decode(b"", final=True))
            return False
        self.seen = ANSI.sub("", self.seen + self._decoder.decode(data))
        return True

    def expect(self, text: str) -> str:
        """Read until ``text`` shows (ANSI codes removed) after what the last expect matched;
        :attr:`seen`. Fails after :attr:`deadline`, or when ``plait`` ends first."""
        until = time.monotonic() + self.deadline
        while text not in self.seen[self._position :]:
            assert not self._ended, (
                f"plait ended before showing {text!r}; saw:\n{self.seen[-_SHOWN:]}"
            )
            self._read(until, repr(text))
        self._position = self.seen.index(text, self._position) + len(text)
        return self.seen

    def read_to_end(self) -> str:
        """Read until ``plait`` closes the terminal (it ended); :attr:`seen`. Fails after
        :attr:`deadline`."""
        until = time.monotonic() + self.deadline
        while not self._ended and self._read(until, "the end of plait's output"):
            pass
        return self.seen

    def send(self, text: str) -> None:
        """Type ``text`` (``"\\r"`` is Enter, ``"\\x03"`` Ctrl-C, ``"\\x04"`` Ctrl-D)."""
        os.write(self.primary, text.encode())

    def end(self) -> int:
        """Ctrl-D at the prompt, then :meth:`close`: the exit status."""
        self.send("\x04")
        return self.close()

    def kill(self) -> int:
        """End ``plait`` now (a test failed) and close the terminal; the exit status."""
        return self.close(kill=True)

    def close(self, *, kill: bool = False) -> int:
        """Wait for ``plait`` to end (at most :attr:`deadline`; kill it first when ``kill``) and
        close the terminal; the exit status."""
        if self._closed:
            return self.process.returncode
        try:
            if kill:
                self.process.kill()
            return self.process.wait(timeout=self.deadline)
        finally:
            if self.process.poll() is None:  # it outlived the deadline: leave nothing behind
                self.process.kill()
                self.process.wait(timeout=self.deadline)
            self._closed = True
            os.close(self.primary)
